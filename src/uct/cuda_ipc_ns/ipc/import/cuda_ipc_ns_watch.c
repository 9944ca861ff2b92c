/*
 * cuda_ipc_ns: peer liveness watch (see cuda_ipc_ns_watch.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_watch.h"
#include "cuda_ipc_ns_pidfd.h"


ucs_status_t uct_cuda_ipc_ns_watch_pid(uint32_t pid, uint64_t start_time,
                                       int *fd_p)
{
    int err;

    return uct_cuda_ipc_ns_pidfd_open_checked(pid, start_time, fd_p, &err);
}


int uct_cuda_ipc_ns_watch_exited(int fd)
{
    return uct_cuda_ipc_ns_pidfd_exited(fd);
}
