/*
 * cuda_ipc_ns: peer liveness watch (docs/architecture.md, "Peer failure").
 *
 * A watch is a pidfd of the peer process: it becomes readable when the peer
 * exits, in whatever PID namespace either side lives. It is obtained
 *  - in our PID namespace: pidfd_open(pid), identity-checked by start time;
 *  - from another PID namespace, where the peer's pid means nothing to us:
 *    from the kernel, as the credentials of the peer's fd broker socket
 *    (SO_PEERPIDFD), taken by the first import from that broker once it is
 *    known to be the owner (cuda_ipc_ns_owner.h, cuda_ipc_ns_fdx.h).
 * Never through /proc/<pid> of a foreign namespace.
 */
#ifndef UCT_CUDA_IPC_NS_WATCH_H
#define UCT_CUDA_IPC_NS_WATCH_H

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


/** Whether the watched peer has exited */
int uct_cuda_ipc_ns_watch_exited(int fd);

#endif
