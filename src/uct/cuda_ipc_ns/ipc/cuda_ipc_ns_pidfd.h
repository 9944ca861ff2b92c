/*
 * cuda_ipc_ns: process handles (pidfds) of peers, identity-checked.
 *
 * A pid names a process only inside one PID namespace and only until it is
 * reused; a pidfd names one process for its whole life and becomes readable
 * when it exits, whichever namespace the holder is in. Used by the fd
 * importer (pidfd_getfd) and by peer liveness checks (docs/security.md,
 * docs/architecture.md).
 */
#ifndef UCT_CUDA_IPC_NS_PIDFD_H
#define UCT_CUDA_IPC_NS_PIDFD_H

#include <ucs/type/status.h>
#include <stdint.h>
#include <sys/types.h>


/** pidfd_open(2): a pidfd (O_CLOEXEC) or -1 with errno set */
int uct_cuda_ipc_ns_pidfd_open(pid_t pid);


/** pidfd_getfd(2): a copy (O_CLOEXEC) of fd @a target_fd of the process, or
 *  -1 with errno set */
int uct_cuda_ipc_ns_pidfd_getfd(int pidfd, int target_fd);


/** Whether errno @a err of a pidfd call means "not allowed here" (seccomp,
 *  Yama, LSM: EPERM, EACCES; old kernel: ENOSYS) */
int uct_cuda_ipc_ns_pidfd_errno_is_blocked(int err);


/**
 * Open a pidfd of the process that has @a pid in OUR PID namespace and was
 * started at @a start_time (clock ticks after boot), checking that it is that
 * process and that it is still alive.
 *
 * @return UCS_OK with *pidfd_p;
 *         UCS_ERR_UNREACHABLE: no such process, another start time (the pid
 *             was reused) or it exited during the check;
 *         UCS_ERR_REJECTED: pidfd_open is blocked (errno in *errno_p);
 *         UCS_ERR_UNSUPPORTED: the process cannot be verified here (not
 *             visible in our /proc, no fdinfo);
 *         UCS_ERR_IO_ERROR: other failures.
 */
ucs_status_t uct_cuda_ipc_ns_pidfd_open_checked(uint32_t pid,
                                                uint64_t start_time,
                                                int *pidfd_p, int *errno_p);


/** Whether the process of @a pidfd has exited (poll, no wait) */
int uct_cuda_ipc_ns_pidfd_exited(int pidfd);

#endif
