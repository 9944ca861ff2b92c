/*
 * cuda_ipc_ns: fd exchange, importer side (see cuda_ipc_ns_fdx.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_broker_client.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_pidfd.h"
#include "cuda_ipc_ns_scm.h"

#include <ucs/debug/log.h>
#include <ucs/time/time.h>
#include <ucs/debug/memtrack_int.h>

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


static uint64_t uct_cuda_ipc_ns_fdx_pidfd_count  = 0;
static uint64_t uct_cuda_ipc_ns_fdx_broker_count = 0;

/* pidfd_getfd usability, probed once per process (pid) */
static pthread_mutex_t uct_cuda_ipc_ns_fdx_probe_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t           uct_cuda_ipc_ns_fdx_probe_pid  = 0;
static int             uct_cuda_ipc_ns_fdx_probe_usable;


void uct_cuda_ipc_ns_fdx_get_stats(uint64_t *pidfd_imports,
                                   uint64_t *broker_imports)
{
    *pidfd_imports  = __atomic_load_n(&uct_cuda_ipc_ns_fdx_pidfd_count,
                                      __ATOMIC_RELAXED);
    *broker_imports = __atomic_load_n(&uct_cuda_ipc_ns_fdx_broker_count,
                                      __ATOMIC_RELAXED);
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


/* Hand the owner's pidfd to the caller, who may not want it */
static void uct_cuda_ipc_ns_fdx_give_pidfd(int pidfd, int *owner_pidfd_p)
{
    if (owner_pidfd_p != NULL) {
        *owner_pidfd_p = pidfd;
    } else if (pidfd >= 0) {
        close(pidfd);
    }
}


/*
 * Same PID namespace: take the fd with pidfd_getfd, after checking that the
 * process at key->pid is the owner (start time) and still alive.
 *
 * @return UCS_OK; UCT_CUDA_IPC_NS_ERR_NO_PERMISSION when pidfd_getfd is
 *         blocked and UCS_ERR_UNSUPPORTED when the owner cannot be verified
 *         (both: the broker may help); any other status is final.
 */
static ucs_status_t
uct_cuda_ipc_ns_fdx_pidfd_import(const uct_cuda_ipc_ns_rkey_info_t *key,
                                 int *fd_p, int *owner_pidfd_p)
{
    ucs_status_t status;
    int pidfd, fd, err;
    uint64_t alloc_id;
    int32_t owner_fd;

    uct_cuda_ipc_ns_rkey_fd_source(key, &owner_fd, &alloc_id);

    status = uct_cuda_ipc_ns_pidfd_open_checked(key->pid, key->start_time,
                                                &pidfd, &err);
    if (status == UCS_ERR_REJECTED) {
        uct_cuda_ipc_ns_fdx_set_blocked(key->pid, err);
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    } else if (status != UCS_OK) {
        ucs_debug("cuda_ipc_ns: owner pid %u (pid_ns %" PRIu64 ") of "
                  "alloc_id 0x%" PRIx64 " cannot be reached by pidfd: %s",
                  key->pid, key->pid_ns, alloc_id,
                  ucs_status_string(status));
        return status;
    }

    fd = uct_cuda_ipc_ns_pidfd_getfd(pidfd, owner_fd);
    if (fd < 0) {
        err = errno;
        if (uct_cuda_ipc_ns_pidfd_errno_is_blocked(err)) {
            uct_cuda_ipc_ns_fdx_set_blocked(key->pid, err);
            status = UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
        } else if (err == EBADF) {
            ucs_debug("cuda_ipc_ns: owner pid %u has no fd %d (alloc_id 0x%"
                      PRIx64 " released?)", key->pid, owner_fd,
                      alloc_id);
            status = UCS_ERR_NO_ELEM;
        } else if (err == ESRCH) {
            ucs_debug("cuda_ipc_ns: owner pid %u exited during import",
                      key->pid);
            status = UCS_ERR_UNREACHABLE;
        } else {
            ucs_error("cuda_ipc_ns: pidfd_getfd(pid %u, fd %d) failed: %s",
                      key->pid, owner_fd, strerror(err));
            status = UCS_ERR_IO_ERROR;
        }
        goto out;
    }

    ucs_trace("cuda_ipc_ns: got fd %d of pid %u as fd %d via pidfd",
              owner_fd, key->pid, fd);
    *fd_p = fd;
    uct_cuda_ipc_ns_fdx_give_pidfd(pidfd, owner_pidfd_p);
    return UCS_OK;

out:
    close(pidfd);
    return status;
}


/* Whether the reply @a reply (@a len bytes, fd @a fd) of broker @a name gives
 * the allocation @a alloc_id of @a key: its refusal mapped, else the fd */
static ucs_status_t
uct_cuda_ipc_ns_fdx_import_reply_check(const char *name,
                                       const uct_cuda_ipc_ns_rkey_info_t *key,
                                       uint64_t alloc_id, const uint8_t *reply,
                                       size_t len, int fd)
{
    uint64_t reply_alloc_id;
    unsigned bstatus;

    if (uct_cuda_ipc_ns_broker_proto_unpack_reply(reply, len, &bstatus,
                                                  &reply_alloc_id) != UCS_OK) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent a malformed "
                  "reply (%zu bytes)", name, key->pid, len);
        return UCS_ERR_IO_ERROR;
    }

    if (bstatus != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s (owner pid %u) refused alloc_id "
                  "0x%" PRIx64 ": %s", name, key->pid, alloc_id,
                  uct_cuda_ipc_ns_broker_proto_status_str(bstatus));
        return uct_cuda_ipc_ns_broker_proto_status_to_ucs(bstatus);
    }

    if ((fd < 0) || (reply_alloc_id != alloc_id)) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent a bad reply "
                  "for alloc_id 0x%" PRIx64 ": fd %d, alloc_id 0x%" PRIx64,
                  name, key->pid, alloc_id, fd, reply_alloc_id);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


static ucs_status_t
uct_cuda_ipc_ns_fdx_broker_import(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                  const uct_cuda_ipc_ns_rkey_info_t *key,
                                  int *fd_p, int *owner_pidfd_p)
{
    uint8_t reply[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE];
    uint8_t req[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE];
    uct_cuda_ipc_ns_broker_client_t client;
    const char *name = client.name;
    ucs_status_t status;
    unsigned num_fds;
    int fd = -1, pidfd = -1;
    uint64_t alloc_id;
    size_t len;

    uct_cuda_ipc_ns_rkey_fd_source(key, NULL, &alloc_id);
    uct_cuda_ipc_ns_broker_proto_pack_request(req, alloc_id, key->token);

    /* one deadline from connect to the fd */
    uct_cuda_ipc_ns_broker_client_start(&client, cfg, key);
    status = uct_cuda_ipc_ns_broker_client_call(&client, req, sizeof(req),
                                                reply, sizeof(reply), &len,
                                                &fd, 1, &num_fds, &pidfd);
    if (status != UCS_OK) {
        goto out;
    }

    status = uct_cuda_ipc_ns_fdx_import_reply_check(name, key, alloc_id,
                                                    reply, len, fd);
    if (status != UCS_OK) {
        goto out_close_fd;
    }

    ucs_trace("cuda_ipc_ns: got alloc_id 0x%" PRIx64 " of pid %u as fd %d "
              "from broker %s", alloc_id, key->pid, fd, name);
    *fd_p = fd;
    uct_cuda_ipc_ns_fdx_give_pidfd(pidfd, owner_pidfd_p);
    return UCS_OK;

out_close_fd:
    if (fd >= 0) {
        close(fd);
    }
out:
    if (pidfd >= 0) {
        close(pidfd);
    }
    uct_cuda_ipc_ns_broker_client_log(&client, status);
    return status;
}


ucs_status_t
uct_cuda_ipc_ns_fdx_broker_session(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                   const uct_cuda_ipc_ns_rkey_info_t *key,
                                   int *sock_p)
{
    uct_cuda_ipc_ns_broker_client_t client;
    ucs_status_t status;
    int sock, pidfd;

    uct_cuda_ipc_ns_broker_client_start(&client, cfg, key);
    status = uct_cuda_ipc_ns_broker_client_connect(&client, &sock, &pidfd);
    if (status != UCS_OK) {
        return status;
    }
    if (pidfd >= 0) {
        close(pidfd);
    }

    *sock_p = sock;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_fdx_import(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_rkey_info_t *key,
                                        int *fd_p, int *owner_pidfd_p)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    int same_ns                                 = (key->pid_ns == self->pid_ns);
    ucs_status_t status;
    uint64_t alloc_id;
    int32_t owner_fd;

    /* the chunks of a key of several allocations: uct_cuda_ipc_ns_fdx_chunk_fds() */
    uct_cuda_ipc_ns_rkey_fd_source(key, &owner_fd, &alloc_id);
    if (((key->handle_type != UCT_CUDA_IPC_NS_HANDLE_POSIX_FD) &&
         (key->handle_type != UCT_CUDA_IPC_NS_HANDLE_POOL)) ||
        (cfg->mode < 0) || (cfg->mode >= UCT_CUDA_IPC_NS_FDX_LAST) ||
        (owner_fd < 0)) {
        ucs_error("cuda_ipc_ns: invalid fd import (handle type %u, mode %d, "
                  "fd %d)", key->handle_type, cfg->mode, owner_fd);
        return UCS_ERR_INVALID_PARAM;
    }

    if (cfg->mode != UCT_CUDA_IPC_NS_FDX_BROKER) {
        if (!same_ns) {
            /* key->pid numbers a process in the owner's namespace; here
             * it would name another process, if any */
            if (cfg->mode == UCT_CUDA_IPC_NS_FDX_PIDFD) {
                ucs_diag("cuda_ipc_ns: owner pid %u is in PID namespace %"
                         PRIu64 ", we are in %" PRIu64 ": pidfd_getfd cannot "
                         "reach it (fd exchange mode 'pidfd', use 'auto' or "
                         "'broker')", key->pid, key->pid_ns, self->pid_ns);
                return UCS_ERR_UNREACHABLE;
            }
        } else if (uct_cuda_ipc_ns_fdx_pidfd_usable()) {
            status = uct_cuda_ipc_ns_fdx_pidfd_import(key, fd_p, owner_pidfd_p);
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

    status = uct_cuda_ipc_ns_fdx_broker_import(cfg, key, fd_p, owner_pidfd_p);
    if (status == UCS_OK) {
        __atomic_fetch_add(&uct_cuda_ipc_ns_fdx_broker_count, 1,
                           __ATOMIC_RELAXED);
    }
    return status;
}


/* Close the @a num_fds fds of @a fds */
static void uct_cuda_ipc_ns_fdx_close_fds(const int *fds, unsigned num_fds)
{
    unsigned i;

    for (i = 0; i < num_fds; ++i) {
        close(fds[i]);
    }
}


/* Whether the GET_CHUNK_FDS reply @a reply, with @a num_fds fds and the
 * allocation ids @a alloc_ids, answers the request of chunks @a first..
 * first+count-1 of @a key whose layout is @a chunks */
static int
uct_cuda_ipc_ns_fdx_chunk_fds_match(const uct_cuda_ipc_ns_rkey_info_t *key,
                                    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                    uint32_t first, uint32_t count,
                                    const uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t *reply,
                                    const uint64_t *alloc_ids, unsigned num_fds)
{
    uint32_t i;

    if ((reply->reg_id != key->handle.posix.reg_id) ||
        (reply->first != first) || (reply->count != count) ||
        (num_fds != count)) {
        return 0;
    }

    for (i = 0; i < count; ++i) {
        if (alloc_ids[i] != chunks[first + i].alloc_id) {
            return 0;
        }
    }
    return 1;
}


/* Whether chunks @a first..first+count-1 of @a key can be asked for in one
 * GET_CHUNK_FDS request: an error line names why not */
static ucs_status_t
uct_cuda_ipc_ns_fdx_chunk_fds_valid(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                    const uct_cuda_ipc_ns_rkey_info_t *key,
                                    uint32_t first, uint32_t count)
{
    UCS_STATIC_ASSERT(UCT_CUDA_IPC_NS_BROKER_FDS_MAX <=
                      UCT_CUDA_IPC_NS_SCM_MAX_FDS);
    if ((key->handle_type != UCT_CUDA_IPC_NS_HANDLE_CHUNKS) || (count == 0) ||
        (count > UCT_CUDA_IPC_NS_BROKER_FDS_MAX) ||
        (first >= key->handle.posix.num_chunks) ||
        (count > key->handle.posix.num_chunks - first) ||
        (cfg->mode == UCT_CUDA_IPC_NS_FDX_PIDFD)) {
        ucs_error("cuda_ipc_ns: cannot ask pid %u for chunks %u..+%u of 0x%"
                  PRIx64 " (handle type %u, %u chunks, at most %u per "
                  "request; fd exchange mode %d, 'pidfd' has no broker)",
                  key->pid, first, count, key->base, key->handle_type,
                  key->handle.posix.num_chunks, UCT_CUDA_IPC_NS_BROKER_FDS_MAX,
                  cfg->mode);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}


/* Whether the GET_CHUNK_FDS reply @a reply (@a len bytes, @a num_fds fds) of
 * broker @a name gives chunks @a first..first+count-1 of @a key: its refusal
 * mapped, else the fds of the allocations the layout @a chunks names */
static ucs_status_t
uct_cuda_ipc_ns_fdx_chunk_fds_reply_check(const char *name,
                                          const uct_cuda_ipc_ns_rkey_info_t *key,
                                          const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                          uint32_t first, uint32_t count,
                                          const uint8_t *reply, size_t len,
                                          unsigned num_fds)
{
    uint64_t alloc_ids[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
    uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t head;

    if (uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(reply, len, &head,
                                                      alloc_ids) != UCS_OK) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent a malformed "
                  "reply (%zu bytes, %u fds) for chunks %u..+%u of 0x%" PRIx64,
                  name, key->pid, len, num_fds, first, count,
                  key->handle.posix.reg_id);
        return UCS_ERR_IO_ERROR;
    }

    if (head.status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s (owner pid %u) refused chunks "
                  "%u..+%u of 0x%" PRIx64 ": %s", name, key->pid, first, count,
                  key->handle.posix.reg_id,
                  uct_cuda_ipc_ns_broker_proto_status_str(head.status));
        return uct_cuda_ipc_ns_broker_proto_status_to_ucs(head.status);
    }

    if (!uct_cuda_ipc_ns_fdx_chunk_fds_match(key, chunks, first, count, &head,
                                             alloc_ids, num_fds)) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) answered chunks "
                  "%u..+%u of 0x%" PRIx64 " with chunks %u..+%u of 0x%" PRIx64
                  " and %u fds, or other allocation ids than the layout's: "
                  "refused", name, key->pid, first, count,
                  key->handle.posix.reg_id, head.first, head.count,
                  head.reg_id, num_fds);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_fdx_chunk_fds(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                           const uct_cuda_ipc_ns_rkey_info_t *key,
                                           const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                           uint32_t first, uint32_t count,
                                           int *fds, int *owner_pidfd_p)
{
    uint8_t req[UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE];
    uint8_t reply[UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX];
    uct_cuda_ipc_ns_broker_client_t client;
    unsigned num_fds = 0;
    ucs_status_t status;
    int pidfd = -1;
    size_t len;

    status = uct_cuda_ipc_ns_fdx_chunk_fds_valid(cfg, key, first, count);
    if (status != UCS_OK) {
        return status;
    }

    uct_cuda_ipc_ns_broker_proto_pack_fds_request(req, key->handle.posix.reg_id,
                                                  key->token, first, count);

    /* one deadline from connect to the fds */
    uct_cuda_ipc_ns_broker_client_start(&client, cfg, key);
    status = uct_cuda_ipc_ns_broker_client_call(&client, req, sizeof(req),
                                                reply, sizeof(reply), &len,
                                                fds,
                                                UCT_CUDA_IPC_NS_BROKER_FDS_MAX,
                                                &num_fds, &pidfd);
    if (status != UCS_OK) {
        goto out;
    }

    status = uct_cuda_ipc_ns_fdx_chunk_fds_reply_check(client.name, key,
                                                       chunks, first, count,
                                                       reply, len, num_fds);
    if (status != UCS_OK) {
        goto out_close_fds;
    }

    ucs_trace("cuda_ipc_ns: got chunks %u..+%u of 0x%" PRIx64 " of pid %u "
              "from broker %s", first, count, key->handle.posix.reg_id,
              key->pid, client.name);
    __atomic_fetch_add(&uct_cuda_ipc_ns_fdx_broker_count, count,
                       __ATOMIC_RELAXED);
    uct_cuda_ipc_ns_fdx_give_pidfd(pidfd, owner_pidfd_p);
    return UCS_OK;

out_close_fds:
    uct_cuda_ipc_ns_fdx_close_fds(fds, num_fds);
out:
    if (pidfd >= 0) {
        close(pidfd);
    }
    uct_cuda_ipc_ns_broker_client_log(&client, status);
    return status;
}


/* One page of the layout of @a key from index @a first: its own connection
 * (one request per connection), checked owner, within the client's
 * deadline */
static ucs_status_t
uct_cuda_ipc_ns_fdx_layout_page(uct_cuda_ipc_ns_broker_client_t *client,
                                uint32_t first,
                                uct_cuda_ipc_ns_broker_proto_layout_page_t *page,
                                uct_cuda_ipc_ns_broker_proto_chunk_t *chunks)
{
    const uct_cuda_ipc_ns_rkey_info_t *key = client->key;
    const char *name                       = client->name;
    uint8_t req[UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE];
    uint8_t reply[UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX];
    int fd = -1, pidfd = -1;
    ucs_status_t status;
    unsigned num_fds;
    size_t len;

    uct_cuda_ipc_ns_broker_proto_pack_chunk_request(req,
                                                    UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT,
                                                    key->handle.posix.reg_id,
                                                    key->token, first);
    status = uct_cuda_ipc_ns_broker_client_call(client, req, sizeof(req),
                                                reply, sizeof(reply), &len,
                                                &fd, 1, &num_fds, &pidfd);
    if (pidfd >= 0) {
        close(pidfd); /* the chunks' imports hand one to the watch */
    }
    if (status != UCS_OK) {
        return status;
    }

    if (num_fds > 0) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent an fd with a "
                  "layout: refused", name, key->pid);
        close(fd);
        return UCS_ERR_IO_ERROR;
    }

    if (uct_cuda_ipc_ns_broker_proto_unpack_layout(reply, len, page, chunks) !=
        UCS_OK) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent a malformed "
                  "layout reply (%zu bytes)", name, key->pid, len);
        return UCS_ERR_IO_ERROR;
    }

    if (page->status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s (owner pid %u) refused the layout "
                  "of 0x%" PRIx64 ": %s", name, key->pid,
                  key->handle.posix.reg_id,
                  uct_cuda_ipc_ns_broker_proto_status_str(page->status));
        return uct_cuda_ipc_ns_broker_proto_status_to_ucs(page->status);
    }

    if ((page->reg_id != key->handle.posix.reg_id) || (page->first != first) ||
        (page->total != key->handle.posix.num_chunks) ||
        (page->count > page->total - first)) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) answered the layout "
                  "of 0x%" PRIx64 " from chunk %u of %u with 0x%" PRIx64
                  ", chunks %u..+%u of %u: refused", name, key->pid,
                  key->handle.posix.reg_id, first,
                  key->handle.posix.num_chunks, page->reg_id, page->first,
                  page->count, page->total);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_fdx_layout(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                        const uct_cuda_ipc_ns_rkey_info_t *key,
                                        uct_cuda_ipc_ns_broker_proto_chunk_t **chunks_p)
{
    uint32_t total = key->handle.posix.num_chunks;
    uct_cuda_ipc_ns_broker_client_t client;
    uct_cuda_ipc_ns_broker_proto_layout_page_t page;
    uct_cuda_ipc_ns_broker_proto_chunk_t *chunks;
    ucs_status_t status;
    uint32_t first;

    if ((key->handle_type != UCT_CUDA_IPC_NS_HANDLE_CHUNKS) || (total == 0) ||
        (total > UCT_CUDA_IPC_NS_MAX_CHUNKS) ||
        (cfg->mode == UCT_CUDA_IPC_NS_FDX_PIDFD)) {
        ucs_error("cuda_ipc_ns: cannot ask pid %u for the layout of 0x%" PRIx64
                  " (handle type %u, %u chunks, at most %u; fd exchange mode "
                  "%d, 'pidfd' has no broker)", key->pid, key->base,
                  key->handle_type, total, UCT_CUDA_IPC_NS_MAX_CHUNKS,
                  cfg->mode);
        return UCS_ERR_INVALID_PARAM;
    }

    /* room for a whole page past the last chunk: a page is checked against
     * the total only once it is read */
    chunks = ucs_malloc(sizeof(*chunks) *
                        (total + UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX),
                        "cuda_ipc_ns_layout");
    if (chunks == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate the layout of %u chunks",
                  total);
        return UCS_ERR_NO_MEMORY;
    }

    /* one deadline for the whole layout */
    uct_cuda_ipc_ns_broker_client_start(&client, cfg, key);
    for (first = 0; first < total; first += page.count) {
        status = uct_cuda_ipc_ns_fdx_layout_page(&client, first, &page,
                                                 chunks + first);
        if (status != UCS_OK) {
            goto err_free;
        }
    }

    if (uct_cuda_ipc_ns_broker_proto_layout_check(chunks, total, key->length) != UCS_OK) {
        ucs_error("cuda_ipc_ns: the layout of 0x%" PRIx64 " from pid %u does "
                  "not tile its %" PRIu64 " bytes with its %u chunks: refused",
                  key->base, key->pid, key->length, total);
        status = UCS_ERR_IO_ERROR;
        goto err_free;
    }

    ucs_debug("cuda_ipc_ns: layout of 0x%" PRIx64 " (%" PRIu64 " bytes) of "
              "pid %u: %u chunks", key->base, key->length, key->pid, total);
    *chunks_p = chunks;
    return UCS_OK;

err_free:
    ucs_free(chunks);
    return status;
}
