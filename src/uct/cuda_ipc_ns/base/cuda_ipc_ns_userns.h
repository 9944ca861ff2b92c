/*
 * cuda_ipc_ns: peers of another user namespace, whose uid ours does not map
 * (pods with hostUsers: false; docs/security.md, "User-namespaced pods").
 */
#ifndef UCT_CUDA_IPC_NS_USERNS_H
#define UCT_CUDA_IPC_NS_USERNS_H

#include <sys/types.h>


/**
 * Nonzero when @a uid, a peer's as SO_PEERCRED gives it, is the overflow
 * uid (/proc/sys/kernel/overflowuid) and our user namespace leaves uids
 * unmapped: the kernel names a peer whose uid it cannot map so. In the
 * initial user namespace every uid is mapped: 0.
 */
int uct_cuda_ipc_ns_userns_unmapped(uid_t uid);


/**
 * Whether a peer of uid @a uid that is neither ours nor the allowed one is
 * trusted: only an unmapped one (above), and only with @a userns_peers
 * (UCX_CUDA_IPC_NS_USERNS_PEERS=y). The token and the permissions of the
 * socket volume then decide.
 */
int uct_cuda_ipc_ns_userns_trusted(uid_t uid, int userns_peers);


/**
 * For the refusal's log line: a text naming the setting when @a uid is
 * unmapped (above), "" otherwise.
 */
const char *uct_cuda_ipc_ns_userns_hint(uid_t uid);

#endif
