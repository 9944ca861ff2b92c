/*
 * cuda_ipc_ns: one message with a few fds over a Unix socket (SCM_RIGHTS).
 * The broker replies, the importer receives and the test harness talks to
 * its peers through these functions only, so every receiver gets the same
 * checks (docs/security.md).
 */
#ifndef UCT_CUDA_IPC_NS_SCM_H
#define UCT_CUDA_IPC_NS_SCM_H

#include <ucs/type/status.h>
#include <stddef.h>


/* Most fds one message carries here (the kernel allows 253, SCM_MAX_FD) */
#define UCT_CUDA_IPC_NS_SCM_MAX_FDS  16


/**
 * Send @a len bytes at @a buf as one message, with @a fd attached by
 * SCM_RIGHTS when @a fd >= 0 (-1: none). Retries on EINTR.
 *
 * @param flags  sendmsg() flags, e.g. MSG_DONTWAIT | MSG_NOSIGNAL.
 *
 * @return UCS_OK when the whole message was sent;
 *         UCS_ERR_TIMED_OUT: EAGAIN (SO_SNDTIMEO expired, or a nonblocking
 *             socket is full);
 *         UCS_ERR_CONNECTION_RESET: the peer closed (EPIPE, ECONNRESET);
 *         UCS_ERR_IO_ERROR: any other error, or a partial send.
 */
ucs_status_t uct_cuda_ipc_ns_scm_send_fd(int sock, const void *buf, size_t len,
                                         int fd, int flags);


/**
 * As uct_cuda_ipc_ns_scm_send_fd(), with the @a num_fds fds of @a fds
 * (at most UCT_CUDA_IPC_NS_SCM_MAX_FDS; 0: none) in one SCM_RIGHTS header.
 */
ucs_status_t uct_cuda_ipc_ns_scm_send_fds(int sock, const void *buf, size_t len,
                                          const int *fds, unsigned num_fds,
                                          int flags);


/**
 * Receive one message of at most @a max bytes into @a buf, and the fd it
 * carries, if any (with O_CLOEXEC). Retries on EINTR.
 *
 * The message is refused, and every fd it carried is closed, when the
 * control data was truncated (MSG_CTRUNC), when it carried more than one fd
 * or a malformed SCM_RIGHTS header, or when the message was longer than
 * @a max (MSG_TRUNC): a peer cannot leave fds behind in this process.
 *
 * @param flags   recvmsg() flags, e.g. MSG_DONTWAIT; MSG_CMSG_CLOEXEC is
 *                always added.
 * @param len_p   length of the message.
 * @param fd_p    the fd received, or -1 when the message carried none. The
 *                caller owns it.
 *
 * @return UCS_OK with *len_p and *fd_p set; otherwise *fd_p is -1 and:
 *         UCS_ERR_TIMED_OUT: EAGAIN (SO_RCVTIMEO expired, or nothing to
 *             read on a nonblocking socket);
 *         UCS_ERR_CONNECTION_RESET: the peer closed (end of file, or
 *             ECONNRESET);
 *         UCS_ERR_MESSAGE_TRUNCATED: longer than @a max;
 *         UCS_ERR_INVALID_PARAM: bad control data (see above);
 *         UCS_ERR_IO_ERROR: any other error.
 */
ucs_status_t uct_cuda_ipc_ns_scm_recv_fd(int sock, void *buf, size_t max,
                                         int flags, size_t *len_p, int *fd_p);


/**
 * As uct_cuda_ipc_ns_scm_recv_fd(), for a message of at most @a max_fds
 * fds (1..UCT_CUDA_IPC_NS_SCM_MAX_FDS): more are refused as above, every
 * fd closed. With UCS_OK, *num_fds_p fds are in @a fds (the caller owns
 * them); otherwise *num_fds_p is 0.
 */
ucs_status_t uct_cuda_ipc_ns_scm_recv_fds(int sock, void *buf, size_t max,
                                          int flags, size_t *len_p, int *fds,
                                          unsigned max_fds,
                                          unsigned *num_fds_p);

#endif
