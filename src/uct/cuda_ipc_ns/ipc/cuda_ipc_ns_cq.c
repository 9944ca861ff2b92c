/*
 * cuda_ipc_ns: asynchronous completion of copies (see cuda_ipc_ns_cq.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_cq.h"
#include "cuda_ipc_ns_target.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_compat.h"

#include <ucs/datastruct/queue.h>
#include <uct/base/uct_iface.h>
#include <ucs/arch/cpu.h>
#include <ucs/sys/math.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/compiler_def.h>

#include <sys/eventfd.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>


static void uct_cuda_ipc_ns_cq_op_init(ucs_mpool_t *mp, void *obj, void *chunk)
{
    uct_cuda_ipc_ns_cq_op_t *op = obj;

    op->super.list = NULL;
    op->event     = NULL;
    op->more_regions     = NULL;
    op->num_more_regions = 0;
    op->event_ctx = NULL;
}


static void uct_cuda_ipc_ns_cq_op_cleanup(ucs_mpool_t *mp, void *obj)
{
    uct_cuda_ipc_ns_cq_op_t *op = obj;

    if (op->event != NULL) {
        (void)UCT_CUDA_IPC_NS_CU(cuEventDestroy, op->event);
    }
}


static ucs_mpool_ops_t uct_cuda_ipc_ns_cq_op_mpool_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = uct_cuda_ipc_ns_cq_op_init,
    .obj_cleanup   = uct_cuda_ipc_ns_cq_op_cleanup,
    .obj_str       = NULL
};


ucs_status_t uct_cuda_ipc_ns_cq_init(uct_cuda_ipc_ns_cq_t *cq,
                                     unsigned max_streams, unsigned max_poll,
                                     unsigned max_events)
{
    ucs_status_t status;

    memset(cq, 0, sizeof(*cq));
    cq->max_streams = max_streams;
    cq->max_poll    = max_poll;
    cq->max_ops     = max_events;
    ucs_list_head_init(&cq->active);

    status = uct_cuda_ipc_ns_compat_mpool_init(&cq->op_mp,
                                               sizeof(uct_cuda_ipc_ns_cq_op_t),
                                               UCS_SYS_CACHE_LINE_SIZE,
                                               ucs_min(128, max_events),
                                               max_events,
                                               &uct_cuda_ipc_ns_cq_op_mpool_ops,
                                               "cuda_ipc_ns_ops");
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: failed to create the op pool: %s",
                  ucs_status_string(status));
        return status;
    }

    status = uct_cuda_ipc_ns_op_flush_mp_init(&cq->flush_mp);
    if (status != UCS_OK) {
        goto err_op_mp;
    }

    cq->wakeup = ucs_malloc(sizeof(*cq->wakeup), "cuda_ipc_ns_cq_wakeup");
    if (cq->wakeup == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate the completion wakeup");
        status = UCS_ERR_NO_MEMORY;
        goto err_flush_mp;
    }

    cq->wakeup->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (cq->wakeup->fd < 0) {
        ucs_error("cuda_ipc_ns: eventfd() failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err_free_wakeup;
    }
    cq->wakeup->refs = 1;
    return UCS_OK;

err_free_wakeup:
    ucs_free(cq->wakeup);
err_flush_mp:
    ucs_mpool_cleanup(&cq->flush_mp, 0);
err_op_mp:
    ucs_mpool_cleanup(&cq->op_mp, 0);
    return status;
}


/*
 * The op's copy ended with @a status: a copy whose other end is gone is moot
 * (the peer died), the mapping is unpinned, the user's completion called,
 * the endpoint's flushes advanced, and the op and its event go back.
 */
static void uct_cuda_ipc_ns_cq_op_complete(uct_cuda_ipc_ns_cq_t *cq,
                                           uct_cuda_ipc_ns_cq_op_t *op,
                                           ucs_status_t status)
{
    /* NULL: a copy within our own memory (a copy session's staging ring) */
    if (ucs_likely(op->region != NULL)) {
        if ((status == UCS_OK) &&
            uct_cuda_ipc_ns_cache_peer_is_dead(op->region->peer)) {
            status = UCS_ERR_CONNECTION_RESET;
        }
        uct_cuda_ipc_ns_cache_unpin(op->region);
    }
    if (op->more_regions != NULL) {
        uct_cuda_ipc_ns_target_unpin_regions(op->more_regions,
                                             op->num_more_regions);
        op->more_regions     = NULL;
        op->num_more_regions = 0;
    }

    uct_cuda_ipc_ns_op_complete(&op->super, status);
    uct_cuda_ipc_ns_cq_op_put(cq, op);
}


static void uct_cuda_ipc_ns_cq_wakeup_put(uct_cuda_ipc_ns_cq_wakeup_t *wakeup)
{
    if (__atomic_sub_fetch(&wakeup->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        close(wakeup->fd);
        ucs_free(wakeup);
    }
}


void uct_cuda_ipc_ns_cq_cleanup(uct_cuda_ipc_ns_cq_t *cq)
{
    uct_cuda_ipc_ns_cq_stream_t *stream;
    uct_cuda_ipc_ns_cq_op_t *op;
    unsigned i;
    int pushed;

    /* copies use mappings that completion unpins: wait for everything
     * enqueued (after an error in the context this returns at once; the
     * callbacks still to come own the eventfd with us) */
    for (i = 0; i < cq->num_streams; ++i) {
        stream = cq->streams[i];
        if (uct_cuda_ipc_ns_ctx_push(stream->ctx, -1, &pushed) == UCS_OK) {
            (void)UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, stream->stream);
            (void)UCT_CUDA_IPC_NS_CU(cuStreamDestroy, stream->stream);
            uct_cuda_ipc_ns_ctx_pop(pushed);
        }
        ucs_queue_for_each_extract(op, &stream->queue, queue, 1) {
            uct_cuda_ipc_ns_cq_op_complete(cq, op, UCS_ERR_CANCELED);
        }
        ucs_free(stream);
    }

    ucs_free(cq->streams);
    uct_cuda_ipc_ns_cq_wakeup_put(cq->wakeup);
    ucs_mpool_cleanup(&cq->flush_mp, 1);
    ucs_mpool_cleanup(&cq->op_mp, 1);
}


static ucs_status_t
uct_cuda_ipc_ns_cq_stream_create(uct_cuda_ipc_ns_cq_t *cq, CUcontext ctx,
                                 const uint8_t *remote_uuid,
                                 uct_cuda_ipc_ns_cq_stream_t **stream_p)
{
    uct_cuda_ipc_ns_cq_stream_t *stream, **streams;
    ucs_status_t status;

    streams = ucs_realloc(cq->streams,
                          (cq->num_streams + 1) * sizeof(*cq->streams),
                          "cuda_ipc_ns_streams");
    if (streams == NULL) {
        ucs_error("cuda_ipc_ns: failed to grow the stream table");
        return UCS_ERR_NO_MEMORY;
    }
    cq->streams = streams;

    stream = ucs_calloc(1, sizeof(*stream), "cuda_ipc_ns_stream");
    if (stream == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a stream");
        return UCS_ERR_NO_MEMORY;
    }

    status = UCT_CUDA_IPC_NS_CU(cuStreamCreate, &stream->stream,
                                CU_STREAM_NON_BLOCKING);
    if (status != UCS_OK) {
        ucs_free(stream);
        return status;
    }

    stream->ctx = ctx;
    memcpy(stream->remote_uuid, remote_uuid, sizeof(stream->remote_uuid));
    ucs_queue_head_init(&stream->queue);
    ucs_list_head_init(&stream->active);
    cq->streams[cq->num_streams++] = stream;
    ucs_debug("cuda_ipc_ns: created stream %p of context %p (%u streams)",
              stream->stream, ctx, cq->num_streams);
    *stream_p = stream;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_cq_stream(uct_cuda_ipc_ns_cq_t *cq, CUcontext ctx,
                                       const uint8_t *remote_uuid,
                                       uct_cuda_ipc_ns_cq_stream_t **stream_p)
{
    unsigned i, pick, count = 0;
    uint32_t hash = 0;

    for (i = 0; i < cq->num_streams; ++i) {
        if (cq->streams[i]->ctx != ctx) {
            continue;
        }
        if (!memcmp(cq->streams[i]->remote_uuid, remote_uuid,
                    UCT_CUDA_IPC_NS_UUID_SIZE)) {
            *stream_p = cq->streams[i];
            return UCS_OK;
        }
        ++count;
    }

    if (count < cq->max_streams) {
        return uct_cuda_ipc_ns_cq_stream_create(cq, ctx, remote_uuid,
                                                stream_p);
    }

    /* every stream of the context taken: a remote device keeps to one of
     * them, so its copies stay ordered */
    for (i = 0; i < UCT_CUDA_IPC_NS_UUID_SIZE; ++i) {
        hash = (hash * 31) + remote_uuid[i];
    }
    pick = hash % count;
    for (i = 0; ; ++i) {
        if ((cq->streams[i]->ctx == ctx) && (pick-- == 0)) {
            *stream_p = cq->streams[i];
            return UCS_OK;
        }
    }
}


/* Runs on a driver thread once a stream has done the work before it, or
 * failed it: a stream callback, not a host function, because cuda.h calls
 * cuLaunchHostFunc's function "not ... in the event of an error in the CUDA
 * context", and a waiter must wake to see the failed op */
static void CUDA_CB uct_cuda_ipc_ns_cq_signal(CUstream stream, CUresult result,
                                              void *arg)
{
    uct_cuda_ipc_ns_cq_wakeup_t *wakeup = arg;
    uint64_t one                        = 1;
    ssize_t ret;

    do {
        ret = write(wakeup->fd, &one, sizeof(one));
    } while ((ret < 0) && (errno == EINTR));
    uct_cuda_ipc_ns_cq_wakeup_put(wakeup);
}


/* Queue a wakeup of the waiter on @a stream, after the work queued so far */
static ucs_status_t uct_cuda_ipc_ns_cq_queue_signal(uct_cuda_ipc_ns_cq_t *cq,
                                                   CUstream stream)
{
    ucs_status_t status;

    __atomic_add_fetch(&cq->wakeup->refs, 1, __ATOMIC_RELAXED);
    status = UCT_CUDA_IPC_NS_CU(cuStreamAddCallback, stream,
                                uct_cuda_ipc_ns_cq_signal, cq->wakeup, 0);
    if (status != UCS_OK) {
        uct_cuda_ipc_ns_cq_wakeup_put(cq->wakeup);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_cq_post(uct_cuda_ipc_ns_cq_t *cq,
                                     uct_cuda_ipc_ns_op_list_t *list,
                                     uct_cuda_ipc_ns_cq_op_t *op,
                                     uct_cuda_ipc_ns_cq_stream_t *stream,
                                     uct_cuda_ipc_ns_cache_region_t *region,
                                     uct_completion_t *comp)
{
    ucs_status_t status;

    /* events belong to a context: reuse the op's when it matches */
    if (ucs_unlikely(op->event_ctx != stream->ctx)) {
        if (op->event != NULL) {
            (void)UCT_CUDA_IPC_NS_CU(cuEventDestroy, op->event);
            op->event = NULL;
        }
        status = UCT_CUDA_IPC_NS_CU(cuEventCreate, &op->event,
                                    CU_EVENT_DISABLE_TIMING);
        if (status != UCS_OK) {
            op->event_ctx = NULL;
            goto err_sync;
        }
        op->event_ctx = stream->ctx;
    }

    status = UCT_CUDA_IPC_NS_CU(cuEventRecord, op->event, stream->stream);
    if (status != UCS_OK) {
        goto err_sync;
    }

    if (ucs_unlikely(cq->armed)) {
        /* a waiter sleeps on the eventfd: this op must wake it too */
        status = uct_cuda_ipc_ns_cq_queue_signal(cq, stream->stream);
        if (status != UCS_OK) {
            goto err_sync;
        }
    }

    op->super.kind = UCT_CUDA_IPC_NS_OP_STREAM;
    op->super.comp = comp;
    op->region     = region;
    op->stream     = stream;
    uct_cuda_ipc_ns_op_list_add(list, &op->super);
    if (ucs_queue_is_empty(&stream->queue)) {
        ucs_list_add_tail(&cq->active, &stream->active);
    }
    ucs_queue_push(&stream->queue, &op->queue);
    return UCS_OK;

err_sync:
    /* nothing will tell when the copies end: wait for them */
    (void)UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, stream->stream);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_cq_wait_op(uct_cuda_ipc_ns_cq_stream_t *stream,
                                        const uct_cuda_ipc_ns_cq_op_t *op)
{
    return UCT_CUDA_IPC_NS_CU(cuStreamWaitEvent, stream->stream, op->event, 0);
}


/* Whether the op's copy finished: UCS_INPROGRESS, UCS_OK or its error */
static ucs_status_t uct_cuda_ipc_ns_cq_op_query(const uct_cuda_ipc_ns_cq_op_t *op)
{
    CUresult res = uct_cuda_ipc_ns_drv.cuEventQuery(op->event);

    if (ucs_likely(res == CUDA_SUCCESS)) {
        return UCS_OK;
    } else if (res == CUDA_ERROR_NOT_READY) {
        return UCS_INPROGRESS;
    }

    ucs_error("cuEventQuery() failed: %s: the copy of op %p failed",
              uct_cuda_ipc_ns_driver_error_name(res), op);
    return uct_cuda_ipc_ns_driver_status(res);
}


/* Complete the finished ops at the head of @a stream, up to @a budget */
static unsigned uct_cuda_ipc_ns_cq_progress_stream(uct_cuda_ipc_ns_cq_t *cq,
                                                   uct_cuda_ipc_ns_cq_stream_t *stream,
                                                   unsigned budget)
{
    unsigned count = 0;
    uct_cuda_ipc_ns_cq_op_t *op;
    ucs_status_t status;
    int pushed;

    /* event calls need a current context; the progress thread may have none */
    if (uct_cuda_ipc_ns_ctx_push(stream->ctx, -1, &pushed) != UCS_OK) {
        return 0;
    }

    do {
        op     = ucs_queue_head_elem_non_empty(&stream->queue,
                                               uct_cuda_ipc_ns_cq_op_t, queue);
        status = uct_cuda_ipc_ns_cq_op_query(op);
        if (status == UCS_INPROGRESS) {
            break;
        }

        ucs_queue_pull_non_empty(&stream->queue);
        if (ucs_queue_is_empty(&stream->queue)) {
            ucs_list_del(&stream->active);
        }
        ++count;
        uct_cuda_ipc_ns_cq_op_complete(cq, op, status);
    } while ((count < budget) && !ucs_queue_is_empty(&stream->queue));

    uct_cuda_ipc_ns_ctx_pop(pushed);
    return count;
}


unsigned uct_cuda_ipc_ns_cq_progress(uct_cuda_ipc_ns_cq_t *cq)
{
    uct_cuda_ipc_ns_cq_stream_t *stream, *tmp;
    unsigned count = 0;

    ucs_list_for_each_safe(stream, tmp, &cq->active, active) {
        count += uct_cuda_ipc_ns_cq_progress_stream(cq, stream,
                                                    cq->max_poll - count);
        if (count >= cq->max_poll) {
            break;
        }
    }

    return count;
}




ucs_status_t uct_cuda_ipc_ns_cq_arm(uct_cuda_ipc_ns_cq_t *cq)
{
    uct_cuda_ipc_ns_cq_stream_t *stream;
    uct_cuda_ipc_ns_cq_op_t *op;
    ucs_status_t status;
    uint64_t value;
    int pushed;

    /* consume old signals, so that a new one means new completions */
    while (read(cq->wakeup->fd, &value, sizeof(value)) > 0) {
    }

    ucs_list_for_each(stream, &cq->active, active) {
        status = uct_cuda_ipc_ns_ctx_push(stream->ctx, -1, &pushed);
        if (status != UCS_OK) {
            return status;
        }

        op = ucs_queue_head_elem_non_empty(&stream->queue,
                                           uct_cuda_ipc_ns_cq_op_t, queue);
        if (uct_cuda_ipc_ns_cq_op_query(op) != UCS_INPROGRESS) {
            status = UCS_ERR_BUSY;
        } else {
            /* runs when the stream has done all the work queued so far */
            status = uct_cuda_ipc_ns_cq_queue_signal(cq, stream->stream);
        }
        uct_cuda_ipc_ns_ctx_pop(pushed);
        if (status != UCS_OK) {
            return status;
        }
    }

    cq->armed = 1;
    return UCS_OK;
}
