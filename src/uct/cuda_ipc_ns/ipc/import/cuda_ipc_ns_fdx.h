/*
 * cuda_ipc_ns: fd exchange, importer side (the client of the broker).
 *
 * The owner of a VMM allocation exports it as a POSIX fd and registers that
 * fd with its broker (cuda_ipc_ns_broker.h). An importer turns the POSIX-fd
 * handle of a remote key into an fd of its own:
 *
 *  - same PID namespace: pidfd_open(pid), check the process start time
 *    against the key (pid reuse guard), check the process is still alive,
 *    then pidfd_getfd(). When pidfd_getfd is blocked (seccomp, Yama: EPERM,
 *    EACCES, ENOSYS) this is remembered for the process and the broker is
 *    used instead.
 *  - otherwise: ask the owner's broker over its AF_UNIX socket, presenting
 *    the registration token of the key; the fd comes back by SCM_RIGHTS.
 *    The broker is believed only once the kernel's credentials of its
 *    socket say it is the key's owner (cuda_ipc_ns_owner.h), and a pathname
 *    socket is reached through its checked directory (cuda_ipc_ns_sockdir.h).
 *
 * Who may obtain an fd, and why: docs/security.md.
 */
#ifndef UCT_CUDA_IPC_NS_FDX_H
#define UCT_CUDA_IPC_NS_FDX_H

#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>
#include <stdint.h>


/**
 * Import the owner's fd of a POSIX-fd key (of one allocation: the chunks of
 * a key of several are uct_cuda_ipc_ns_fdx_chunk_fds()'s) into this
 * process. The key gives
 * the owner (pid, pid_ns, start_time), its fd (handle.posix.fd and
 * alloc_id) and its broker (broker_addr, token).
 *
 * The pidfd path takes whatever file the owner has at that fd number when
 * the call runs; the caller must check that it is the allocation it expects
 * (import it with the driver and compare the allocation id / size), since an
 * owner that released the allocation may have reused the fd number. The
 * broker path hands out only registered fds.
 *
 * The whole import, broker connect to fd, has one deadline: cfg->timeout
 * from the call.
 *
 * @param [out] fd_p           new fd (O_CLOEXEC) owned by the caller.
 * @param [out] owner_pidfd_p  NULL, or with UCS_OK a pidfd of the owner as
 *                             the import checked it (the caller's, for a
 *                             liveness watch), -1 when there is none.
 *
 * @return UCS_OK;
 *         UCS_ERR_UNREACHABLE: the owner is gone (no process, start time does
 *             not match), the broker cannot be reached, or mode "pidfd" with an
 *             owner in another PID namespace;
 *         UCT_CUDA_IPC_NS_ERR_NO_PERMISSION (UCS_ERR_REJECTED): pidfd_getfd
 *             blocked (mode "pidfd"), the broker refused our uid, or the
 *             broker is not the key's owner;
 *         UCS_ERR_NO_ELEM: the owner has no such fd / registration (unknown
 *             or released token);
 *         UCS_ERR_TIMED_OUT: the broker did not answer within cfg->timeout;
 *         UCS_ERR_CONNECTION_RESET: the broker closed without an answer;
 *         UCS_ERR_UNSUPPORTED: the broker speaks another protocol version;
 *         UCS_ERR_INVALID_PARAM: not a POSIX-fd key, a bad mode, a broker
 *             path that is not a broker socket, an unsafe socket directory,
 *             or the broker found our request malformed;
 *         UCS_ERR_IO_ERROR: other failures.
 */
ucs_status_t uct_cuda_ipc_ns_fdx_import(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_rkey_info_t *key,
                                        int *fd_p, int *owner_pidfd_p);


/**
 * The layout of a key of several allocations (UCT_CUDA_IPC_NS_HANDLE_CHUNKS),
 * asked of the owner's broker page by page (docs/framework-memory.md), each
 * page from a broker checked as the key's owner, all within cfg->timeout;
 * the answer must give exactly the key's number of chunks, tiling its
 * length (uct_cuda_ipc_ns_broker_proto_layout_check()).
 *
 * @param [out] chunks_p  key->handle.posix.num_chunks entries, the caller
 *                        frees them (ucs_free).
 *
 * @return UCS_OK, the statuses of uct_cuda_ipc_ns_fdx_import() for the
 *         broker, or UCS_ERR_IO_ERROR for a hostile or malformed layout.
 */
ucs_status_t uct_cuda_ipc_ns_fdx_layout(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_rkey_info_t *key,
                                        uct_cuda_ipc_ns_broker_proto_chunk_t **chunks_p);


/**
 * The fds of chunks @a first..first+count-1 (count 1..
 * UCT_CUDA_IPC_NS_BROKER_FDS_MAX) of a key of several allocations, in one
 * GET_CHUNK_FDS request to the owner's broker, checked as the key's owner,
 * within cfg->timeout (docs/framework-memory.md). The reply is hostile until
 * checked: it must name the registration, first and count asked, give each
 * chunk the allocation id of @a chunks (the checked layout, indexed by chunk),
 * and carry exactly count fds in one message; otherwise, and on a refusal,
 * every fd that came is closed.
 *
 * @param [out] fds            count fds (O_CLOEXEC), chunk by chunk, owned
 *                             by the caller.
 * @param [out] owner_pidfd_p  as for uct_cuda_ipc_ns_fdx_import().
 *
 * @return UCS_OK, the statuses of uct_cuda_ipc_ns_fdx_import() for the
 *         broker (UCS_ERR_NO_ELEM: a chunk is no longer the registration's
 *         allocation), UCS_ERR_INVALID_PARAM for a bad request (not a key of
 *         several allocations, chunks beyond it, mode 'pidfd'), or
 *         UCS_ERR_IO_ERROR for a hostile or malformed reply.
 */
ucs_status_t uct_cuda_ipc_ns_fdx_chunk_fds(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                           const uct_cuda_ipc_ns_rkey_info_t *key,
                                           const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                           uint32_t first, uint32_t count,
                                           int *fds, int *owner_pidfd_p);


/**
 * A connection to the broker of @a key, believed only once it is checked
 * as the key's owner (uct_cuda_ipc_ns_owner_check()), connected within
 * cfg->timeout: for requests that keep a connection (COPY,
 * docs/owner-copies.md).
 *
 * @return UCS_OK with *sock_p (the caller closes it), or the statuses of
 *         uct_cuda_ipc_ns_fdx_import() for the connect and the owner check.
 */
ucs_status_t
uct_cuda_ipc_ns_fdx_broker_session(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                   const uct_cuda_ipc_ns_rkey_info_t *key,
                                   int *sock_p);


/**
 * Whether pidfd_getfd() can be used by this process: probed once per process
 * (again after fork) by taking one of our own fds through a pidfd, which
 * fails under a seccomp filter or on a kernel without the call. Also turns
 * false when an import sees EPERM/EACCES/ENOSYS from pidfd_getfd (Yama).
 */
int uct_cuda_ipc_ns_fdx_pidfd_usable(void);


/* Number of fds imported through pidfd_getfd and through a broker (a
 * chunk's fd counts as one) */
void uct_cuda_ipc_ns_fdx_get_stats(uint64_t *pidfd_imports,
                                   uint64_t *broker_imports);

#endif
