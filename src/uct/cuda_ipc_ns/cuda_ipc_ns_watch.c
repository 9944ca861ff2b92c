/*
 * cuda_ipc_ns: peer liveness watch (see cuda_ipc_ns_watch.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_watch.h"
#include "cuda_ipc_ns_pidfd.h"

#include <ucs/debug/log.h>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>


#ifndef SO_PEERPIDFD
#  define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif


ucs_status_t uct_cuda_ipc_ns_watch_pid(uint32_t pid, uint64_t start_time,
                                       int *fd_p)
{
    int err;

    return uct_cuda_ipc_ns_pidfd_open_checked(pid, start_time, fd_p, &err);
}


ucs_status_t uct_cuda_ipc_ns_watch_broker(const char *addr, uint8_t addr_len,
                                          double timeout, int *fd_p)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct timeval tv;
    socklen_t optlen;
    int sock, pidfd, ret;

    if ((addr_len == 0) || (addr_len > sizeof(sa.sun_path))) {
        return UCS_ERR_INVALID_PARAM;
    }
    memcpy(sa.sun_path, addr, addr_len);

    sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        ucs_error("cuda_ipc_ns: socket(AF_UNIX) failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    /* connect waits for room in the broker's backlog at most this long */
    tv.tv_sec  = (time_t)timeout;
    tv.tv_usec = (suseconds_t)((timeout - tv.tv_sec) * 1e6) + 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    do {
        ret = connect(sock, (struct sockaddr*)&sa,
                      offsetof(struct sockaddr_un, sun_path) + addr_len);
    } while ((ret < 0) && (errno == EINTR));
    if (ret < 0) {
        ucs_debug("cuda_ipc_ns: connect to broker for a liveness watch "
                  "failed: %m");
        close(sock);
        return UCS_ERR_UNREACHABLE;
    }

    /* the credentials of a connected unix socket are the listener's: the
     * broker's owner, the peer we watch */
    optlen = sizeof(pidfd);
    ret    = getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &optlen);
    close(sock);
    if (ret < 0) {
        ucs_debug("cuda_ipc_ns: getsockopt(SO_PEERPIDFD) failed: %m");
        return (errno == ESRCH) ? UCS_ERR_UNREACHABLE : UCS_ERR_UNSUPPORTED;
    }

    *fd_p = pidfd;
    return UCS_OK;
}


int uct_cuda_ipc_ns_watch_exited(int fd)
{
    return uct_cuda_ipc_ns_pidfd_exited(fd);
}
