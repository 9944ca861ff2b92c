/*
 * cuda_ipc_ns: one message with a few fds over a Unix socket (see
 * cuda_ipc_ns_scm.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_scm.h"

#include <ucs/debug/log.h>

#include <sys/socket.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>


/* Control room for one fd more than a receiver takes: an extra one shows
 * as "too many", not as truncation, which is refused all the same */
#define UCT_CUDA_IPC_NS_SCM_RX_FDS  (UCT_CUDA_IPC_NS_SCM_MAX_FDS + 1)


static ucs_status_t uct_cuda_ipc_ns_scm_errno_status(int err)
{
    switch (err) {
    case EAGAIN:
        return UCS_ERR_TIMED_OUT;
    case EPIPE:
    case ECONNRESET:
        return UCS_ERR_CONNECTION_RESET;
    default:
        return UCS_ERR_IO_ERROR;
    }
}


ucs_status_t uct_cuda_ipc_ns_scm_send_fds(int sock, const void *buf, size_t len,
                                          const int *fds, unsigned num_fds,
                                          int flags)
{
    union {
        struct cmsghdr hdr;
        char           buf[CMSG_SPACE(sizeof(int) *
                                      UCT_CUDA_IPC_NS_SCM_MAX_FDS)];
    } cmsg;
    struct iovec iov;
    struct msghdr msg;
    ssize_t ret;

    if (num_fds > UCT_CUDA_IPC_NS_SCM_MAX_FDS) {
        ucs_error("cuda_ipc_ns: socket %d: %u fds in one message, at most %d",
                  sock, num_fds, UCT_CUDA_IPC_NS_SCM_MAX_FDS);
        return UCS_ERR_INVALID_PARAM;
    }

    iov.iov_base = (void*)buf;
    iov.iov_len  = len;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov    = &iov;
    msg.msg_iovlen = 1;
    if (num_fds > 0) {
        memset(&cmsg, 0, sizeof(cmsg));
        msg.msg_control     = cmsg.buf;
        msg.msg_controllen  = CMSG_SPACE(sizeof(int) * num_fds);
        cmsg.hdr.cmsg_level = SOL_SOCKET;
        cmsg.hdr.cmsg_type  = SCM_RIGHTS;
        cmsg.hdr.cmsg_len   = CMSG_LEN(sizeof(int) * num_fds);
        memcpy(CMSG_DATA(&cmsg.hdr), fds, sizeof(int) * num_fds);
    }

    do {
        ret = sendmsg(sock, &msg, flags);
    } while ((ret < 0) && (errno == EINTR));

    if (ret < 0) {
        ucs_debug("cuda_ipc_ns: sendmsg(socket %d, %zu bytes, %u fds) failed: "
                  "%m", sock, len, num_fds);
        return uct_cuda_ipc_ns_scm_errno_status(errno);
    } else if ((size_t)ret != len) {
        ucs_debug("cuda_ipc_ns: sendmsg(socket %d) sent %zd of %zu bytes",
                  sock, ret, len);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_scm_send_fd(int sock, const void *buf, size_t len,
                                         int fd, int flags)
{
    return uct_cuda_ipc_ns_scm_send_fds(sock, buf, len, &fd, (fd >= 0) ? 1 : 0,
                                        flags);
}


/*
 * Collect the fds of every SCM_RIGHTS header of @a msg into @a fds (the
 * kernel installs no more than the control buffer holds, so they fit).
 * @return how many; *malformed_p is set when a header has a bad length.
 */
static int uct_cuda_ipc_ns_scm_rx_fds(struct msghdr *msg, int *fds, int max,
                                      int *malformed_p)
{
    struct cmsghdr *cmsg;
    size_t data_len, i;
    int count = 0;

    *malformed_p = 0;
    for (cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL;
         cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if ((cmsg->cmsg_level != SOL_SOCKET) ||
            (cmsg->cmsg_type != SCM_RIGHTS)) {
            continue;
        }
        if ((cmsg->cmsg_len < CMSG_LEN(0)) ||
            ((cmsg->cmsg_len - CMSG_LEN(0)) % sizeof(int))) {
            *malformed_p = 1;
            continue;
        }
        data_len = cmsg->cmsg_len - CMSG_LEN(0);
        for (i = 0; (i < data_len / sizeof(int)) && (count < max); ++i) {
            memcpy(&fds[count++], CMSG_DATA(cmsg) + i * sizeof(int),
                   sizeof(int));
        }
    }
    return count;
}


/* Whether the message recvmsg() returned @a ret for on @a sock, with
 * @a num_fds fds of which at most @a max_fds are taken, is taken whole */
static ucs_status_t
uct_cuda_ipc_ns_scm_rx_verdict(int sock, const struct msghdr *msg, ssize_t ret,
                               size_t max, int num_fds, unsigned max_fds,
                               int malformed)
{
    if (ret == 0) {
        return UCS_ERR_CONNECTION_RESET;
    } else if (msg->msg_flags & MSG_TRUNC) {
        ucs_debug("cuda_ipc_ns: socket %d: message longer than %zu bytes",
                  sock, max);
        return UCS_ERR_MESSAGE_TRUNCATED;
    } else if ((msg->msg_flags & MSG_CTRUNC) || malformed ||
               (num_fds > (int)max_fds)) {
        ucs_debug("cuda_ipc_ns: socket %d: refusing a message with %s", sock,
                  (msg->msg_flags & MSG_CTRUNC) ?
                  "truncated control data" : malformed ?
                  "a malformed SCM_RIGHTS header" : "too many fds");
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_scm_recv_fds(int sock, void *buf, size_t max,
                                          int flags, size_t *len_p, int *fds,
                                          unsigned max_fds,
                                          unsigned *num_fds_p)
{
    union {
        struct cmsghdr hdr;
        char           buf[CMSG_SPACE(sizeof(int) *
                                      UCT_CUDA_IPC_NS_SCM_RX_FDS)];
    } cmsg;
    /* as many as the control buffer can hold: CMSG_SPACE() pads it, and
     * the kernel fills the padding with fds too */
    int rx_fds[sizeof(cmsg) / sizeof(int)];
    struct iovec iov;
    struct msghdr msg;
    ucs_status_t status;
    int i, num_fds, malformed;
    ssize_t ret;

    *num_fds_p = 0;
    if ((max_fds == 0) || (max_fds > UCT_CUDA_IPC_NS_SCM_MAX_FDS)) {
        ucs_error("cuda_ipc_ns: socket %d: cannot receive %u fds in one "
                  "message (1..%d)", sock, max_fds,
                  UCT_CUDA_IPC_NS_SCM_MAX_FDS);
        return UCS_ERR_INVALID_PARAM;
    }

    iov.iov_base = buf;
    iov.iov_len  = max;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov    = &iov;
    msg.msg_iovlen = 1;

    do {
        /* room for one fd more than taken: the kernel drops the rest */
        msg.msg_control    = cmsg.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (max_fds + 1));
        msg.msg_flags      = 0;
        ret = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    } while ((ret < 0) && (errno == EINTR));

    if (ret < 0) {
        ucs_debug("cuda_ipc_ns: recvmsg(socket %d) failed: %m", sock);
        return uct_cuda_ipc_ns_scm_errno_status(errno);
    }

    /* fds are in our table now, whatever follows: account for all of them */
    num_fds = uct_cuda_ipc_ns_scm_rx_fds(&msg, rx_fds,
                                         ucs_static_array_size(rx_fds),
                                         &malformed);
    status = uct_cuda_ipc_ns_scm_rx_verdict(sock, &msg, ret, max, num_fds,
                                            max_fds, malformed);
    if (status == UCS_OK) {
        *len_p     = ret;
        *num_fds_p = num_fds;
        memcpy(fds, rx_fds, sizeof(int) * num_fds);
        return UCS_OK;
    }

    for (i = 0; i < num_fds; ++i) {
        close(rx_fds[i]);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_scm_recv_fd(int sock, void *buf, size_t max,
                                         int flags, size_t *len_p, int *fd_p)
{
    unsigned num_fds;
    ucs_status_t status;

    *fd_p  = -1;
    status = uct_cuda_ipc_ns_scm_recv_fds(sock, buf, max, flags, len_p, fd_p,
                                          1, &num_fds);
    if ((status != UCS_OK) || (num_fds == 0)) {
        *fd_p = -1;
    }
    return status;
}
