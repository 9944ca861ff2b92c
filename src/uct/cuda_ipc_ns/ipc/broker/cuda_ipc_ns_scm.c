/*
 * cuda_ipc_ns: one message with at most one fd over a Unix socket (see
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


/* Room for two fds: a second one shows as "more than one", not as
 * truncation, which the receiver refuses all the same */
#define UCT_CUDA_IPC_NS_SCM_RX_FDS  2


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


ucs_status_t uct_cuda_ipc_ns_scm_send_fd(int sock, const void *buf, size_t len,
                                         int fd, int flags)
{
    union {
        struct cmsghdr hdr;
        char           buf[CMSG_SPACE(sizeof(int))];
    } cmsg;
    struct iovec iov;
    struct msghdr msg;
    ssize_t ret;

    iov.iov_base = (void*)buf;
    iov.iov_len  = len;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov    = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        memset(&cmsg, 0, sizeof(cmsg));
        msg.msg_control     = cmsg.buf;
        msg.msg_controllen  = sizeof(cmsg.buf);
        cmsg.hdr.cmsg_level = SOL_SOCKET;
        cmsg.hdr.cmsg_type  = SCM_RIGHTS;
        cmsg.hdr.cmsg_len   = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(&cmsg.hdr), &fd, sizeof(int));
    }

    do {
        ret = sendmsg(sock, &msg, flags);
    } while ((ret < 0) && (errno == EINTR));

    if (ret < 0) {
        ucs_debug("cuda_ipc_ns: sendmsg(socket %d, %zu bytes, fd %d) failed: "
                  "%m", sock, len, fd);
        return uct_cuda_ipc_ns_scm_errno_status(errno);
    } else if ((size_t)ret != len) {
        ucs_debug("cuda_ipc_ns: sendmsg(socket %d) sent %zd of %zu bytes",
                  sock, ret, len);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
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


ucs_status_t uct_cuda_ipc_ns_scm_recv_fd(int sock, void *buf, size_t max,
                                         int flags, size_t *len_p, int *fd_p)
{
    union {
        struct cmsghdr hdr;
        char           buf[CMSG_SPACE(sizeof(int) *
                                      UCT_CUDA_IPC_NS_SCM_RX_FDS)];
    } cmsg;
    int fds[UCT_CUDA_IPC_NS_SCM_RX_FDS];
    struct iovec iov;
    struct msghdr msg;
    ucs_status_t status;
    int i, num_fds, malformed;
    ssize_t ret;

    *fd_p = -1;

    iov.iov_base = buf;
    iov.iov_len  = max;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov    = &iov;
    msg.msg_iovlen = 1;

    do {
        msg.msg_control    = cmsg.buf;
        msg.msg_controllen = sizeof(cmsg.buf);
        msg.msg_flags      = 0;
        ret = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    } while ((ret < 0) && (errno == EINTR));

    if (ret < 0) {
        ucs_debug("cuda_ipc_ns: recvmsg(socket %d) failed: %m", sock);
        return uct_cuda_ipc_ns_scm_errno_status(errno);
    }

    /* fds are in our table now, whatever follows: account for all of them */
    num_fds = uct_cuda_ipc_ns_scm_rx_fds(&msg, fds, UCT_CUDA_IPC_NS_SCM_RX_FDS,
                                         &malformed);
    if (ret == 0) {
        status = UCS_ERR_CONNECTION_RESET;
    } else if (msg.msg_flags & MSG_TRUNC) {
        ucs_debug("cuda_ipc_ns: socket %d: message longer than %zu bytes",
                  sock, max);
        status = UCS_ERR_MESSAGE_TRUNCATED;
    } else if ((msg.msg_flags & MSG_CTRUNC) || malformed || (num_fds > 1)) {
        ucs_debug("cuda_ipc_ns: socket %d: refusing a message with %s",
                  sock, (msg.msg_flags & MSG_CTRUNC) ?
                  "truncated control data" : malformed ?
                  "a malformed SCM_RIGHTS header" : "more than one fd");
        status = UCS_ERR_INVALID_PARAM;
    } else {
        *len_p = ret;
        *fd_p  = (num_fds == 1) ? fds[0] : -1;
        return UCS_OK;
    }

    for (i = 0; i < num_fds; ++i) {
        close(fds[i]);
    }
    return status;
}
