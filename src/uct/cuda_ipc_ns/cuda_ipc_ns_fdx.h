/*
 * cuda_ipc_ns: fd exchange, importer side (DESIGN.md 4.3).
 *
 * The owner of a VMM allocation exports it as a POSIX fd and registers that
 * fd with its broker (cuda_ipc_ns_broker.h). An importer turns the fd
 * descriptor found in a remote key into an fd of its own:
 *
 *  - same PID namespace: pidfd_open(pid), check the process start time
 *    against the key (pid reuse guard), check the process is still alive,
 *    then pidfd_getfd(). When pidfd_getfd is blocked (seccomp, Yama: EPERM,
 *    EACCES, ENOSYS) this is remembered for the process and the broker is
 *    used instead.
 *  - otherwise: ask the owner's broker over its AF_UNIX socket, presenting
 *    the registration token of the key; the fd comes back by SCM_RIGHTS.
 */
#ifndef UCT_CUDA_IPC_NS_FDX_H
#define UCT_CUDA_IPC_NS_FDX_H

#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>
#include <stdint.h>


typedef enum {
    UCT_CUDA_IPC_NS_FDX_AUTO,   /* pidfd in the same PID ns, else the broker */
    UCT_CUDA_IPC_NS_FDX_PIDFD,  /* pidfd_getfd only */
    UCT_CUDA_IPC_NS_FDX_BROKER, /* broker only */
    UCT_CUDA_IPC_NS_FDX_LAST
} uct_cuda_ipc_ns_fdx_mode_t;


/* UCX 1.13.1 has no UCS_ERR_NO_PERMISSION: permission refusals (pidfd_getfd
 * blocked, uid refused by the broker) are reported as this status */
#define UCT_CUDA_IPC_NS_ERR_NO_PERMISSION  UCS_ERR_REJECTED


/* "auto", "pidfd", "broker", NULL: for a UCS_CONFIG_TYPE_ENUM config field */
extern const char *uct_cuda_ipc_ns_fdx_mode_names[];


typedef struct uct_cuda_ipc_ns_fdx_config {
    uct_cuda_ipc_ns_fdx_mode_t mode;
    /* NULL or "": the broker listens on an abstract socket with a random
     * name (reachable only from the same network namespace). Otherwise a
     * pathname socket in this directory, which is created with mode 0700
     * when absent and refused when it is not owned by our effective uid or
     * grants any group/other permission. */
    const char                 *sock_dir;
    /* seconds; bounds every connect/send/receive of the exchange */
    double                     timeout;
    /* uid allowed to fetch fds from our broker besides our own effective
     * uid, or -1 for none. A pathname socket in a 0700 directory is reachable
     * by another uid only when that uid can traverse the directory (root). */
    int                        allowed_uid;
} uct_cuda_ipc_ns_fdx_config_t;


/* What an importer knows about an exported fd, from the remote key */
typedef struct uct_cuda_ipc_ns_fd_desc {
    uint32_t pid;         /* owner pid in the owner's PID namespace */
    uint64_t pid_ns;      /* owner's PID namespace inode */
    uint64_t start_time;  /* owner's start time (pid reuse guard) */
    int32_t  fd;          /* fd number in the owner */
    uint64_t alloc_id;    /* owner's allocation id */
    uint8_t  token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    uint8_t  broker_addr_len;
    char     broker_addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
} uct_cuda_ipc_ns_fd_desc_t;


/**
 * Import the owner's fd into this process.
 *
 * The pidfd path takes whatever file the owner has at desc->fd when the call
 * runs; the caller must check that it is the allocation it expects (import it
 * with the driver and compare the allocation id / size), since an owner that
 * released the allocation may have reused the fd number. The broker path
 * hands out only registered fds.
 *
 * @param [out] fd_p  new fd (O_CLOEXEC) owned by the caller.
 *
 * @return UCS_OK;
 *         UCS_ERR_UNREACHABLE: the owner is gone (no process, start time does
 *             not match), the broker cannot be reached, or mode "pidfd" with an
 *             owner in another PID namespace;
 *         UCT_CUDA_IPC_NS_ERR_NO_PERMISSION (UCS_ERR_REJECTED): pidfd_getfd
 *             blocked (mode "pidfd"), or the broker refused our uid;
 *         UCS_ERR_NO_ELEM: the owner has no such fd / registration (unknown
 *             or released token);
 *         UCS_ERR_TIMED_OUT: the broker did not answer within cfg->timeout;
 *         UCS_ERR_CONNECTION_RESET: the broker closed without an answer;
 *         UCS_ERR_UNSUPPORTED: the broker speaks another protocol version;
 *         UCS_ERR_IO_ERROR / UCS_ERR_INVALID_PARAM: other failures.
 */
ucs_status_t uct_cuda_ipc_ns_fdx_import(const uct_cuda_ipc_ns_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_rkey_info_t *key,
                                        int *fd_p);


/**
 * Whether pidfd_getfd() can be used by this process: probed once per process
 * (again after fork) by taking one of our own fds through a pidfd, which
 * fails under a seccomp filter or on a kernel without the call. Also turns
 * false when an import sees EPERM/EACCES/ENOSYS from pidfd_getfd (Yama).
 */
int uct_cuda_ipc_ns_fdx_pidfd_usable(void);


/* Number of imports done through pidfd_getfd and through a broker */
void uct_cuda_ipc_ns_fdx_get_stats(uint64_t *pidfd_imports,
                                   uint64_t *broker_imports);


/* Human readable form of a broker address, abstract names with '@' */
const char *uct_cuda_ipc_ns_fdx_addr_str(const char *addr, uint8_t addr_len,
                                         char *buf, size_t max);

#endif
