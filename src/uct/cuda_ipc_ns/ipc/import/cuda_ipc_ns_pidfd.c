/*
 * cuda_ipc_ns: identity-checked pidfds (see cuda_ipc_ns_pidfd.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_pidfd.h"
#include "cuda_ipc_ns_nsid.h"

#include <ucs/debug/log.h>

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#ifndef SYS_pidfd_open
#  define SYS_pidfd_open  434
#endif
#ifndef SYS_pidfd_getfd
#  define SYS_pidfd_getfd 438
#endif
/* Linux 6.11 (linux/pidfd.h: PIDFS_IOCTL_MAGIC 0xFF, nr 5) */
#define UCT_CUDA_IPC_NS_PIDFD_GET_PID_NAMESPACE  _IO(0xFF, 5)


int uct_cuda_ipc_ns_pidfd_open(pid_t pid)
{
    /* the kernel always sets O_CLOEXEC on pidfds */
    return syscall(SYS_pidfd_open, pid, 0);
}


int uct_cuda_ipc_ns_pidfd_getfd(int pidfd, int target_fd)
{
    /* the new fd always gets O_CLOEXEC */
    return syscall(SYS_pidfd_getfd, pidfd, target_fd, 0);
}


int uct_cuda_ipc_ns_pidfd_errno_is_blocked(int err)
{
    return (err == EPERM) || (err == EACCES) || (err == ENOSYS);
}


int uct_cuda_ipc_ns_pidfd_exited(int pidfd)
{
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};

    return (poll(&pfd, 1, 0) > 0) && (pfd.revents & (POLLIN | POLLHUP));
}


/*
 * The line "\n<field>" of the fdinfo of @a pidfd, read into @a buf:
 * @return a pointer just past the field name, or NULL (no fdinfo, no field).
 */
static const char *uct_cuda_ipc_ns_pidfd_fdinfo_field(int pidfd,
                                                      const char *field,
                                                      char *buf, size_t max)
{
    char path[64];
    const char *p;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    if (uct_cuda_ipc_ns_nsid_read_proc_file(path, buf, max) != UCS_OK) {
        return NULL;
    }

    p = strstr(buf, field);
    if (p == NULL) {
        ucs_debug("cuda_ipc_ns: no%s in %s", field, path);
        return NULL;
    }
    return p + strlen(field);
}


/*
 * The pid of a pidfd's process as numbered in the PID namespace of our /proc
 * mount, which may differ from ours (a process that unshared its PID
 * namespace without remounting /proc). -1: the process exited; 0: it is not
 * visible there.
 */
static ucs_status_t uct_cuda_ipc_ns_pidfd_procfs_pid(int pidfd, pid_t *pid_p)
{
    char buf[1024];
    const char *p;

    p = uct_cuda_ipc_ns_pidfd_fdinfo_field(pidfd, "\nPid:", buf, sizeof(buf));
    if ((p == NULL) || (sscanf(p, "%d", pid_p) != 1)) {
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_pidfd_check_start(int pidfd, uint32_t pid,
                                               uint64_t start_time)
{
    uint64_t actual_start_time;
    ucs_status_t status;
    pid_t procfs_pid;

    status = uct_cuda_ipc_ns_pidfd_procfs_pid(pidfd, &procfs_pid);
    if (status != UCS_OK) {
        return status;
    }

    if (procfs_pid < 0) {
        ucs_debug("cuda_ipc_ns: pid %u exited", pid);
        return UCS_ERR_UNREACHABLE;
    } else if (procfs_pid == 0) {
        ucs_debug("cuda_ipc_ns: pid %u is not visible in our /proc, cannot "
                  "check its start time", pid);
        return UCS_ERR_UNSUPPORTED;
    }

    if (uct_cuda_ipc_ns_nsid_start_time(procfs_pid, &actual_start_time) !=
        UCS_OK) {
        ucs_debug("cuda_ipc_ns: pid %u exited (no /proc/%d/stat)", pid,
                  (int)procfs_pid);
        return UCS_ERR_UNREACHABLE;
    }

    if (actual_start_time != start_time) {
        ucs_diag("cuda_ipc_ns: pid %u has start time %" PRIu64 ", expected %"
                 PRIu64 ": that process is gone and its pid reused", pid,
                 actual_start_time, start_time);
        return UCS_ERR_UNREACHABLE;
    }

    /* The pidfd was opened before the start time was read: if its process is
     * still alive now, the pid was never reused in between, so the process
     * we read about is the one the pidfd holds */
    if (uct_cuda_ipc_ns_pidfd_exited(pidfd)) {
        ucs_debug("cuda_ipc_ns: pid %u exited during the check", pid);
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_pidfd_open_checked(uint32_t pid,
                                                uint64_t start_time,
                                                int *pidfd_p, int *errno_p)
{
    ucs_status_t status;
    int pidfd, err;

    *errno_p = 0;
    pidfd    = uct_cuda_ipc_ns_pidfd_open(pid);
    if (pidfd < 0) {
        err      = errno;
        *errno_p = err;
        if ((err == ESRCH) || (err == EINVAL)) {
            /* EINVAL: not a process (pid 0, a thread id) */
            ucs_debug("cuda_ipc_ns: pid %u is gone: pidfd_open: %s", pid,
                      strerror(err));
            return UCS_ERR_UNREACHABLE;
        } else if (uct_cuda_ipc_ns_pidfd_errno_is_blocked(err)) {
            return UCS_ERR_REJECTED;
        }
        ucs_error("cuda_ipc_ns: pidfd_open(%u) failed: %s", pid, strerror(err));
        return UCS_ERR_IO_ERROR;
    }

    status = uct_cuda_ipc_ns_pidfd_check_start(pidfd, pid, start_time);
    if (status != UCS_OK) {
        close(pidfd);
        return status;
    }

    *pidfd_p = pidfd;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_pidfd_inner_pid(int pidfd, pid_t *pid_p)
{
    char buf[1024], *end;
    const char *p;
    long value;

    /* "NSpid:\t<our level>\t...\t<its own level>"; 0 or -1 alone when
     * not visible from our /proc or gone */
    p = uct_cuda_ipc_ns_pidfd_fdinfo_field(pidfd, "\nNSpid:", buf, sizeof(buf));
    if (p == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    for (;;) {
        value = strtol(p, &end, 10);
        if (end == p) {
            return UCS_ERR_UNSUPPORTED;
        }
        p = end;
        if ((*p == '\n') || (*p == '\0')) {
            break;
        }
    }

    if (value <= 0) {
        return UCS_ERR_UNSUPPORTED;
    }
    *pid_p = (pid_t)value;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_pidfd_pid_ns(int pidfd, uint64_t *pid_ns_p)
{
    struct stat st;
    int ns_fd;

    ns_fd = ioctl(pidfd, UCT_CUDA_IPC_NS_PIDFD_GET_PID_NAMESPACE, 0);
    if (ns_fd < 0) {
        ucs_debug("cuda_ipc_ns: ioctl(PIDFD_GET_PID_NAMESPACE) failed: %m");
        return UCS_ERR_UNSUPPORTED;
    }

    if (fstat(ns_fd, &st) < 0) {
        ucs_debug("cuda_ipc_ns: fstat(PID namespace fd) failed: %m");
        close(ns_fd);
        return UCS_ERR_UNSUPPORTED;
    }

    close(ns_fd);
    *pid_ns_p = st.st_ino;
    return UCS_OK;
}
