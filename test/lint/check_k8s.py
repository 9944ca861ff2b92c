#!/usr/bin/env python3
"""Check the Kubernetes manifests of contrib/k8s (README.md, "Kubernetes" and
"NIXL"): each file parses as YAML, each document is a Pod with its apiVersion,
kind and name, and the pods of a file can share GPU memory over cu_ipc_ns:
  - one runAsUser and runAsGroup for all of them (the broker serves its uid);
  - in every container, UCX_CUDA_IPC_NS_SOCK_DIR is the mount path of a
    hostPath volume, and that host path is the same in every pod;
  - UCX_TLS unset (UCX's shared-memory transports do not reach another
    IPC namespace), or naming cu_ipc_ns and tcp and not sm or sysv (sysv
    believes it reaches a pod of a shared IPC namespace, where it does not);
  - none of hostPID, hostIPC, hostNetwork, privileged, CAP_SYS_PTRACE or
    CAP_SYS_ADMIN (docs/kubernetes.md: none is needed, each widens what
    the pods reach);
  - a GPU (an nvidia.com/gpu limit) in every container;
  - with hostUsers: false, UCX_CUDA_IPC_NS_USERNS_PEERS=y in every
    container (each pod sees the other as the overflow uid), and the same
    hostUsers in every pod;
  - the module is found: UCX_PLUGIN_PATH or LD_PRELOAD is set.
Usage: check_k8s.py FILE...   (exit status 1 with a line per problem)
"""
import sys

try:
    import yaml
except ImportError:
    sys.exit("check_k8s.py: needs python3-yaml (contrib/setup-deps.sh installs it)")


def env_of(container):
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def check_pod(doc, where, problems, shared):
    spec = doc.get("spec") or {}
    sec = spec.get("securityContext") or {}
    shared.setdefault("uid", set()).add((sec.get("runAsUser"), sec.get("runAsGroup")))
    shared.setdefault("host_users", set()).add(spec.get("hostUsers", True))
    for key in ("hostPID", "hostIPC", "hostNetwork"):
        if spec.get(key):
            problems.append(f"{where}: {key}: true (not needed, docs/kubernetes.md)")
    host_paths = {v["name"]: v["hostPath"]["path"]
                  for v in spec.get("volumes", []) if "hostPath" in v}
    containers = spec.get("containers") or []
    if not containers:
        problems.append(f"{where}: no containers")
    for c in containers:
        cw = f"{where}, container {c.get('name')}"
        env = env_of(c)
        sock_dir = env.get("UCX_CUDA_IPC_NS_SOCK_DIR")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        if sock_dir is None:
            problems.append(f"{cw}: no UCX_CUDA_IPC_NS_SOCK_DIR")
        elif mounts.get(sock_dir) not in host_paths:
            problems.append(f"{cw}: UCX_CUDA_IPC_NS_SOCK_DIR={sock_dir} is not "
                            "the mount path of a hostPath volume")
        else:
            shared.setdefault("host_path", set()).add(host_paths[mounts[sock_dir]])
        if "UCX_TLS" in env:
            tls = env["UCX_TLS"].split(",")
            if "cu_ipc_ns" not in tls or "tcp" not in tls:
                problems.append(f"{cw}: UCX_TLS={','.join(tls)} lacks cu_ipc_ns or tcp")
            if "sm" in tls or "sysv" in tls:
                problems.append(f"{cw}: UCX_TLS names sm or sysv")
        csec = c.get("securityContext") or {}
        caps = set((csec.get("capabilities") or {}).get("add") or [])
        if csec.get("privileged") or caps & {"SYS_PTRACE", "SYS_ADMIN", "ALL"}:
            problems.append(f"{cw}: privileged or CAP_SYS_PTRACE/SYS_ADMIN "
                            "(not needed, docs/kubernetes.md)")
        limits = (c.get("resources") or {}).get("limits") or {}
        if not limits.get("nvidia.com/gpu"):
            problems.append(f"{cw}: no nvidia.com/gpu limit")
        if (spec.get("hostUsers", True) is False and
                env.get("UCX_CUDA_IPC_NS_USERNS_PEERS") not in ("y", "yes", "1", "on")):
            problems.append(f"{cw}: hostUsers: false without "
                            "UCX_CUDA_IPC_NS_USERNS_PEERS=y (the pods refuse "
                            "each other)")
        if not env.get("UCX_PLUGIN_PATH") and not env.get("LD_PRELOAD"):
            problems.append(f"{cw}: neither UCX_PLUGIN_PATH nor LD_PRELOAD")


def check_file(path):
    problems, shared = [], {}
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        return [f"{path}: {e}"]
    if len(docs) < 2:
        problems.append(f"{path}: {len(docs)} document(s), two pods expected")
    for i, doc in enumerate(docs):
        where = f"{path}, document {i + 1}"
        if not isinstance(doc, dict):
            problems.append(f"{where}: not a mapping")
            continue
        for key in ("apiVersion", "kind", "metadata", "spec"):
            if key not in doc:
                problems.append(f"{where}: no {key}")
        if doc.get("kind") != "Pod" or doc.get("apiVersion") != "v1":
            problems.append(f"{where}: not a v1 Pod")
            continue
        where = f"{path}, pod {(doc.get('metadata') or {}).get('name')}"
        check_pod(doc, where, problems, shared)
    if len(shared.get("uid", ())) > 1:
        problems.append(f"{path}: the pods run as different uids/gids: {shared['uid']}")
    if len(shared.get("host_users", ())) > 1:
        problems.append(f"{path}: hostUsers differs between the pods")
    if len(shared.get("host_path", ())) > 1:
        problems.append(f"{path}: the pods mount different socket directories: "
                        f"{shared['host_path']}")
    return problems


def main(paths):
    if not paths:
        sys.exit(__doc__)
    problems = [p for path in paths for p in check_file(path)]
    for p in problems:
        print(f"check_k8s.py: {p}", file=sys.stderr)
    print(f"check_k8s.py: {len(paths)} manifest(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
