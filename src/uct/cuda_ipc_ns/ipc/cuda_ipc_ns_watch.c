/*
 * cuda_ipc_ns: peer liveness watch (see cuda_ipc_ns_watch.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_watch.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_pidfd.h"

#include <ucs/debug/log.h>

#include <sys/socket.h>
#include <errno.h>
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


ucs_status_t uct_cuda_ipc_ns_watch_broker(const uct_cuda_ipc_ns_rkey_info_t *key,
                                          double timeout, int *fd_p)
{
    socklen_t optlen = sizeof(*fd_p);
    ucs_status_t status;
    int sock, ret, err;

    status = uct_cuda_ipc_ns_fdx_broker_connect_key(key, timeout, &sock);
    if (status != UCS_OK) {
        return status;
    }

    /* the credentials of a connected unix socket are the listener's: the
     * broker's owner, the peer we watch */
    ret = getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, fd_p, &optlen);
    err = errno;
    close(sock);
    if (ret < 0) {
        ucs_debug("cuda_ipc_ns: getsockopt(SO_PEERPIDFD) failed: %s",
                  strerror(err));
        return (err == ESRCH) ? UCS_ERR_UNREACHABLE : UCS_ERR_UNSUPPORTED;
    }

    return UCS_OK;
}


int uct_cuda_ipc_ns_watch_exited(int fd)
{
    return uct_cuda_ipc_ns_pidfd_exited(fd);
}
