/*
 * cuda_ipc_ns: copies the owner makes for importers (see
 * cuda_ipc_ns_broker_copy.h and docs/owner-copies.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker_copy.h"
#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_scm.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_fd_map.h"
#include "cuda_ipc_ns_host_mem.h"

#include <ucs/debug/assert.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>


/* An importer's buffer mapped here */
typedef struct {
    uint64_t                   buf_id;
    uint64_t                   size;
    int                        device;
    uct_cuda_ipc_ns_host_mem_t host;     /* a host ring, or none */
    CUdeviceptr                dptr;     /* 0: slot free */
    unsigned                   uses;     /* copies running on it */
    uint64_t                   last_use; /* the copier's clock */
} uct_cuda_ipc_ns_copy_buffer_t;


typedef struct {
    int                           fd;        /* -1: slot free */
    pid_t                         pid;       /* SO_PEERCRED, for logs */
    unsigned                      in_flight; /* copies running */
    int                           closing;   /* closed once none runs */
    uct_cuda_ipc_ns_copy_buffer_t buffers[UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX];
} uct_cuda_ipc_ns_broker_copy_client_t;


/* A copy running, from launch to its answer */
typedef struct uct_cuda_ipc_ns_broker_copy_op {
    struct uct_cuda_ipc_ns_broker_copy_op  *next;  /* in the done list */
    uct_cuda_ipc_ns_broker_copy_t *copier;
    uct_cuda_ipc_ns_broker_copy_client_t   *client;
    uct_cuda_ipc_ns_copy_buffer_t   *buffer;
    uct_cuda_ipc_ns_broker_registry_range_t    range;
    uint64_t                        reg_id;
    uint64_t                        seq;
    CUresult                        result; /* the stream's, at the end */
} uct_cuda_ipc_ns_broker_copy_op_t;


/* A connection handed over by the serving loop, with its first request */
typedef struct uct_cuda_ipc_ns_copy_adopted {
    struct uct_cuda_ipc_ns_copy_adopted      *next;
    int                                      sock;
    pid_t                                    pid;
    int                                      buf_fd;
    uint64_t                                 reg_id;
    uint8_t                                  token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    uct_cuda_ipc_ns_broker_proto_copy_args_t copy;
} uct_cuda_ipc_ns_copy_adopted_t;


typedef struct {
    CUcontext ctx;
    CUstream  stream;
} uct_cuda_ipc_ns_copy_stream_t;


struct uct_cuda_ipc_ns_broker_copy {
    const char                        *name;
    uct_cuda_ipc_ns_broker_registry_t *registry;
    uct_cuda_ipc_ns_broker_copy_closed_cb_t closed_cb;
    void                              *closed_arg;
    pthread_t                         thread;
    int                               wake_fd;  /* eventfd */

    /* shared with the serving loop and the driver's callbacks */
    pthread_mutex_t                   lock;
    uct_cuda_ipc_ns_copy_adopted_t    *adopted;
    uct_cuda_ipc_ns_broker_copy_op_t         *done;
    int                               stop;

    /* the copier's thread only */
    uint64_t                          clock;
    unsigned                          num_streams;
    uct_cuda_ipc_ns_copy_stream_t     *streams;
    uct_cuda_ipc_ns_broker_copy_client_t     clients[UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX];
};


/* Copies launched by the copiers of this process; updated with atomics */
static uint64_t uct_cuda_ipc_ns_copier_launched_count = 0;


uint64_t uct_cuda_ipc_ns_broker_copy_launched(void)
{
    return __atomic_load_n(&uct_cuda_ipc_ns_copier_launched_count,
                           __ATOMIC_RELAXED);
}


/* Close a client's connection, and tell the serving loop */
static void uct_cuda_ipc_ns_copier_close(uct_cuda_ipc_ns_broker_copy_t *copier,
                                         int sock)
{
    close(sock);
    copier->closed_cb(copier->closed_arg);
}


static void uct_cuda_ipc_ns_copier_wake(uct_cuda_ipc_ns_broker_copy_t *copier)
{
    uint64_t one = 1;
    ssize_t ret;

    do {
        ret = write(copier->wake_fd, &one, sizeof(one));
    } while ((ret < 0) && (errno == EINTR));
}


/* Answer a COPY; a client that cannot take it is closed */
static void uct_cuda_ipc_ns_copier_reply(uct_cuda_ipc_ns_broker_copy_t *copier,
                                         uct_cuda_ipc_ns_broker_copy_client_t *client,
                                         uct_cuda_ipc_ns_broker_proto_status_t status,
                                         uint64_t reg_id, uint64_t seq)
{
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE];

    uct_cuda_ipc_ns_broker_proto_pack_copy_reply(buf, status, reg_id, seq);
    /* at most UCT_CUDA_IPC_NS_COPY_QUEUE_MAX answers are owed: they fit the
     * socket buffer unless the client stopped reading */
    if (uct_cuda_ipc_ns_scm_send_fd(client->fd, buf, sizeof(buf), -1,
                                    MSG_DONTWAIT | MSG_NOSIGNAL) != UCS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s: cannot answer copy %" PRIu64
                  " of pid %d: closing", copier->name, seq, (int)client->pid);
        client->closing = 1;
    }
}


static int
uct_cuda_ipc_ns_copier_is_host(const uct_cuda_ipc_ns_copy_buffer_t *buffer)
{
    return buffer->host.ptr != NULL;
}


static void uct_cuda_ipc_ns_copier_unmap(uct_cuda_ipc_ns_copy_buffer_t *buffer)
{
    int pushed;

    if (uct_cuda_ipc_ns_ctx_push(NULL, buffer->device, &pushed) == UCS_OK) {
        if (uct_cuda_ipc_ns_copier_is_host(buffer)) {
            uct_cuda_ipc_ns_host_mem_free(&buffer->host);
        } else {
            (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, buffer->dptr, buffer->size);
            (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, buffer->dptr,
                                     buffer->size);
        }
        uct_cuda_ipc_ns_ctx_pop(pushed);
    }
    buffer->dptr = 0;
}


/* Map the importer's buffer from @a buf_fd (not consumed) into @a buffer:
 * its device memory for @a device, or its host ring */
static ucs_status_t
uct_cuda_ipc_ns_copier_map(uct_cuda_ipc_ns_copy_buffer_t *buffer, int buf_fd,
                           uint64_t size, int device, int is_host,
                           const char *what)
{
    ucs_status_t status;

    if (!is_host) {
        return uct_cuda_ipc_ns_fd_map_import(buf_fd, size, device, what,
                                             &buffer->dptr);
    }

    status = uct_cuda_ipc_ns_host_mem_map(buf_fd, size, what, &buffer->host);
    if (status == UCS_OK) {
        /* registered host memory has this address on the GPU too (UVA) */
        buffer->dptr = (CUdeviceptr)buffer->host.ptr;
    }
    return status;
}


/*
 * The client's mapping of its buffer @a copy->buf_id for @a device: the one
 * kept, or a new one of @a buf_fd (consumed here), replacing the least
 * recently used one that no copy uses. NULL when there is none and no fd.
 */
static uct_cuda_ipc_ns_copy_buffer_t *
uct_cuda_ipc_ns_copier_buffer(uct_cuda_ipc_ns_broker_copy_t *copier,
                              uct_cuda_ipc_ns_broker_copy_client_t *client,
                              const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy,
                              int device, int buf_fd)
{
    int is_host = !!(copy->flags & UCT_CUDA_IPC_NS_COPY_BUF_HOST);
    uct_cuda_ipc_ns_copy_buffer_t *buffer, *victim = NULL;
    char what[96];
    unsigned i;

    for (i = 0; i < UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX; ++i) {
        buffer = &client->buffers[i];
        if ((buffer->dptr != 0) && (buffer->buf_id == copy->buf_id) &&
            (buffer->size == copy->buf_size) && (buffer->device == device) &&
            (uct_cuda_ipc_ns_copier_is_host(buffer) == is_host)) {
            if (buf_fd >= 0) {
                close(buf_fd); /* held already: no import again */
            }
            buffer->last_use = ++copier->clock;
            return buffer;
        }
        if ((buffer->uses == 0) &&
            ((victim == NULL) || (buffer->dptr == 0) ||
             ((victim->dptr != 0) && (buffer->last_use < victim->last_use)))) {
            victim = buffer;
        }
    }

    if (buf_fd < 0) {
        ucs_debug("cuda_ipc_ns: broker %s: pid %d asked for a copy with its "
                  "buffer 0x%" PRIx64 ", which it never sent", copier->name,
                  (int)client->pid, copy->buf_id);
        return NULL;
    }

    /* at most UCT_CUDA_IPC_NS_COPY_QUEUE_MAX buffers are in use */
    ucs_assert(victim != NULL);
    if (victim->dptr != 0) {
        uct_cuda_ipc_ns_copier_unmap(victim);
    }

    ucs_snprintf_safe(what, sizeof(what), "%s buffer 0x%" PRIx64 " of "
                      "importer pid %d", is_host ? "host" : "device",
                      copy->buf_id, (int)client->pid);
    if (uct_cuda_ipc_ns_copier_map(victim, buf_fd, copy->buf_size, device,
                                   is_host, what) != UCS_OK) {
        close(buf_fd);
        victim->dptr = 0;
        return NULL;
    }

    close(buf_fd);
    victim->buf_id   = copy->buf_id;
    victim->size     = copy->buf_size;
    victim->device   = device;
    victim->last_use = ++copier->clock;
    ucs_debug("cuda_ipc_ns: broker %s: mapped %s (%" PRIu64 " bytes) at 0x%llx",
              copier->name, what, copy->buf_size,
              (unsigned long long)victim->dptr);
    return victim;
}


/* The copier's stream in the current context @a ctx, created on first use */
static ucs_status_t
uct_cuda_ipc_ns_copier_stream(uct_cuda_ipc_ns_broker_copy_t *copier,
                              CUcontext ctx, CUstream *stream_p)
{
    uct_cuda_ipc_ns_copy_stream_t *grown;
    CUstream stream;
    ucs_status_t status;
    unsigned i;

    for (i = 0; i < copier->num_streams; ++i) {
        if (copier->streams[i].ctx == ctx) {
            *stream_p = copier->streams[i].stream;
            return UCS_OK;
        }
    }

    grown = ucs_realloc(copier->streams,
                        sizeof(*grown) * (copier->num_streams + 1),
                        "cuda_ipc_ns_copy_streams");
    if (grown == NULL) {
        ucs_error("cuda_ipc_ns: broker %s: failed to allocate a stream entry",
                  copier->name);
        return UCS_ERR_NO_MEMORY;
    }
    copier->streams = grown;

    status = UCT_CUDA_IPC_NS_CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    if (status != UCS_OK) {
        return status;
    }

    copier->streams[copier->num_streams].ctx    = ctx;
    copier->streams[copier->num_streams].stream = stream;
    ++copier->num_streams;
    *stream_p = stream;
    return UCS_OK;
}


/* The driver ran the copy, or failed it: hand it to the copier's thread.
 * A stream callback, not a host function: cuda.h calls cuLaunchHostFunc's
 * function "not ... in the event of an error in the CUDA context", and
 * then the importer would wait for an answer that never comes */
static void CUDA_CB uct_cuda_ipc_ns_copier_done_cb(CUstream stream,
                                                   CUresult result, void *arg)
{
    uct_cuda_ipc_ns_broker_copy_op_t *op           = arg;
    uct_cuda_ipc_ns_broker_copy_t *copier = op->copier;

    op->result = result;
    pthread_mutex_lock(&copier->lock);
    op->next     = copier->done;
    copier->done = op;
    pthread_mutex_unlock(&copier->lock);
    uct_cuda_ipc_ns_copier_wake(copier);
}


/* Queue the copy of @a op and a host function that reports it done; the
 * memory's context is current */
static ucs_status_t
uct_cuda_ipc_ns_copier_launch(uct_cuda_ipc_ns_broker_copy_t *copier,
                              uct_cuda_ipc_ns_broker_copy_op_t *op,
                              const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy)
{
    CUdeviceptr buf = op->buffer->dptr + copy->buf_offset;
    CUdeviceptr src, dst;
    CUstream stream;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_copier_stream(copier, op->range.ctx, &stream);
    if (status != UCS_OK) {
        return status;
    }

    if (copy->direction == UCT_CUDA_IPC_NS_COPY_TO_IMPORTER) {
        src = op->range.addr;
        dst = buf;
    } else {
        src = buf;
        dst = op->range.addr;
    }

    status = uct_cuda_ipc_ns_copier_is_host(op->buffer) ?
             UCT_CUDA_IPC_NS_CU(cuMemcpyAsync, dst, src, copy->length,
                                stream) :
             UCT_CUDA_IPC_NS_CU(cuMemcpyDtoDAsync, dst, src, copy->length,
                                stream);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(cuStreamAddCallback, stream,
                                uct_cuda_ipc_ns_copier_done_cb, op, 0);
    if (status != UCS_OK) {
        /* the copy may run still: it must not outlive its buffer */
        (void)UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, stream);
    }
    return status;
}


/* Launch @a op, whose range is begun, on the buffer of @a copy (@a buf_fd,
 * taken, when the request carries it) in the context of the owner's memory */
static uct_cuda_ipc_ns_broker_proto_status_t
uct_cuda_ipc_ns_copier_op_launch(uct_cuda_ipc_ns_broker_copy_t *copier,
                                 uct_cuda_ipc_ns_broker_copy_client_t *client,
                                 uct_cuda_ipc_ns_broker_copy_op_t *op,
                                 const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy,
                                 int buf_fd)
{
    uct_cuda_ipc_ns_broker_proto_status_t status = UCT_CUDA_IPC_NS_BROKER_STATUS_OK;
    int pushed;

    if (uct_cuda_ipc_ns_ctx_push(op->range.ctx, op->range.device, &pushed) !=
        UCS_OK) {
        if (buf_fd >= 0) {
            close(buf_fd);
        }
        return UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL;
    }

    op->buffer = uct_cuda_ipc_ns_copier_buffer(copier, client, copy,
                                               op->range.device, buf_fd);
    if (op->buffer == NULL) {
        status = UCT_CUDA_IPC_NS_BROKER_STATUS_NO_BUFFER;
        goto out;
    }

    ++op->buffer->uses;
    ++client->in_flight;
    if (uct_cuda_ipc_ns_copier_launch(copier, op, copy) != UCS_OK) {
        --op->buffer->uses;
        --client->in_flight;
        status = UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL;
        goto out;
    }
    __atomic_fetch_add(&uct_cuda_ipc_ns_copier_launched_count, 1,
                       __ATOMIC_RELAXED);
out:
    uct_cuda_ipc_ns_ctx_pop(pushed);
    return status;
}


/* Serve one well-formed COPY request of @a client */
static void uct_cuda_ipc_ns_copier_request(uct_cuda_ipc_ns_broker_copy_t *copier,
                                           uct_cuda_ipc_ns_broker_copy_client_t *client,
                                           uint64_t reg_id, const uint8_t *token,
                                           const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy,
                                           int buf_fd)
{
    uct_cuda_ipc_ns_broker_proto_status_t status;
    uct_cuda_ipc_ns_broker_copy_op_t *op;

    op = ucs_calloc(1, sizeof(*op), "cuda_ipc_ns_copy_op");
    if (op == NULL) {
        ucs_error("cuda_ipc_ns: broker %s: failed to allocate a copy",
                  copier->name);
        status = UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL;
        goto err;
    }

    status = uct_cuda_ipc_ns_broker_registry_copy_begin(copier->registry,
                                                        reg_id, token,
                                                        copy->offset,
                                                        copy->length,
                                                        &op->range);
    if (status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s: refused copy %" PRIu64 " of pid %d "
                  "(registration 0x%" PRIx64 ", offset %" PRIu64 ", length %"
                  PRIu64 "): %s", copier->name, copy->seq, (int)client->pid,
                  reg_id, copy->offset, copy->length,
                  uct_cuda_ipc_ns_broker_proto_status_str(status));
        goto err_free;
    }

    op->copier = copier;
    op->client = client;
    op->reg_id = reg_id;
    op->seq    = copy->seq;
    status     = uct_cuda_ipc_ns_copier_op_launch(copier, client, op, copy,
                                                  buf_fd);
    buf_fd     = -1;
    if (status == UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        return;
    }

    uct_cuda_ipc_ns_broker_registry_copy_end(copier->registry, &op->range);
err_free:
    ucs_free(op);
err:
    if (buf_fd >= 0) {
        close(buf_fd);
    }
    uct_cuda_ipc_ns_copier_reply(copier, client, status, reg_id, copy->seq);
}


/* Answer the copies the driver reported done */
static void uct_cuda_ipc_ns_copier_complete(uct_cuda_ipc_ns_broker_copy_t *copier)
{
    uct_cuda_ipc_ns_broker_copy_op_t *op, *next;

    pthread_mutex_lock(&copier->lock);
    op           = copier->done;
    copier->done = NULL;
    pthread_mutex_unlock(&copier->lock);

    for (; op != NULL; op = next) {
        next = op->next;
        uct_cuda_ipc_ns_broker_registry_copy_end(copier->registry, &op->range);
        --op->buffer->uses;
        --op->client->in_flight;
        if (op->result != CUDA_SUCCESS) {
            ucs_error("cuda_ipc_ns: broker %s: copy %" PRIu64 " of pid %d "
                      "(registration 0x%" PRIx64 ") failed on its stream: %s",
                      copier->name, op->seq, (int)op->client->pid, op->reg_id,
                      uct_cuda_ipc_ns_driver_error_name(op->result));
        }
        if (!op->client->closing) {
            uct_cuda_ipc_ns_copier_reply(copier, op->client,
                                         (op->result == CUDA_SUCCESS) ?
                                         UCT_CUDA_IPC_NS_BROKER_STATUS_OK :
                                         UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL,
                                         op->reg_id, op->seq);
        }
        ucs_free(op);
    }
}


/* Take the connections the serving loop handed over, and their requests */
static void uct_cuda_ipc_ns_copier_take_adopted(uct_cuda_ipc_ns_broker_copy_t *copier)
{
    uct_cuda_ipc_ns_copy_adopted_t *adopted, *next;
    uct_cuda_ipc_ns_broker_copy_client_t *client;
    unsigned i;

    pthread_mutex_lock(&copier->lock);
    adopted         = copier->adopted;
    copier->adopted = NULL;
    pthread_mutex_unlock(&copier->lock);

    for (; adopted != NULL; adopted = next) {
        next   = adopted->next;
        client = NULL;
        for (i = 0; i < UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX; ++i) {
            if (copier->clients[i].fd < 0) {
                client = &copier->clients[i];
                break;
            }
        }

        if (client == NULL) {
            ucs_diag("cuda_ipc_ns: broker %s: %u copy clients already, "
                     "refusing pid %d", copier->name,
                     UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX, (int)adopted->pid);
            if (adopted->buf_fd >= 0) {
                close(adopted->buf_fd);
            }
            uct_cuda_ipc_ns_copier_close(copier, adopted->sock);
        } else {
            memset(client, 0, sizeof(*client));
            client->fd  = adopted->sock;
            client->pid = adopted->pid;
            uct_cuda_ipc_ns_copier_request(copier, client, adopted->reg_id,
                                           adopted->token, &adopted->copy,
                                           adopted->buf_fd);
        }
        memset(adopted->token, 0, sizeof(adopted->token));
        ucs_free(adopted);
    }
}


/* Read one request of @a client, and serve it */
static void uct_cuda_ipc_ns_copier_read(uct_cuda_ipc_ns_broker_copy_t *copier,
                                        uct_cuda_ipc_ns_broker_copy_client_t *client)
{
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REQ_MAX];
    uct_cuda_ipc_ns_broker_proto_status_t bstatus;
    uct_cuda_ipc_ns_broker_proto_req_t req;
    ucs_status_t status;
    int buf_fd;
    size_t len;

    status = uct_cuda_ipc_ns_scm_recv_fd(client->fd, buf, sizeof(buf),
                                         MSG_DONTWAIT, &len, &buf_fd);
    if (status == UCS_ERR_TIMED_OUT) {
        return; /* nothing yet */
    } else if (status != UCS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s: copy client pid %d: %s, closing",
                  copier->name, (int)client->pid, ucs_status_string(status));
        client->closing = 1;
        return;
    }

    bstatus = uct_cuda_ipc_ns_broker_proto_unpack_request(buf, len, &req);
    if ((bstatus == UCT_CUDA_IPC_NS_BROKER_STATUS_OK) &&
        (req.op != UCT_CUDA_IPC_NS_BROKER_OP_COPY)) {
        bstatus = UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST;
    }
    if (bstatus != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        /* a session that breaks the protocol ends */
        ucs_debug("cuda_ipc_ns: broker %s: copy client pid %d sent a bad "
                  "request (%zu bytes, op %u): %s, closing", copier->name,
                  (int)client->pid, len, req.op,
                  uct_cuda_ipc_ns_broker_proto_status_str(bstatus));
        if (buf_fd >= 0) {
            close(buf_fd);
        }
        uct_cuda_ipc_ns_copier_reply(copier, client, bstatus, req.alloc_id,
                                     req.copy.seq);
        client->closing = 1;
        return;
    }

    uct_cuda_ipc_ns_copier_request(copier, client, req.alloc_id, req.token,
                                   &req.copy, buf_fd);
}


/* Close @a client once no copy of it runs: its buffers are unmapped */
static void uct_cuda_ipc_ns_copier_reap(uct_cuda_ipc_ns_broker_copy_t *copier,
                                        uct_cuda_ipc_ns_broker_copy_client_t *client)
{
    unsigned i;

    if ((client->fd < 0) || !client->closing || (client->in_flight > 0)) {
        return;
    }

    for (i = 0; i < UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX; ++i) {
        if (client->buffers[i].dptr != 0) {
            uct_cuda_ipc_ns_copier_unmap(&client->buffers[i]);
        }
    }
    uct_cuda_ipc_ns_copier_close(copier, client->fd);
    client->fd = -1;
}


static unsigned uct_cuda_ipc_ns_copier_in_flight(uct_cuda_ipc_ns_broker_copy_t *copier)
{
    unsigned i, count = 0;

    for (i = 0; i < UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX; ++i) {
        if (copier->clients[i].fd >= 0) {
            count += copier->clients[i].in_flight;
        }
    }
    return count;
}


static void *uct_cuda_ipc_ns_copier_run(void *arg)
{
    uct_cuda_ipc_ns_broker_copy_t *copier = arg;
    struct pollfd pfds[1 + UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX];
    unsigned index[UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX];
    unsigned i, num_polled;
    uint64_t count;
    int stop;

    for (;;) {
        pthread_mutex_lock(&copier->lock);
        stop = copier->stop;
        pthread_mutex_unlock(&copier->lock);

        /* a client's socket is its queue: unread while its copies are at
         * the bound, or once the copier stops */
        num_polled = 0;
        for (i = 0; !stop && (i < UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX); ++i) {
            if ((copier->clients[i].fd >= 0) && !copier->clients[i].closing &&
                (copier->clients[i].in_flight < UCT_CUDA_IPC_NS_COPY_QUEUE_MAX)) {
                pfds[1 + num_polled].fd     = copier->clients[i].fd;
                pfds[1 + num_polled].events = POLLIN;
                index[num_polled++]         = i;
            }
        }
        if (stop && (uct_cuda_ipc_ns_copier_in_flight(copier) == 0)) {
            break;
        }

        pfds[0].fd     = copier->wake_fd;
        pfds[0].events = POLLIN;
        if (poll(pfds, 1 + num_polled, -1) < 0) {
            if (errno != EINTR) {
                ucs_error("cuda_ipc_ns: broker %s: copier poll failed: %m",
                          copier->name);
                usleep(1000); /* do not spin on a persistent error */
            }
            continue;
        }

        if (pfds[0].revents & POLLIN) {
            (void)!read(copier->wake_fd, &count, sizeof(count));
            uct_cuda_ipc_ns_copier_complete(copier);
            uct_cuda_ipc_ns_copier_take_adopted(copier);
        }

        /* one request per ready client per round */
        for (i = 0; i < num_polled; ++i) {
            if (pfds[1 + i].revents) {
                uct_cuda_ipc_ns_copier_read(copier,
                                            &copier->clients[index[i]]);
            }
        }

        for (i = 0; i < UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX; ++i) {
            uct_cuda_ipc_ns_copier_reap(copier, &copier->clients[i]);
        }
    }

    for (i = 0; i < UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX; ++i) {
        copier->clients[i].closing = 1;
        uct_cuda_ipc_ns_copier_reap(copier, &copier->clients[i]);
    }
    return NULL;
}


ucs_status_t
uct_cuda_ipc_ns_broker_copy_start(const char *name,
                                  uct_cuda_ipc_ns_broker_registry_t *registry,
                                  uct_cuda_ipc_ns_broker_copy_closed_cb_t closed_cb,
                                  void *closed_arg,
                                  uct_cuda_ipc_ns_broker_copy_t **copier_p)
{
    uct_cuda_ipc_ns_broker_copy_t *copier;
    sigset_t all, saved;
    unsigned i;
    int ret;

    copier = ucs_calloc(1, sizeof(*copier), "cuda_ipc_ns_copier");
    if (copier == NULL) {
        ucs_error("cuda_ipc_ns: broker %s: failed to allocate the copier",
                  name);
        return UCS_ERR_NO_MEMORY;
    }

    copier->name       = name;
    copier->registry   = registry;
    copier->closed_cb  = closed_cb;
    copier->closed_arg = closed_arg;
    for (i = 0; i < UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX; ++i) {
        copier->clients[i].fd = -1;
    }
    pthread_mutex_init(&copier->lock, NULL);
    copier->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (copier->wake_fd < 0) {
        ucs_error("cuda_ipc_ns: broker %s: eventfd() failed: %m", name);
        goto err_free;
    }

    /* the thread takes no signals: they belong to the application */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    ret = pthread_create(&copier->thread, NULL, uct_cuda_ipc_ns_copier_run,
                         copier);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (ret != 0) {
        ucs_error("cuda_ipc_ns: broker %s: failed to start the copier "
                  "thread: %s", name, strerror(ret));
        goto err_close;
    }
    (void)pthread_setname_np(copier->thread, "cuda_ipc_ns_cpy");

    ucs_debug("cuda_ipc_ns: broker %s: copier started", name);
    *copier_p = copier;
    return UCS_OK;

err_close:
    close(copier->wake_fd);
err_free:
    pthread_mutex_destroy(&copier->lock);
    ucs_free(copier);
    return UCS_ERR_IO_ERROR;
}


void uct_cuda_ipc_ns_broker_copy_stop(uct_cuda_ipc_ns_broker_copy_t *copier)
{
    uct_cuda_ipc_ns_copy_adopted_t *adopted, *next;
    unsigned i;

    pthread_mutex_lock(&copier->lock);
    copier->stop = 1;
    pthread_mutex_unlock(&copier->lock);
    uct_cuda_ipc_ns_copier_wake(copier);
    pthread_join(copier->thread, NULL);

    /* handed over after the thread took the last ones */
    for (adopted = copier->adopted; adopted != NULL; adopted = next) {
        next = adopted->next;
        if (adopted->buf_fd >= 0) {
            close(adopted->buf_fd);
        }
        uct_cuda_ipc_ns_copier_close(copier, adopted->sock);
        ucs_free(adopted);
    }

    for (i = 0; i < copier->num_streams; ++i) {
        (void)UCT_CUDA_IPC_NS_CU(cuStreamDestroy, copier->streams[i].stream);
    }
    ucs_free(copier->streams);
    close(copier->wake_fd);
    pthread_mutex_destroy(&copier->lock);
    ucs_debug("cuda_ipc_ns: broker %s: copier stopped", copier->name);
    ucs_free(copier);
}


void uct_cuda_ipc_ns_broker_copy_adopt(uct_cuda_ipc_ns_broker_copy_t *copier,
                                       int sock, pid_t pid,
                                       const uct_cuda_ipc_ns_broker_proto_req_t *req,
                                       int buf_fd)
{
    uct_cuda_ipc_ns_copy_adopted_t *adopted;

    adopted = ucs_calloc(1, sizeof(*adopted), "cuda_ipc_ns_copy_adopted");
    if (adopted == NULL) {
        ucs_error("cuda_ipc_ns: broker %s: failed to take the copy client "
                  "pid %d", copier->name, (int)pid);
        if (buf_fd >= 0) {
            close(buf_fd);
        }
        uct_cuda_ipc_ns_copier_close(copier, sock);
        return;
    }

    adopted->sock   = sock;
    adopted->pid    = pid;
    adopted->buf_fd = buf_fd;
    adopted->reg_id = req->alloc_id;
    adopted->copy   = req->copy;
    memcpy(adopted->token, req->token, sizeof(adopted->token));

    pthread_mutex_lock(&copier->lock);
    adopted->next   = copier->adopted;
    copier->adopted = adopted;
    pthread_mutex_unlock(&copier->lock);
    uct_cuda_ipc_ns_copier_wake(copier);
}
