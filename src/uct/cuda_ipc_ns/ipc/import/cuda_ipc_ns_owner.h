/*
 * cuda_ipc_ns: is the broker we reached the owner of the key?
 * (docs/security.md, "The importer authenticates the broker")
 *
 * Whoever listens at a key's broker address answers; an fd it sends would
 * be mapped and read or written. So before a word of its answer is
 * believed, the kernel's credentials of the listening socket are checked
 * against the key: the uid must be ours or the allowed uid; the process
 * must live in the key's PID namespace (PIDFD_GET_PID_NAMESPACE on its
 * SO_PEERPIDFD) and, where our /proc shows it, have the key's pid there and
 * the key's start time. What cannot be checked on a kernel (SO_PEERPIDFD:
 * Linux 6.5, the namespace ioctl: 6.11) is said once in a debug line.
 */
#ifndef UCT_CUDA_IPC_NS_OWNER_H
#define UCT_CUDA_IPC_NS_OWNER_H

#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>


/**
 * Check the broker at the other end of connected socket @a sock (@a name,
 * printable, for logs) against the owner of @a key.
 *
 * @param allowed_uid  the uid trusted besides ours, or -1.
 * @param userns_peers nonzero: also a broker of a uid our user namespace
 *                     does not map (cuda_ipc_ns_userns.h).
 * @param pidfd_p      with UCS_OK: a pidfd of the owner (O_CLOEXEC, the
 *                     caller's), or -1 when the kernel gives none.
 *
 * @return UCS_OK; UCT_CUDA_IPC_NS_ERR_NO_PERMISSION (UCS_ERR_REJECTED) when
 *         it is not the owner (logged as an error with the cause);
 *         UCS_ERR_UNREACHABLE when the owner exited meanwhile;
 *         UCS_ERR_IO_ERROR when the credentials cannot be read.
 */
ucs_status_t uct_cuda_ipc_ns_owner_check(int sock, const char *name,
                                         const uct_cuda_ipc_ns_rkey_info_t *key,
                                         int allowed_uid, int userns_peers,
                                         int *pidfd_p);

#endif
