/*
 * cuda_ipc_ns: is the broker we reached the owner of the key? (see
 * cuda_ipc_ns_owner.h)
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_owner.h"
#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_pidfd.h"
#include "cuda_ipc_ns_userns.h"

#include <ucs/debug/log.h>

#include <sys/socket.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>


#ifndef SO_PEERPIDFD
#  define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif


/* What this kernel could not check, said once per process */
static int uct_cuda_ipc_ns_owner_said_unchecked = 0;


#define uct_cuda_ipc_ns_owner_refuse(_name, _key, _fmt, ...) \
    ucs_error("cuda_ipc_ns: broker %s is not the owner of the key (pid %u, " \
              "PID namespace %" PRIu64 "): " _fmt "; its answer is refused", \
              _name, (_key)->pid, (_key)->pid_ns, ## __VA_ARGS__)


static void uct_cuda_ipc_ns_owner_unchecked(const char *name, const char *what)
{
    if (!__atomic_exchange_n(&uct_cuda_ipc_ns_owner_said_unchecked, 1,
                             __ATOMIC_RELAXED)) {
        ucs_debug("cuda_ipc_ns: broker %s: %s; only its uid is checked "
                  "(docs/security.md)", name, what);
    }
}


/* Where our /proc shows the owner: its pid there and its start time */
static ucs_status_t
uct_cuda_ipc_ns_owner_check_visible(int pidfd, pid_t inner_pid, const char *name,
                                    const uct_cuda_ipc_ns_rkey_info_t *key)
{
    ucs_status_t status;

    if (inner_pid != (pid_t)key->pid) {
        uct_cuda_ipc_ns_owner_refuse(name, key, "it is pid %d in its PID "
                                     "namespace", (int)inner_pid);
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    }

    if (key->start_time == 0) {
        return UCS_OK; /* a base key carries no start time */
    }

    status = uct_cuda_ipc_ns_pidfd_check_start(pidfd, key->pid,
                                               key->start_time);
    if (status == UCS_ERR_UNREACHABLE) {
        uct_cuda_ipc_ns_owner_refuse(name, key, "that pid belongs to another "
                                     "process now (start time)");
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    }
    return (status == UCS_ERR_UNSUPPORTED) ? UCS_OK : status;
}


/* Without SO_PEERPIDFD (Linux < 6.5): the socket's pid, in our namespace */
static ucs_status_t
uct_cuda_ipc_ns_owner_check_cred_pid(const struct ucred *cred, const char *name,
                                     const uct_cuda_ipc_ns_rkey_info_t *key,
                                     int *pidfd_p)
{
    ucs_status_t status;
    int err;

    if (key->pid_ns != uct_cuda_ipc_ns_nsid_self()->pid_ns) {
        uct_cuda_ipc_ns_owner_unchecked(name, "no SO_PEERPIDFD (Linux < 6.5) "
                                        "for a peer of another PID namespace");
        *pidfd_p = -1;
        return UCS_OK;
    }

    if (cred->pid != (pid_t)key->pid) {
        uct_cuda_ipc_ns_owner_refuse(name, key, "it is pid %d",
                                     (int)cred->pid);
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    }

    status = uct_cuda_ipc_ns_pidfd_open_checked(key->pid, key->start_time,
                                                pidfd_p, &err);
    if (status == UCS_ERR_UNREACHABLE) {
        uct_cuda_ipc_ns_owner_refuse(name, key, "pid %d exited or belongs to "
                                     "another process now (start time)",
                                     (int)cred->pid);
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    } else if (status == UCS_ERR_REJECTED) {
        uct_cuda_ipc_ns_owner_unchecked(name, "pidfd_open is blocked: the "
                                        "start time of its pid is not checked");
        *pidfd_p = -1;
        return UCS_OK;
    }
    return status;
}


/* Whether the process behind @a pidfd, listening at broker @a name, is the
 * owner of @a key: alive, in its PID namespace, with its pid and start time
 * where our /proc shows it */
static ucs_status_t
uct_cuda_ipc_ns_owner_check_pidfd(int pidfd, const char *name,
                                  const uct_cuda_ipc_ns_rkey_info_t *key)
{
    ucs_status_t status;
    uint64_t pid_ns;
    pid_t inner_pid;
    int checked;

    /* the credentials are those of the process that called listen(): one
     * that exited may have left the socket to anyone of its uid */
    if (uct_cuda_ipc_ns_pidfd_exited(pidfd)) {
        uct_cuda_ipc_ns_owner_refuse(name, key, "the process that listens "
                                     "there has exited");
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    }

    checked = 0;
    if (uct_cuda_ipc_ns_pidfd_pid_ns(pidfd, &pid_ns) == UCS_OK) {
        if (pid_ns != key->pid_ns) {
            uct_cuda_ipc_ns_owner_refuse(name, key, "it is in PID namespace %"
                                         PRIu64, pid_ns);
            return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
        }
        checked = 1;
    }

    if (uct_cuda_ipc_ns_pidfd_inner_pid(pidfd, &inner_pid) == UCS_OK) {
        status = uct_cuda_ipc_ns_owner_check_visible(pidfd, inner_pid, name,
                                                     key);
        if (status != UCS_OK) {
            return status;
        }
    } else if (!checked) {
        uct_cuda_ipc_ns_owner_unchecked(name, "its PID namespace cannot be "
                                        "read (PIDFD_GET_PID_NAMESPACE: Linux "
                                        "6.11) and our /proc does not show it");
    }

    /* what was read above was read of a live process (it cannot have been
     * another one: the pidfd pins it) */
    if (uct_cuda_ipc_ns_pidfd_exited(pidfd)) {
        uct_cuda_ipc_ns_owner_refuse(name, key, "the process that listens "
                                     "there exited during the check");
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    }

    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_owner_check(int sock, const char *name,
                                         const uct_cuda_ipc_ns_rkey_info_t *key,
                                         int allowed_uid, int userns_peers,
                                         int *pidfd_p)
{
    socklen_t len = sizeof(struct ucred);
    ucs_status_t status;
    struct ucred cred;
    int pidfd;

    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        ucs_error("cuda_ipc_ns: getsockopt(SO_PEERCRED) on the connection to "
                  "broker %s failed: %m", name);
        return UCS_ERR_IO_ERROR;
    }

    if ((cred.uid != geteuid()) &&
        ((allowed_uid < 0) || (cred.uid != (uid_t)allowed_uid)) &&
        !uct_cuda_ipc_ns_userns_trusted(cred.uid, userns_peers)) {
        uct_cuda_ipc_ns_owner_refuse(name, key, "it runs as uid %u, neither "
                                     "ours (%u) nor the allowed uid (%d)%s",
                                     (unsigned)cred.uid, (unsigned)geteuid(),
                                     allowed_uid,
                                     uct_cuda_ipc_ns_userns_hint(cred.uid));
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    }

    len = sizeof(pidfd);
    if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
        if (errno == ESRCH) {
            ucs_debug("cuda_ipc_ns: broker %s exited", name);
            return UCS_ERR_UNREACHABLE;
        }
        return uct_cuda_ipc_ns_owner_check_cred_pid(&cred, name, key, pidfd_p);
    }

    status = uct_cuda_ipc_ns_owner_check_pidfd(pidfd, name, key);
    if (status != UCS_OK) {
        close(pidfd);
        return status;
    }

    *pidfd_p = pidfd;
    return UCS_OK;
}
