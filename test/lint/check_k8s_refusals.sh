#!/usr/bin/env bash
# check_k8s.py refuses what docs/kubernetes.md says a pod must not have or
# must have: each manifest below is one of contrib/k8s with one thing
# changed, and the checker must name it (exit 1 and the line).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
check=$top/test/lint/check_k8s.py
tmp=$(mktemp -d /tmp/check_k8s.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0

# refused NAME SOURCE SED EXPECTED: SOURCE changed by SED must be refused
# with a line matching EXPECTED
refused() {
    local out
    sed "$3" "$top/contrib/k8s/$2" >"$tmp/$1.yaml"
    if out=$(python3 "$check" "$tmp/$1.yaml" 2>&1); then
        echo "FAIL: $1: accepted"; failures=$((failures + 1))
    elif ! grep -q -- "$4" <<<"$out"; then
        echo "FAIL: $1: refused without '$4':"; echo "$out"; failures=$((failures + 1))
    else
        echo "PASS: $1 refused"
    fi
}

python3 "$check" "$top"/contrib/k8s/*.yaml >/dev/null ||
    { echo "FAIL: the manifests of contrib/k8s are refused"; exit 1; }
refused userns_without_setting nixl-pods-userns.yaml \
    '/UCX_CUDA_IPC_NS_USERNS_PEERS/d' 'hostUsers: false without UCX_CUDA_IPC_NS_USERNS_PEERS=y'
refused host_ipc nixl-pods.yaml 's/^spec:/spec:\n  hostIPC: true/' 'hostIPC: true'
refused host_pid nixl-pods.yaml 's/^spec:/spec:\n  hostPID: true/' 'hostPID: true'
refused no_gpu nixl-pods.yaml '/nvidia.com\/gpu/d' 'no nvidia.com/gpu limit'
refused sysv nixl-pods.yaml 's/cu_ipc_ns,cuda_copy,tcp/cu_ipc_ns,sysv,tcp/' 'names sm or sysv'
refused ptrace nixl-pods.yaml 's/^  - name: worker$/  - name: worker\n    securityContext: {capabilities: {add: [SYS_PTRACE]}}/' 'CAP_SYS_PTRACE'
echo "check_k8s_refusals: $failures failure(s)"
[ $failures -eq 0 ]
