/*
 * cuda_ipc_ns: the broker's serving loop (see cuda_ipc_ns_broker_serve.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker_serve.h"
#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_scm.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_userns.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>

#include <sys/socket.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>


/* Refused peers remembered to log each once; bounds memory under a flood */
#define UCT_CUDA_IPC_NS_BROKER_MAX_LOGGED      4096
/* Connections accepted per round: the ready ones are served in between */
#define UCT_CUDA_IPC_NS_BROKER_ACCEPT_BATCH    16
/* Pause of accept after it failed for want of fds or memory: doubled up to
 * the maximum while it keeps failing */
#define UCT_CUDA_IPC_NS_BROKER_BACKOFF_MIN_MS  10
#define UCT_CUDA_IPC_NS_BROKER_BACKOFF_MAX_MS  200


/* What the brokers of this process served; updated with atomics */
static uct_cuda_ipc_ns_broker_serve_stats_t uct_cuda_ipc_ns_broker_serve_stats;


void uct_cuda_ipc_ns_broker_serve_get_stats(uct_cuda_ipc_ns_broker_serve_stats_t *stats)
{
    stats->layout_requests    = __atomic_load_n(
            &uct_cuda_ipc_ns_broker_serve_stats.layout_requests, __ATOMIC_RELAXED);
    stats->chunk_fds_requests = __atomic_load_n(
            &uct_cuda_ipc_ns_broker_serve_stats.chunk_fds_requests, __ATOMIC_RELAXED);
    stats->chunk_fds_sent     = __atomic_load_n(
            &uct_cuda_ipc_ns_broker_serve_stats.chunk_fds_sent, __ATOMIC_RELAXED);
    stats->accept_failures    = __atomic_load_n(
            &uct_cuda_ipc_ns_broker_serve_stats.accept_failures, __ATOMIC_RELAXED);
    stats->copies             = uct_cuda_ipc_ns_broker_copy_launched();
}


void uct_cuda_ipc_ns_broker_serve_init(uct_cuda_ipc_ns_broker_serve_t *server,
                                       const char *name, int listen_fd,
                                       int wake_fd,
                                       uct_cuda_ipc_ns_broker_registry_t *registry,
                                       int allowed_uid, int userns_peers,
                                       double req_timeout)
{
    memset(server, 0, sizeof(*server));
    server->name        = name;
    server->listen_fd   = listen_fd;
    server->wake_fd     = wake_fd;
    server->registry    = registry;
    server->uid         = geteuid();
    server->allowed_uid = allowed_uid;
    server->userns_peers = userns_peers;
    server->req_timeout = ucs_time_from_sec(req_timeout);
    kh_init_inplace(uct_cuda_ipc_ns_broker_peers, &server->logged_peers);
    pthread_mutex_init(&server->conns_lock, NULL);
    pthread_cond_init(&server->conns_cond, NULL);
}


void uct_cuda_ipc_ns_broker_serve_cleanup(uct_cuda_ipc_ns_broker_serve_t *server)
{
    if (server->copier != NULL) {
        uct_cuda_ipc_ns_broker_copy_stop(server->copier);
        server->copier = NULL;
    }
    kh_destroy_inplace(uct_cuda_ipc_ns_broker_peers, &server->logged_peers);
    pthread_mutex_destroy(&server->conns_lock);
    pthread_cond_destroy(&server->conns_cond);
}


/* Count an accepted connection (+1) or one closed (-1) */
static void uct_cuda_ipc_ns_broker_count_conn(uct_cuda_ipc_ns_broker_serve_t *server,
                                              int delta)
{
    pthread_mutex_lock(&server->conns_lock);
    server->open_conns += delta;
    if (server->open_conns == 0) {
        pthread_cond_broadcast(&server->conns_cond);
    }
    pthread_mutex_unlock(&server->conns_lock);
}


/* @a fd is -1 when the connection was handed to the copier, which counts
 * it closed when it closes it */
static void uct_cuda_ipc_ns_broker_close_conn(uct_cuda_ipc_ns_broker_serve_t *server,
                                              int fd)
{
    if (fd >= 0) {
        close(fd);
        uct_cuda_ipc_ns_broker_count_conn(server, -1);
    }
}


/* The copier closed a connection it was handed */
static void uct_cuda_ipc_ns_broker_copier_closed(void *arg)
{
    uct_cuda_ipc_ns_broker_count_conn(arg, -1);
}


/* Close connection @a index of the table, keeping the others in age order */
static void uct_cuda_ipc_ns_broker_remove_conn(uct_cuda_ipc_ns_broker_serve_t *server,
                                               unsigned index)
{
    uct_cuda_ipc_ns_broker_close_conn(server, server->conns[index].fd);
    --server->num_conns;
    memmove(&server->conns[index], &server->conns[index + 1],
            (server->num_conns - index) * sizeof(server->conns[0]));
}


/* Whether a refusal from @a pid is the first one seen (log it loudly) */
static int uct_cuda_ipc_ns_broker_first_refusal(uct_cuda_ipc_ns_broker_serve_t *server,
                                                pid_t pid)
{
    int ret;

    if (kh_get(uct_cuda_ipc_ns_broker_peers, &server->logged_peers, pid) !=
        kh_end(&server->logged_peers)) {
        return 0;
    }

    if (kh_size(&server->logged_peers) >= UCT_CUDA_IPC_NS_BROKER_MAX_LOGGED) {
        if (!server->logged_overflow) {
            server->logged_overflow = 1;
            ucs_diag("cuda_ipc_ns: broker %s: refused %u peers, not logging "
                     "more refusals", server->name,
                     UCT_CUDA_IPC_NS_BROKER_MAX_LOGGED);
        }
        return 0;
    }

    kh_put(uct_cuda_ipc_ns_broker_peers, &server->logged_peers, pid, &ret);
    return ret >= 0;
}


/* ucs_log() evaluates its level more than once: compute it first */
#define uct_cuda_ipc_ns_broker_refusal_log(_server, _pid, _fmt, ...) \
    do { \
        ucs_log_level_t _level = \
                uct_cuda_ipc_ns_broker_first_refusal(_server, _pid) ? \
                UCS_LOG_LEVEL_DIAG : UCS_LOG_LEVEL_TRACE; \
        ucs_log(_level, "cuda_ipc_ns: broker %s: refused peer pid %d: " _fmt, \
                (_server)->name, (int)(_pid), ## __VA_ARGS__); \
    } while (0)


/*
 * Send a reply; with @a fd >= 0 attach it. Nonblocking: the reply is one
 * small message on a fresh connection, so it fits the socket buffer, and the
 * caller may hold the registry lock.
 */
static void uct_cuda_ipc_ns_broker_reply(uct_cuda_ipc_ns_broker_serve_t *server,
                                         const uct_cuda_ipc_ns_broker_serve_conn_t *conn,
                                         uct_cuda_ipc_ns_broker_proto_status_t status,
                                         uint64_t alloc_id, int fd)
{
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE];

    uct_cuda_ipc_ns_broker_proto_pack_reply(buf, status, alloc_id);
    if (uct_cuda_ipc_ns_scm_send_fd(conn->fd, buf, sizeof(buf), fd,
                                    MSG_DONTWAIT | MSG_NOSIGNAL) != UCS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s: sending reply '%s' to pid %d "
                  "failed", server->name,
                  uct_cuda_ipc_ns_broker_proto_status_str(status), (int)conn->pid);
    }
}


typedef struct {
    uct_cuda_ipc_ns_broker_serve_t     *server;
    const uct_cuda_ipc_ns_broker_serve_conn_t *conn;
    uint64_t                            alloc_id;
} uct_cuda_ipc_ns_broker_hand_out_t;


static void uct_cuda_ipc_ns_broker_send_fd(void *arg, int fd)
{
    uct_cuda_ipc_ns_broker_hand_out_t *hand_out = arg;

    uct_cuda_ipc_ns_broker_reply(hand_out->server, hand_out->conn,
                                 UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                                 hand_out->alloc_id, fd);
}


/* Answer a well-formed request: the fd of a live registration, or NO_ENTRY */
static void uct_cuda_ipc_ns_broker_serve(uct_cuda_ipc_ns_broker_serve_t *server,
                                         const uct_cuda_ipc_ns_broker_serve_conn_t *conn,
                                         uint64_t alloc_id, const uint8_t *token)
{
    uct_cuda_ipc_ns_broker_hand_out_t hand_out = {server, conn, alloc_id};

    if (uct_cuda_ipc_ns_broker_registry_hand_out(server->registry, alloc_id,
                                                 token,
                                                 uct_cuda_ipc_ns_broker_send_fd,
                                                 &hand_out)) {
        ucs_debug("cuda_ipc_ns: broker %s: sent fd of alloc_id 0x%" PRIx64
                  " to pid %d", server->name, alloc_id, (int)conn->pid);
        return;
    }

    uct_cuda_ipc_ns_broker_reply(server, conn,
                                 UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY,
                                 alloc_id, -1);
    uct_cuda_ipc_ns_broker_refusal_log(server, conn->pid,
                                       "unknown or released token for "
                                       "alloc_id 0x%" PRIx64, alloc_id);
}


/* Answer a LAYOUT request: a page of the registration's chunks */
static void uct_cuda_ipc_ns_broker_serve_layout(uct_cuda_ipc_ns_broker_serve_t *server,
                                                const uct_cuda_ipc_ns_broker_serve_conn_t *conn,
                                                const uct_cuda_ipc_ns_broker_proto_req_t *req)
{
    uct_cuda_ipc_ns_broker_proto_chunk_t chunks[UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX];
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX];
    uint32_t count, total;
    size_t len;

    __atomic_fetch_add(&uct_cuda_ipc_ns_broker_serve_stats.layout_requests, 1,
                       __ATOMIC_RELAXED);
    if (!uct_cuda_ipc_ns_broker_registry_layout(server->registry,
                                                req->alloc_id, req->token,
                                                req->index, chunks, &count,
                                                &total)) {
        uct_cuda_ipc_ns_broker_reply(server, conn,
                                     UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY,
                                     req->alloc_id, -1);
        uct_cuda_ipc_ns_broker_refusal_log(server, conn->pid,
                                           "unknown or released token, or "
                                           "chunk %u out of range, for the "
                                           "layout of 0x%" PRIx64, req->index,
                                           req->alloc_id);
        return;
    }

    len = uct_cuda_ipc_ns_broker_proto_pack_layout(buf, req->alloc_id, total,
                                                   req->index, count, chunks);
    /* a few KiB on a fresh connection: fits the socket buffer at once */
    if (uct_cuda_ipc_ns_scm_send_fd(conn->fd, buf, len, -1,
                                    MSG_DONTWAIT | MSG_NOSIGNAL) != UCS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s: sending the layout of 0x%" PRIx64
                  " to pid %d failed", server->name, req->alloc_id,
                  (int)conn->pid);
    }
}


/* The chunks of one GET_CHUNK_FDS request, exported in order until one
 * fails */
typedef struct {
    uct_cuda_ipc_ns_broker_proto_status_t status;
    uint32_t                        count;  /* exported so far */
    uint64_t                        alloc_ids[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
    int                             fds[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
} uct_cuda_ipc_ns_broker_chunks_out_t;


/* Allocation id, start and size of the mapping at @a addr, as the
 * registration recorded them (uct_cuda_ipc_ns_ptr_attr_get), 0s when none */
static void uct_cuda_ipc_ns_broker_chunk_attr(uint64_t addr, uint64_t *ids)
{
    uct_cuda_ipc_ns_ptr_attr_t attr;

    if (uct_cuda_ipc_ns_ptr_attr_get((void*)addr, &attr) != UCS_OK) {
        attr.alloc_id = attr.base = attr.size = 0;
    }
    ids[0] = attr.alloc_id;
    ids[1] = attr.base;
    ids[2] = attr.size;
}


/*
 * Export the chunk at @a addr as an fd, kept in @a out until the reply is
 * sent; after a chunk failed, the ones after it are not exported. The
 * allocation mapped there must still be the one the registration recorded
 * (its buffer id, start and size, read before and after taking the handle:
 * ids are never reused, so the handle is that allocation's); a pool that
 * unmapped it, or mapped another one there, gets NO_ENTRY
 * (docs/framework-memory.md, "Staleness").
 */
static void uct_cuda_ipc_ns_broker_export_chunk(void *arg, uint64_t addr,
                                                uint64_t size, uint64_t alloc_id)
{
    uct_cuda_ipc_ns_broker_chunks_out_t *out = arg;
    CUmemGenericAllocationHandle handle;
    uint64_t before[3], after[3];
    int fd = -1;

    if (out->status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        return;
    }

    out->status = UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY;
    uct_cuda_ipc_ns_broker_chunk_attr(addr, before);
    if ((before[0] != alloc_id) || (before[1] != addr) || (before[2] != size)) {
        goto out;
    }

    if (UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuMemRetainAllocationHandle,
                                &handle, (void*)addr) != UCS_OK) {
        goto out;
    }

    uct_cuda_ipc_ns_broker_chunk_attr(addr, after);
    if ((after[0] == alloc_id) && (after[1] == addr) && (after[2] == size)) {
        out->status = (uct_cuda_ipc_ns_ptr_export_handle(handle,
                                                         UCS_LOG_LEVEL_ERROR,
                                                         &fd) == UCS_OK) ?
                      UCT_CUDA_IPC_NS_BROKER_STATUS_OK :
                      UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL;
    }
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);

out:
    if (out->status == UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        out->alloc_ids[out->count] = alloc_id;
        out->fds[out->count]       = fd;
        ++out->count;
    } else {
        ucs_debug("cuda_ipc_ns: chunk at 0x%" PRIx64 " (alloc_id 0x%" PRIx64
                  ") not exported: %s", addr, alloc_id,
                  uct_cuda_ipc_ns_broker_proto_status_str(out->status));
    }
}


/*
 * Answer a GET_CHUNK_FDS request: the chunks exported now, their fds in one
 * message, then ours closed (no fd per chunk is kept); or, when any of them
 * cannot be exported, a refusal, and the ones exported closed.
 */
static void uct_cuda_ipc_ns_broker_serve_chunk_fds(uct_cuda_ipc_ns_broker_serve_t *server,
                                                   const uct_cuda_ipc_ns_broker_serve_conn_t *conn,
                                                   const uct_cuda_ipc_ns_broker_proto_req_t *req)
{
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX];
    uct_cuda_ipc_ns_broker_chunks_out_t out;
    uint32_t i;
    size_t len;

    UCS_STATIC_ASSERT(UCT_CUDA_IPC_NS_BROKER_FDS_MAX <=
                      UCT_CUDA_IPC_NS_SCM_MAX_FDS);
    __atomic_fetch_add(&uct_cuda_ipc_ns_broker_serve_stats.chunk_fds_requests, 1,
                       __ATOMIC_RELAXED);
    out.status = UCT_CUDA_IPC_NS_BROKER_STATUS_OK;
    out.count  = 0;
    if (!uct_cuda_ipc_ns_broker_registry_hand_out_chunks(
                server->registry, req->alloc_id, req->token, req->index,
                req->count, uct_cuda_ipc_ns_broker_export_chunk, &out)) {
        uct_cuda_ipc_ns_broker_reply(server, conn,
                                     UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY,
                                     req->alloc_id, -1);
        uct_cuda_ipc_ns_broker_refusal_log(server, conn->pid,
                                           "unknown or released token, or "
                                           "chunks %u..+%u out of range, for "
                                           "0x%" PRIx64, req->index,
                                           req->count, req->alloc_id);
    } else if (out.status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        uct_cuda_ipc_ns_broker_reply(server, conn, out.status, req->alloc_id,
                                     -1);
        ucs_debug("cuda_ipc_ns: broker %s: chunk %u of 0x%" PRIx64 " asked "
                  "by pid %d: %s", server->name, req->index + out.count,
                  req->alloc_id, (int)conn->pid,
                  uct_cuda_ipc_ns_broker_proto_status_str(out.status));
    } else {
        len = uct_cuda_ipc_ns_broker_proto_pack_fds_reply(buf, req->alloc_id,
                                                          req->index, out.count,
                                                          out.alloc_ids);
        /* counted before the send: a peer that got them may read the
         * count at once (the tests do) */
        __atomic_fetch_add(&uct_cuda_ipc_ns_broker_serve_stats.chunk_fds_sent,
                           out.count, __ATOMIC_RELAXED);
        /* one small message on a fresh connection: fits the socket buffer */
        if (uct_cuda_ipc_ns_scm_send_fds(conn->fd, buf, len, out.fds,
                                         out.count,
                                         MSG_DONTWAIT | MSG_NOSIGNAL) ==
            UCS_OK) {
            ucs_debug("cuda_ipc_ns: broker %s: sent chunks %u..+%u of 0x%"
                      PRIx64 " to pid %d", server->name, req->index,
                      out.count, req->alloc_id, (int)conn->pid);
        } else {
            __atomic_fetch_sub(&uct_cuda_ipc_ns_broker_serve_stats.chunk_fds_sent,
                               out.count, __ATOMIC_RELAXED);
            ucs_debug("cuda_ipc_ns: broker %s: sending chunks %u..+%u of 0x%"
                      PRIx64 " to pid %d failed", server->name, req->index,
                      out.count, req->alloc_id, (int)conn->pid);
        }
    }

    for (i = 0; i < out.count; ++i) {
        close(out.fds[i]);
    }
}


/*
 * Hand a COPY request and its connection to the copier, started on first
 * use; conn->fd is the copier's then (-1 here).
 */
static void uct_cuda_ipc_ns_broker_serve_copy(uct_cuda_ipc_ns_broker_serve_t *server,
                                              uct_cuda_ipc_ns_broker_serve_conn_t *conn,
                                              const uct_cuda_ipc_ns_broker_proto_req_t *req,
                                              int buf_fd)
{
    if ((server->copier == NULL) &&
        (uct_cuda_ipc_ns_broker_copy_start(server->name, server->registry,
                                           uct_cuda_ipc_ns_broker_copier_closed,
                                           server, &server->copier) !=
         UCS_OK)) {
        uct_cuda_ipc_ns_broker_reply(server, conn,
                                     UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL,
                                     req->alloc_id, -1);
        if (buf_fd >= 0) {
            close(buf_fd);
        }
        return;
    }

    /* the copier answers with the COPY reply, and keeps the connection */
    uct_cuda_ipc_ns_broker_copy_adopt(server->copier, conn->fd, conn->pid,
                                      req, buf_fd);
    conn->fd = -1;
}


/* Answer the request of @a conn that unpacked as @a status (not OK), and log
 * why it is refused */
static void
uct_cuda_ipc_ns_broker_refuse_request(uct_cuda_ipc_ns_broker_serve_t *server,
                                      uct_cuda_ipc_ns_broker_serve_conn_t *conn,
                                      uct_cuda_ipc_ns_broker_proto_status_t status,
                                      const uct_cuda_ipc_ns_broker_proto_req_t *req,
                                      size_t len)
{
    uct_cuda_ipc_ns_broker_reply(server, conn, status, req->alloc_id, -1);
    if (status == UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION) {
        uct_cuda_ipc_ns_broker_refusal_log(server, conn->pid,
                                           "protocol version %u, expected %u",
                                           req->version,
                                           UCT_CUDA_IPC_NS_BROKER_VERSION);
    } else if (req->token != NULL) {
        uct_cuda_ipc_ns_broker_refusal_log(server, conn->pid,
                                           "unknown operation %u", req->op);
    } else {
        uct_cuda_ipc_ns_broker_refusal_log(server, conn->pid,
                                           "malformed request (%zu bytes)",
                                           len);
    }
}


/* @return nonzero when the connection is done and can be closed (or was
 * handed to the copier) */
static int uct_cuda_ipc_ns_broker_handle(uct_cuda_ipc_ns_broker_serve_t *server,
                                         uct_cuda_ipc_ns_broker_serve_conn_t *conn)
{
    /* one more byte than the longest request: a longer message shows as
     * too long */
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REQ_MAX + 1];
    uct_cuda_ipc_ns_broker_proto_status_t status;
    uct_cuda_ipc_ns_broker_proto_req_t req;
    ucs_status_t recv_status;
    size_t len;
    int fd;

    /* at most one fd comes in (a COPY's buffer); more, or a truncated
     * message, is refused with every fd closed */
    recv_status = uct_cuda_ipc_ns_scm_recv_fd(conn->fd, buf, sizeof(buf),
                                              MSG_DONTWAIT, &len, &fd);
    if (recv_status == UCS_ERR_TIMED_OUT) {
        return 0; /* EAGAIN */
    } else if (recv_status == UCS_ERR_CONNECTION_RESET) {
        ucs_debug("cuda_ipc_ns: broker %s: pid %d closed without a request",
                  server->name, (int)conn->pid);
        return 1;
    } else if (recv_status == UCS_ERR_MESSAGE_TRUNCATED) {
        len = sizeof(buf); /* too long: refused below */
    } else if (recv_status != UCS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s: recv from pid %d failed: %s",
                  server->name, (int)conn->pid,
                  ucs_status_string(recv_status));
        return 1;
    }

    status = uct_cuda_ipc_ns_broker_proto_unpack_request(buf, len, &req);
    if ((status == UCT_CUDA_IPC_NS_BROKER_STATUS_OK) &&
        (req.op == UCT_CUDA_IPC_NS_BROKER_OP_COPY)) {
        uct_cuda_ipc_ns_broker_serve_copy(server, conn, &req, fd);
        return 1;
    }
    if (fd >= 0) {
        close(fd); /* only a COPY carries an fd */
    }

    if (status == UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        switch (req.op) {
        case UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT:
            uct_cuda_ipc_ns_broker_serve_layout(server, conn, &req);
            break;
        case UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS:
            uct_cuda_ipc_ns_broker_serve_chunk_fds(server, conn, &req);
            break;
        default:
            uct_cuda_ipc_ns_broker_serve(server, conn, req.alloc_id, req.token);
            break;
        }
        return 1;
    }

    uct_cuda_ipc_ns_broker_refuse_request(server, conn, status, &req, len);
    return 1;
}


/*
 * Discard what a refused peer already sent: closing a unix socket with unread
 * data makes the peer's next recv fail with ECONNRESET before our reply.
 */
static void uct_cuda_ipc_ns_broker_drain(int fd)
{
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE + 1];
    int i;

    for (i = 0; i < 4; ++i) {
        if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0) {
            break;
        }
    }
}


/* Whether a client waits in the listening socket's backlog */
static int uct_cuda_ipc_ns_broker_client_waits(uct_cuda_ipc_ns_broker_serve_t *server)
{
    struct pollfd pfd = {.fd = server->listen_fd, .events = POLLIN};

    return (poll(&pfd, 1, 0) == 1) && (pfd.revents & POLLIN);
}


/*
 * accept() failed with @a err. Out of fds or memory: the listening socket
 * stays readable, so polling it again at once would spin. accept() fails so
 * even with nobody waiting; when a client does wait, make room by closing
 * the oldest idle connection, but only one idle for a while (a client just
 * accepted is still sending its request); otherwise pause accepting.
 * @return nonzero to try accepting again now.
 */
static int uct_cuda_ipc_ns_broker_accept_failed(uct_cuda_ipc_ns_broker_serve_t *server,
                                                int err)
{
    ucs_time_t min_backoff =
            ucs_time_from_msec(UCT_CUDA_IPC_NS_BROKER_BACKOFF_MIN_MS);
    ucs_time_t now;

    if ((err != EMFILE) && (err != ENFILE) && (err != ENOBUFS) &&
        (err != ENOMEM)) {
        if ((err != EAGAIN) && (err != EINTR) && (err != ECONNABORTED)) {
            ucs_debug("cuda_ipc_ns: broker %s: accept failed: %s",
                      server->name, strerror(err));
        }
        return 0;
    }

    __atomic_fetch_add(&uct_cuda_ipc_ns_broker_serve_stats.accept_failures, 1,
                       __ATOMIC_RELAXED);
    if (!server->accept_failing) {
        server->accept_failing = 1;
        server->accept_backoff = min_backoff;
        ucs_log(server->logged_accept_failure ? UCS_LOG_LEVEL_DEBUG :
                                                UCS_LOG_LEVEL_ERROR,
                "cuda_ipc_ns: broker %s: accept failed: %s; closing idle "
                "connections and pausing accept", server->name, strerror(err));
        server->logged_accept_failure = 1;
    }

    now = ucs_get_time();
    if ((server->num_conns > 0) &&
        /* accepted at deadline - req_timeout, idle at least min_backoff */
        (server->conns[0].deadline + min_backoff <= now + server->req_timeout) &&
        uct_cuda_ipc_ns_broker_client_waits(server)) {
        ucs_debug("cuda_ipc_ns: broker %s: closing the connection of pid %d "
                  "to accept a new one", server->name,
                  (int)server->conns[0].pid);
        uct_cuda_ipc_ns_broker_remove_conn(server, 0);
        return 1;
    }

    server->accept_resume  = now + server->accept_backoff;
    server->accept_backoff = ucs_min(2 * server->accept_backoff,
                                     ucs_time_from_msec(
                                     UCT_CUDA_IPC_NS_BROKER_BACKOFF_MAX_MS));
    return 0;
}


/* Accept one connection; refuse a foreign uid at once, answer at once a
 * request already queued, else keep it (evicting the oldest when full) */
static int uct_cuda_ipc_ns_broker_accept_one(uct_cuda_ipc_ns_broker_serve_t *server)
{
    uct_cuda_ipc_ns_broker_serve_conn_t conn;
    struct ucred cred;
    socklen_t len;

    conn.fd = accept4(server->listen_fd, NULL, NULL,
                      SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (conn.fd < 0) {
        return uct_cuda_ipc_ns_broker_accept_failed(server, errno);
    }
    uct_cuda_ipc_ns_broker_count_conn(server, +1);
    if (server->accept_failing) {
        server->accept_failing = 0;
        ucs_debug("cuda_ipc_ns: broker %s: accepting again", server->name);
    }

    len = sizeof(cred);
    if (getsockopt(conn.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        ucs_debug("cuda_ipc_ns: broker %s: SO_PEERCRED failed: %m",
                  server->name);
        uct_cuda_ipc_ns_broker_close_conn(server, conn.fd);
        return 1;
    }

    conn.pid      = cred.pid;
    conn.deadline = ucs_get_time() + server->req_timeout;
    if ((cred.uid != server->uid) &&
        ((server->allowed_uid < 0) ||
         (cred.uid != (uid_t)server->allowed_uid)) &&
        !uct_cuda_ipc_ns_userns_trusted(cred.uid, server->userns_peers)) {
        /* refuse before reading anything from a foreign uid */
        uct_cuda_ipc_ns_broker_reply(server, &conn,
                                     UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED, 0,
                                     -1);
        uct_cuda_ipc_ns_broker_refusal_log(server, conn.pid,
                                           "uid %u is not allowed (ours is "
                                           "%u)%s", (unsigned)cred.uid,
                                           (unsigned)server->uid,
                                           uct_cuda_ipc_ns_userns_hint(cred.uid));
        uct_cuda_ipc_ns_broker_drain(conn.fd);
        uct_cuda_ipc_ns_broker_close_conn(server, conn.fd);
        return 1;
    }

    if (uct_cuda_ipc_ns_broker_handle(server, &conn)) {
        uct_cuda_ipc_ns_broker_close_conn(server, conn.fd);
        return 1;
    }

    if (server->num_conns == UCT_CUDA_IPC_NS_BROKER_MAX_CONNS) {
        ucs_debug("cuda_ipc_ns: broker %s: %u connections wait for a "
                  "request, closing the oldest (pid %d)", server->name,
                  server->num_conns, (int)server->conns[0].pid);
        uct_cuda_ipc_ns_broker_remove_conn(server, 0);
    }
    server->conns[server->num_conns++] = conn;
    return 1;
}


/* poll() timeout until the first connection deadline or accept resumes */
static int uct_cuda_ipc_ns_broker_poll_timeout(uct_cuda_ipc_ns_broker_serve_t *server,
                                               ucs_time_t now, int accepting)
{
    ucs_time_t next = UCS_TIME_INFINITY;

    if (server->num_conns > 0) {
        next = server->conns[0].deadline; /* the oldest expires first */
    }
    if (!accepting) {
        next = ucs_min(next, server->accept_resume);
    }

    if (next == UCS_TIME_INFINITY) {
        return -1;
    } else if (next <= now) {
        return 0;
    }
    return (int)ucs_time_to_msec(next - now) + 1;
}


void *uct_cuda_ipc_ns_broker_serve_run(void *arg)
{
    uct_cuda_ipc_ns_broker_serve_t *server = arg;
    struct pollfd pfds[2 + UCT_CUDA_IPC_NS_BROKER_MAX_CONNS];
    unsigned i, num_polled, accepted;
    int accepting, ret;
    ucs_time_t now;

    ucs_debug("cuda_ipc_ns: broker %s: serving", server->name);
    for (;;) {
        now       = ucs_get_time();
        accepting = (server->accept_resume <= now);

        pfds[0].fd     = server->wake_fd;
        pfds[0].events = POLLIN;
        pfds[1].fd     = accepting ? server->listen_fd : -1;
        pfds[1].events = POLLIN;
        for (i = 0; i < server->num_conns; ++i) {
            pfds[2 + i].fd     = server->conns[i].fd;
            pfds[2 + i].events = POLLIN;
        }
        num_polled = server->num_conns;

        ret = poll(pfds, 2 + num_polled,
                   uct_cuda_ipc_ns_broker_poll_timeout(server, now,
                                                       accepting));
        if (ret < 0) {
            if (errno != EINTR) {
                ucs_error("cuda_ipc_ns: broker %s: poll failed: %m",
                          server->name);
                usleep(1000); /* do not spin on a persistent error */
            }
            continue;
        }

        if (pfds[0].revents) {
            break; /* shutdown */
        }

        /* every ready connection once, and the expired ones; backwards, so
         * that removing one leaves the indices still to visit in place */
        now = ucs_get_time();
        for (i = num_polled; i-- > 0;) {
            if (pfds[2 + i].revents &&
                uct_cuda_ipc_ns_broker_handle(server, &server->conns[i])) {
                uct_cuda_ipc_ns_broker_remove_conn(server, i);
            } else if (server->conns[i].deadline <= now) {
                ucs_debug("cuda_ipc_ns: broker %s: no request from pid %d "
                          "in time, closing", server->name,
                          (int)server->conns[i].pid);
                uct_cuda_ipc_ns_broker_remove_conn(server, i);
            }
        }

        if (pfds[1].revents & POLLIN) {
            for (accepted = 0;
                 (accepted < UCT_CUDA_IPC_NS_BROKER_ACCEPT_BATCH) &&
                 uct_cuda_ipc_ns_broker_accept_one(server);
                 ++accepted) {
            }
        }
    }

    while (server->num_conns > 0) {
        uct_cuda_ipc_ns_broker_remove_conn(server, server->num_conns - 1);
    }
    ucs_debug("cuda_ipc_ns: broker %s: stopped", server->name);
    return NULL;
}


void uct_cuda_ipc_ns_broker_serve_wait_idle(uct_cuda_ipc_ns_broker_serve_t *server)
{
    pthread_mutex_lock(&server->conns_lock);
    while (server->open_conns > 0) {
        pthread_cond_wait(&server->conns_cond, &server->conns_lock);
    }
    pthread_mutex_unlock(&server->conns_lock);
}
