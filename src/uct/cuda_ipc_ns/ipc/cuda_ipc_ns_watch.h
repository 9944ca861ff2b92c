/*
 * cuda_ipc_ns: peer liveness watch (docs/architecture.md, "Peer failure").
 *
 * A watch is a pidfd of the peer process: it becomes readable when the peer
 * exits, in whatever PID namespace either side lives. It is obtained
 *  - in our PID namespace: pidfd_open(pid), identity-checked by start time;
 *  - from another PID namespace, where the peer's pid means nothing to us:
 *    from the kernel, as the credentials of the peer's fd broker socket
 *    (SO_PEERPIDFD on a connection to it).
 * Never through /proc/<pid> of a foreign namespace.
 */
#ifndef UCT_CUDA_IPC_NS_WATCH_H
#define UCT_CUDA_IPC_NS_WATCH_H

#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>
#include <stdint.h>


/**
 * Watch a peer of our PID namespace.
 *
 * @return UCS_OK with *fd_p; UCS_ERR_UNREACHABLE when it is gone (or its pid
 *         was reused); other errors when it cannot be watched this way.
 */
ucs_status_t uct_cuda_ipc_ns_watch_pid(uint32_t pid, uint64_t start_time,
                                       int *fd_p);


/**
 * Watch the owner of the fd broker named in @a key (a VMM key), connecting
 * within @a timeout seconds.
 *
 * @return UCS_OK with *fd_p; UCS_ERR_UNREACHABLE when the broker is gone;
 *         UCS_ERR_UNSUPPORTED when the kernel lacks SO_PEERPIDFD.
 */
ucs_status_t uct_cuda_ipc_ns_watch_broker(const uct_cuda_ipc_ns_rkey_info_t *key,
                                          double timeout, int *fd_p);


/** Whether the watched peer has exited */
int uct_cuda_ipc_ns_watch_exited(int fd);

#endif
