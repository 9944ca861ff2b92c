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


/**
 * Check that the process of @a pidfd (pid @a pid, for logs) started at
 * @a start_time and is alive. Needs the process visible in our /proc.
 *
 * @return UCS_OK; UCS_ERR_UNREACHABLE when it exited or started at another
 *         time; UCS_ERR_UNSUPPORTED when it cannot be checked here.
 */
ucs_status_t uct_cuda_ipc_ns_pidfd_check_start(int pidfd, uint32_t pid,
                                               uint64_t start_time);


/**
 * The pid of the process of @a pidfd in its own PID namespace (the last
 * NSpid of its fdinfo). @return UCS_OK, or UCS_ERR_UNSUPPORTED when our
 * /proc does not show it (another branch of the PID namespace tree, or no
 * NSpid: *pid_p is then not set).
 */
ucs_status_t uct_cuda_ipc_ns_pidfd_inner_pid(int pidfd, pid_t *pid_p);


/**
 * Inode of the PID namespace of the process of @a pidfd, from the kernel
 * (PIDFD_GET_PID_NAMESPACE, Linux 6.11), visible or not.
 * @return UCS_OK, or UCS_ERR_UNSUPPORTED (older kernel, refused).
 */
ucs_status_t uct_cuda_ipc_ns_pidfd_pid_ns(int pidfd, uint64_t *pid_ns_p);


/** Whether the process of @a pidfd has exited (poll, no wait) */
int uct_cuda_ipc_ns_pidfd_exited(int pidfd);

#endif
