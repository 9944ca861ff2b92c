/*
 * cuda_ipc_ns: fd exchange, importer side (DESIGN.md 4.3).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_nsid.h"

#include <ucs/debug/log.h>
#include <ucs/time/time.h>

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
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

/* fds a reply may carry before we call it hostile; extras are closed */
#define UCT_CUDA_IPC_NS_FDX_MAX_RX_FDS  4


const char *uct_cuda_ipc_ns_fdx_mode_names[] = {
    [UCT_CUDA_IPC_NS_FDX_AUTO]   = "auto",
    [UCT_CUDA_IPC_NS_FDX_PIDFD]  = "pidfd",
    [UCT_CUDA_IPC_NS_FDX_BROKER] = "broker",
    [UCT_CUDA_IPC_NS_FDX_LAST]   = NULL
};


static uint64_t uct_cuda_ipc_ns_fdx_pidfd_count  = 0;
static uint64_t uct_cuda_ipc_ns_fdx_broker_count = 0;

/* pidfd_getfd usability, probed once per process (pid) */
static pthread_mutex_t uct_cuda_ipc_ns_fdx_probe_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t           uct_cuda_ipc_ns_fdx_probe_pid  = 0;
static int             uct_cuda_ipc_ns_fdx_probe_usable;


const char *uct_cuda_ipc_ns_fdx_addr_str(const char *addr, uint8_t addr_len,
                                         char *buf, size_t max)
{
    size_t i, pos = 0;

    if (max == 0) {
        return buf;
    }

    for (i = 0; (i < addr_len) && (pos + 1 < max); ++i) {
        if ((i == 0) && (addr[0] == '\0')) {
            buf[pos++] = '@'; /* abstract name, as ss(8) prints it */
        } else if ((addr[i] >= 0x20) && (addr[i] < 0x7f)) {
            buf[pos++] = addr[i];
        } else {
            buf[pos++] = '?';
        }
    }
    buf[pos] = '\0';
    return buf;
}


void uct_cuda_ipc_ns_fdx_get_stats(uint64_t *pidfd_imports,
                                   uint64_t *broker_imports)
{
    *pidfd_imports  = __atomic_load_n(&uct_cuda_ipc_ns_fdx_pidfd_count,
                                      __ATOMIC_RELAXED);
    *broker_imports = __atomic_load_n(&uct_cuda_ipc_ns_fdx_broker_count,
                                      __ATOMIC_RELAXED);
}


static int uct_cuda_ipc_ns_pidfd_open(pid_t pid)
{
    /* the kernel always sets O_CLOEXEC on pidfds */
    return syscall(SYS_pidfd_open, pid, 0);
}


static int uct_cuda_ipc_ns_pidfd_getfd(int pidfd, int targetfd)
{
    /* the new fd always gets O_CLOEXEC */
    return syscall(SYS_pidfd_getfd, pidfd, targetfd, 0);
}


static int uct_cuda_ipc_ns_fdx_errno_is_blocked(int err)
{
    /* seccomp (EPERM, as Docker's default profile), Yama (EPERM),
     * LSMs (EACCES), old kernels (ENOSYS) */
    return (err == EPERM) || (err == EACCES) || (err == ENOSYS);
}


static int uct_cuda_ipc_ns_fdx_probe(void)
{
    int pidfd, fd;

    pidfd = uct_cuda_ipc_ns_pidfd_open(getpid());
    if (pidfd < 0) {
        ucs_diag("cuda_ipc_ns: pid %d: pidfd_open() failed: %m; fd exchange "
                 "uses the broker", (int)getpid());
        return 0;
    }

    /* taking one of our own fds needs no ptrace right, but a seccomp filter
     * or a kernel without the call still refuses it */
    fd = uct_cuda_ipc_ns_pidfd_getfd(pidfd, pidfd);
    if (fd < 0) {
        ucs_diag("cuda_ipc_ns: pid %d: pidfd_getfd() failed: %m; fd exchange "
                 "uses the broker", (int)getpid());
        close(pidfd);
        return 0;
    }

    close(fd);
    close(pidfd);
    ucs_debug("cuda_ipc_ns: pid %d: pidfd_getfd() is usable", (int)getpid());
    return 1;
}


int uct_cuda_ipc_ns_fdx_pidfd_usable(void)
{
    pid_t pid = getpid();
    int usable;

    pthread_mutex_lock(&uct_cuda_ipc_ns_fdx_probe_lock);
    if (uct_cuda_ipc_ns_fdx_probe_pid != pid) {
        uct_cuda_ipc_ns_fdx_probe_usable = uct_cuda_ipc_ns_fdx_probe();
        uct_cuda_ipc_ns_fdx_probe_pid    = pid;
    }
    usable = uct_cuda_ipc_ns_fdx_probe_usable;
    pthread_mutex_unlock(&uct_cuda_ipc_ns_fdx_probe_lock);

    return usable;
}


/* pidfd_getfd worked on ourselves but not on a peer (Yama, LSM) */
static void uct_cuda_ipc_ns_fdx_set_blocked(uint32_t peer_pid, int err)
{
    pthread_mutex_lock(&uct_cuda_ipc_ns_fdx_probe_lock);
    if (uct_cuda_ipc_ns_fdx_probe_usable) {
        uct_cuda_ipc_ns_fdx_probe_usable = 0;
        ucs_diag("cuda_ipc_ns: pid %d: pidfd_getfd() on pid %u failed: %s; "
                 "fd exchange uses the broker from now on", (int)getpid(),
                 peer_pid, strerror(err));
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_fdx_probe_lock);
}


/*
 * The pid of a pidfd's process as numbered in the PID namespace of our /proc
 * mount, which may differ from ours (a process that unshared its PID
 * namespace without remounting /proc). -1: the process exited; 0: it is not
 * visible there.
 */
static ucs_status_t uct_cuda_ipc_ns_fdx_pidfd_procfs_pid(int pidfd, pid_t *pid_p)
{
    char path[64], buf[1024], *p;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    if (uct_cuda_ipc_ns_read_proc_file(path, buf, sizeof(buf)) != UCS_OK) {
        return UCS_ERR_UNSUPPORTED;
    }

    p = strstr(buf, "\nPid:");
    if ((p == NULL) || (sscanf(p + 5, "%d", pid_p) != 1)) {
        ucs_debug("cuda_ipc_ns: no Pid in %s", path);
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}


/*
 * Same PID namespace: take the fd with pidfd_getfd, after checking that the
 * process at desc->pid is the owner (start time) and still alive.
 *
 * @return UCS_OK; UCT_CUDA_IPC_NS_ERR_NO_PERMISSION when pidfd_getfd is
 *         blocked and UCS_ERR_UNSUPPORTED when the owner cannot be verified
 *         (both: the broker may help); any other status is final.
 */
static ucs_status_t
uct_cuda_ipc_ns_fdx_pidfd_import(const uct_cuda_ipc_ns_fd_desc_t *desc, int *fd_p)
{
    uint64_t start_time;
    ucs_status_t status;
    struct pollfd pfd;
    pid_t procfs_pid;
    int pidfd, fd, err;

    pidfd = uct_cuda_ipc_ns_pidfd_open(desc->pid);
    if (pidfd < 0) {
        err = errno;
        if ((err == ESRCH) || (err == EINVAL)) {
            /* EINVAL: not a process (pid 0, a thread id) */
            ucs_debug("cuda_ipc_ns: owner pid %u (pid_ns %" PRIu64 ") is "
                      "gone: pidfd_open: %s", desc->pid, desc->pid_ns,
                      strerror(err));
            return UCS_ERR_UNREACHABLE;
        } else if (uct_cuda_ipc_ns_fdx_errno_is_blocked(err)) {
            uct_cuda_ipc_ns_fdx_set_blocked(desc->pid, err);
            return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
        }
        ucs_error("cuda_ipc_ns: pidfd_open(%u) failed: %s", desc->pid,
                  strerror(err));
        return UCS_ERR_IO_ERROR;
    }

    status = uct_cuda_ipc_ns_fdx_pidfd_procfs_pid(pidfd, &procfs_pid);
    if (status != UCS_OK) {
        goto out;
    }

    if (procfs_pid < 0) {
        ucs_debug("cuda_ipc_ns: owner pid %u exited", desc->pid);
        status = UCS_ERR_UNREACHABLE;
        goto out;
    } else if (procfs_pid == 0) {
        ucs_debug("cuda_ipc_ns: owner pid %u is not visible in our /proc, "
                  "cannot check its start time", desc->pid);
        status = UCS_ERR_UNSUPPORTED;
        goto out;
    }

    if (uct_cuda_ipc_ns_proc_start_time(procfs_pid, &start_time) != UCS_OK) {
        ucs_debug("cuda_ipc_ns: owner pid %u exited (no /proc/%d/stat)",
                  desc->pid, (int)procfs_pid);
        status = UCS_ERR_UNREACHABLE;
        goto out;
    }

    if (start_time != desc->start_time) {
        ucs_diag("cuda_ipc_ns: pid %u has start time %" PRIu64 ", the key "
                 "says %" PRIu64 ": the owner is gone and its pid reused",
                 desc->pid, start_time, desc->start_time);
        status = UCS_ERR_UNREACHABLE;
        goto out;
    }

    /* The pidfd was opened before the start time was read: if its process is
     * still alive now, the pid was never reused in between, so the process
     * we read about is the one the pidfd holds */
    pfd.fd     = pidfd;
    pfd.events = POLLIN;
    if ((poll(&pfd, 1, 0) != 0) && (pfd.revents & POLLIN)) {
        ucs_debug("cuda_ipc_ns: owner pid %u exited during import", desc->pid);
        status = UCS_ERR_UNREACHABLE;
        goto out;
    }

    fd = uct_cuda_ipc_ns_pidfd_getfd(pidfd, desc->fd);
    if (fd < 0) {
        err = errno;
        if (uct_cuda_ipc_ns_fdx_errno_is_blocked(err)) {
            uct_cuda_ipc_ns_fdx_set_blocked(desc->pid, err);
            status = UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
        } else if (err == EBADF) {
            ucs_debug("cuda_ipc_ns: owner pid %u has no fd %d (alloc_id 0x%"
                      PRIx64 " released?)", desc->pid, desc->fd,
                      desc->alloc_id);
            status = UCS_ERR_NO_ELEM;
        } else if (err == ESRCH) {
            ucs_debug("cuda_ipc_ns: owner pid %u exited during import",
                      desc->pid);
            status = UCS_ERR_UNREACHABLE;
        } else {
            ucs_error("cuda_ipc_ns: pidfd_getfd(pid %u, fd %d) failed: %s",
                      desc->pid, desc->fd, strerror(err));
            status = UCS_ERR_IO_ERROR;
        }
        goto out;
    }

    ucs_trace("cuda_ipc_ns: got fd %d of pid %u as fd %d via pidfd",
              desc->fd, desc->pid, fd);
    *fd_p  = fd;
    status = UCS_OK;

out:
    close(pidfd);
    return status;
}


/* Set a socket timeout to what is left until @a deadline */
static ucs_status_t uct_cuda_ipc_ns_fdx_set_timeout(int sock, int optname,
                                                    ucs_time_t deadline)
{
    ucs_time_t now = ucs_get_time();
    struct timeval tv;
    double left;

    if (now >= deadline) {
        return UCS_ERR_TIMED_OUT;
    }

    left       = ucs_time_to_sec(deadline - now);
    tv.tv_sec  = (time_t)left;
    tv.tv_usec = (suseconds_t)((left - tv.tv_sec) * 1e6);
    if ((tv.tv_sec == 0) && (tv.tv_usec == 0)) {
        tv.tv_usec = 1; /* zero would mean "no timeout" */
    }

    if (setsockopt(sock, SOL_SOCKET, optname, &tv, sizeof(tv)) < 0) {
        ucs_error("cuda_ipc_ns: setsockopt(%s) failed: %m",
                  (optname == SO_RCVTIMEO) ? "SO_RCVTIMEO" : "SO_SNDTIMEO");
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


/* Close every fd carried by the control messages of @a msg but @a keep */
static void uct_cuda_ipc_ns_fdx_close_rx_fds(struct msghdr *msg, int keep)
{
    struct cmsghdr *cmsg;
    int i, n, fd;

    for (cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL;
         cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if ((cmsg->cmsg_level != SOL_SOCKET) ||
            (cmsg->cmsg_type != SCM_RIGHTS)) {
            continue;
        }
        n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < n; ++i) {
            memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
            if (fd != keep) {
                close(fd);
            }
        }
    }
}


/* The first fd carried by @a msg, or -1 */
static int uct_cuda_ipc_ns_fdx_first_rx_fd(struct msghdr *msg)
{
    struct cmsghdr *cmsg;
    int fd;

    for (cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL;
         cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if ((cmsg->cmsg_level == SOL_SOCKET) &&
            (cmsg->cmsg_type == SCM_RIGHTS) &&
            (cmsg->cmsg_len >= CMSG_LEN(sizeof(int)))) {
            memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
            return fd;
        }
    }
    return -1;
}


static ucs_status_t uct_cuda_ipc_ns_fdx_errno_status(int err)
{
    switch (err) {
    case EAGAIN:
    case ETIMEDOUT:
        return UCS_ERR_TIMED_OUT;
    case ECONNREFUSED:
    case ENOENT:
    case ENOTDIR:
    case EACCES:
    case EPERM:
        return UCS_ERR_UNREACHABLE;
    case EPIPE:
    case ECONNRESET:
        return UCS_ERR_CONNECTION_RESET;
    default:
        return UCS_ERR_IO_ERROR;
    }
}


/* Receive the reply, retrying once after ECONNRESET (see below) */
static ssize_t uct_cuda_ipc_ns_fdx_recv_reply(int sock, struct msghdr *msg,
                                              size_t controllen)
{
    int reset_seen = 0;
    ssize_t ret;

    for (;;) {
        msg->msg_controllen = controllen;
        msg->msg_flags      = 0;
        ret = recvmsg(sock, msg, MSG_CMSG_CLOEXEC);
        if (ret >= 0) {
            return ret;
        } else if (errno == EINTR) {
            continue;
        } else if ((errno == ECONNRESET) && !reset_seen) {
            /* a broker that refused us before reading our request closes
             * with it unread: the kernel reports ECONNRESET ahead of the
             * reply that is already queued */
            reset_seen = 1;
            continue;
        }
        return ret;
    }
}


static ucs_status_t
uct_cuda_ipc_ns_fdx_broker_import(const uct_cuda_ipc_ns_fdx_config_t *cfg,
                                  const uct_cuda_ipc_ns_fd_desc_t *desc,
                                  int *fd_p)
{
    double timeout = (cfg->timeout > 0) ? cfg->timeout : 1.0;
    uint8_t req[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE];
    /* one more byte than a reply: a longer message shows as too long */
    uint8_t reply[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE + 1];
    union {
        struct cmsghdr hdr;
        char           buf[CMSG_SPACE(sizeof(int) *
                                      UCT_CUDA_IPC_NS_FDX_MAX_RX_FDS)];
    } cmsg;
    char name[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 2];
    struct sockaddr_un sa;
    ucs_time_t deadline;
    ucs_status_t status;
    struct msghdr msg;
    struct iovec iov;
    unsigned bstatus;
    uint64_t alloc_id;
    const char *what;
    int sock, fd, ret, err;
    ssize_t len;

    if ((desc->broker_addr_len == 0) ||
        (desc->broker_addr_len > sizeof(sa.sun_path))) {
        ucs_debug("cuda_ipc_ns: owner pid %u (pid_ns %" PRIu64 ") has no "
                  "broker address in its key", desc->pid, desc->pid_ns);
        return UCS_ERR_UNREACHABLE;
    }

    uct_cuda_ipc_ns_fdx_addr_str(desc->broker_addr, desc->broker_addr_len,
                                 name, sizeof(name));
    deadline = ucs_get_time() + ucs_time_from_sec(timeout);

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, desc->broker_addr, desc->broker_addr_len);

    sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        ucs_error("cuda_ipc_ns: socket(AF_UNIX, SOCK_SEQPACKET) failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    /* connect waits for room in the broker's backlog at most SO_SNDTIMEO */
    what   = "connect";
    status = uct_cuda_ipc_ns_fdx_set_timeout(sock, SO_SNDTIMEO, deadline);
    if (status != UCS_OK) {
        goto err_close;
    }
    do {
        ret = connect(sock, (struct sockaddr*)&sa,
                      offsetof(struct sockaddr_un, sun_path) +
                      desc->broker_addr_len);
    } while ((ret < 0) && (errno == EINTR));
    if (ret < 0) {
        goto err_errno;
    }

    what = "send";
    uct_cuda_ipc_ns_broker_pack_request(req, desc->alloc_id, desc->token);
    status = uct_cuda_ipc_ns_fdx_set_timeout(sock, SO_SNDTIMEO, deadline);
    if (status != UCS_OK) {
        goto err_close;
    }
    do {
        len = send(sock, req, sizeof(req), MSG_NOSIGNAL);
    } while ((len < 0) && (errno == EINTR));
    if ((len < 0) && (errno != EPIPE) && (errno != ECONNRESET)) {
        goto err_errno;
    }
    /* on EPIPE/ECONNRESET the broker closed after refusing us: its reply
     * may be waiting, read it */

    what   = "recv";
    status = uct_cuda_ipc_ns_fdx_set_timeout(sock, SO_RCVTIMEO, deadline);
    if (status != UCS_OK) {
        goto err_close;
    }
    iov.iov_base = reply;
    iov.iov_len  = sizeof(reply);
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov     = &iov;
    msg.msg_iovlen  = 1;
    msg.msg_control = cmsg.buf;
    len = uct_cuda_ipc_ns_fdx_recv_reply(sock, &msg, sizeof(cmsg.buf));
    if (len < 0) {
        goto err_errno;
    } else if (len == 0) {
        ucs_debug("cuda_ipc_ns: broker %s (owner pid %u) closed the "
                  "connection without a reply", name, desc->pid);
        status = UCS_ERR_CONNECTION_RESET;
        goto err_close;
    }

    fd = uct_cuda_ipc_ns_fdx_first_rx_fd(&msg);
    if (uct_cuda_ipc_ns_broker_unpack_reply(reply, len, &bstatus,
                                            &alloc_id) != UCS_OK) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent a malformed "
                  "reply (%zd bytes)", name, desc->pid, len);
        status = UCS_ERR_IO_ERROR;
        goto err_close_fds;
    }

    if (bstatus != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        status = uct_cuda_ipc_ns_broker_status_to_ucs(bstatus);
        ucs_debug("cuda_ipc_ns: broker %s (owner pid %u) refused alloc_id "
                  "0x%" PRIx64 ": %s", name, desc->pid, desc->alloc_id,
                  uct_cuda_ipc_ns_broker_status_str(bstatus));
        goto err_close_fds;
    }

    if ((fd < 0) || (alloc_id != desc->alloc_id) ||
        (msg.msg_flags & MSG_CTRUNC)) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent a bad reply "
                  "for alloc_id 0x%" PRIx64 ": fd %d, alloc_id 0x%" PRIx64
                  "%s", name, desc->pid, desc->alloc_id, fd, alloc_id,
                  (msg.msg_flags & MSG_CTRUNC) ? ", control data truncated" :
                  "");
        status = UCS_ERR_IO_ERROR;
        goto err_close_fds;
    }

    /* keep the first fd, close any extra one */
    uct_cuda_ipc_ns_fdx_close_rx_fds(&msg, fd);
    close(sock);
    ucs_trace("cuda_ipc_ns: got alloc_id 0x%" PRIx64 " of pid %u as fd %d "
              "from broker %s", desc->alloc_id, desc->pid, fd, name);
    *fd_p = fd;
    return UCS_OK;

err_close_fds:
    uct_cuda_ipc_ns_fdx_close_rx_fds(&msg, -1);
    goto err_close;
err_errno:
    err    = errno;
    status = uct_cuda_ipc_ns_fdx_errno_status(err);
    ucs_debug("cuda_ipc_ns: %s to broker %s (owner pid %u, pid_ns %" PRIu64
              ") failed: %s%s", what, name, desc->pid, desc->pid_ns,
              strerror(err),
              ((status == UCS_ERR_UNREACHABLE) && (desc->broker_addr[0] == '\0')) ?
              " (abstract sockets are not shared across network namespaces; "
              "set UCX_CUDA_IPC_NS_SOCK_DIR to a shared directory)" : "");
err_close:
    if (status == UCS_ERR_TIMED_OUT) {
        ucs_debug("cuda_ipc_ns: broker %s (owner pid %u) did not answer "
                  "within %.3f s", name, desc->pid, timeout);
    }
    close(sock);
    return status;
}


static ucs_status_t uct_cuda_ipc_ns_fdx_import_desc(const uct_cuda_ipc_ns_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_fd_desc_t *desc,
                                        int *fd_p);

ucs_status_t uct_cuda_ipc_ns_fdx_import(const uct_cuda_ipc_ns_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_rkey_info_t *key,
                                        int *fd_p)
{
    uct_cuda_ipc_ns_fd_desc_t desc;

    desc.pid             = key->pid;
    desc.pid_ns          = key->pid_ns;
    desc.start_time      = key->start_time;
    desc.fd              = key->handle.posix.fd;
    desc.alloc_id        = key->handle.posix.alloc_id;
    desc.broker_addr_len = key->broker_addr_len;
    memcpy(desc.token, key->token, sizeof(desc.token));
    memcpy(desc.broker_addr, key->broker_addr, sizeof(desc.broker_addr));
    return uct_cuda_ipc_ns_fdx_import_desc(cfg, &desc, fd_p);
}

static ucs_status_t uct_cuda_ipc_ns_fdx_import_desc(const uct_cuda_ipc_ns_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_fd_desc_t *desc,
                                        int *fd_p)
{
    const uct_cuda_ipc_ns_identity_t *self = uct_cuda_ipc_ns_self();
    int same_ns                            = (desc->pid_ns == self->pid_ns);
    ucs_status_t status;

    if ((cfg->mode < 0) || (cfg->mode >= UCT_CUDA_IPC_NS_FDX_LAST) ||
        (desc->fd < 0)) {
        ucs_error("cuda_ipc_ns: invalid fd import (mode %d, fd %d)", cfg->mode,
                  desc->fd);
        return UCS_ERR_INVALID_PARAM;
    }

    if (cfg->mode != UCT_CUDA_IPC_NS_FDX_BROKER) {
        if (!same_ns) {
            /* desc->pid numbers a process in the owner's namespace; here
             * it would name another process, if any */
            if (cfg->mode == UCT_CUDA_IPC_NS_FDX_PIDFD) {
                ucs_diag("cuda_ipc_ns: owner pid %u is in PID namespace %"
                         PRIu64 ", we are in %" PRIu64 ": pidfd_getfd cannot "
                         "reach it (fd exchange mode 'pidfd', use 'auto' or "
                         "'broker')", desc->pid, desc->pid_ns, self->pid_ns);
                return UCS_ERR_UNREACHABLE;
            }
        } else if (uct_cuda_ipc_ns_fdx_pidfd_usable()) {
            status = uct_cuda_ipc_ns_fdx_pidfd_import(desc, fd_p);
            if (status == UCS_OK) {
                __atomic_fetch_add(&uct_cuda_ipc_ns_fdx_pidfd_count, 1,
                                   __ATOMIC_RELAXED);
                return UCS_OK;
            } else if ((status != UCT_CUDA_IPC_NS_ERR_NO_PERMISSION) &&
                       (status != UCS_ERR_UNSUPPORTED)) {
                return status; /* the owner is gone: no broker either */
            } else if (cfg->mode == UCT_CUDA_IPC_NS_FDX_PIDFD) {
                return (status == UCS_ERR_UNSUPPORTED) ? UCS_ERR_UNREACHABLE :
                                                         status;
            }
        } else if (cfg->mode == UCT_CUDA_IPC_NS_FDX_PIDFD) {
            ucs_debug("cuda_ipc_ns: pidfd_getfd is blocked in pid %d and fd "
                      "exchange mode is 'pidfd'", (int)getpid());
            return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
        }
    }

    status = uct_cuda_ipc_ns_fdx_broker_import(cfg, desc, fd_p);
    if (status == UCS_OK) {
        __atomic_fetch_add(&uct_cuda_ipc_ns_fdx_broker_count, 1,
                           __ATOMIC_RELAXED);
    }
    return status;
}
