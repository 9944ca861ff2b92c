/*
 * cuda_ipc_ns: asynchronous completion of copies (docs/architecture.md,
 * "Completion path").
 *
 * Copies run on streams created lazily per (local context, remote device),
 * at most max_streams per context (more remote devices share them). Each
 * copy records an event from a pool bounded by max_events and waits in its
 * stream's queue; progress completes up to max_poll copies per call, in
 * stream order. For blocking waits an eventfd is signalled by a host
 * function that arm() enqueues behind the work of each busy stream.
 */
#ifndef UCT_CUDA_IPC_NS_STREAM_H
#define UCT_CUDA_IPC_NS_STREAM_H

#include "cuda_ipc_ns_rkey.h"

#include <uct/api/uct.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/datastruct/queue_types.h>
#include <cuda.h>


struct uct_cuda_ipc_ns_ep;
struct uct_cuda_ipc_ns_region;
typedef struct uct_cuda_ipc_ns_stream uct_cuda_ipc_ns_stream_t;


/* One copy in flight */
typedef struct uct_cuda_ipc_ns_op {
    ucs_queue_elem_t              queue;    /* in its stream's queue */
    ucs_list_link_t               ep_elem;  /* in its endpoint's list */
    struct uct_cuda_ipc_ns_ep     *ep;      /* NULL once the ep is gone */
    struct uct_cuda_ipc_ns_region *region;  /* pinned until completion */
    uct_completion_t              *comp;    /* user's, may be NULL */
    uint64_t                      seq;      /* endpoint post order */
    uct_cuda_ipc_ns_stream_t      *stream;
    CUevent                       event;
    CUcontext                     event_ctx; /* context the event belongs to */
} uct_cuda_ipc_ns_op_t;


struct uct_cuda_ipc_ns_stream {
    CUcontext        ctx;
    uint8_t          remote_uuid[UCT_CUDA_IPC_NS_UUID_SIZE];
    CUstream         stream;
    ucs_queue_head_t queue;     /* ops in stream order */
    ucs_list_link_t  active;    /* in the cq's list while ops are queued */
};


/* Called for each completed op, in stream order, with the copy's status */
typedef void (*uct_cuda_ipc_ns_op_done_cb_t)(uct_cuda_ipc_ns_op_t *op,
                                             ucs_status_t status, void *arg);


typedef struct uct_cuda_ipc_ns_cq {
    unsigned                     max_streams; /* per context */
    unsigned                     max_poll;
    unsigned                     max_ops;     /* events in flight */
    unsigned                     num_ops;
    uct_cuda_ipc_ns_stream_t     **streams;
    unsigned                     num_streams;
    ucs_list_link_t              active;      /* streams with queued ops */
    ucs_mpool_t                  op_mp;
    int                          event_fd;
    uct_cuda_ipc_ns_op_done_cb_t done_cb;
    void                         *done_arg;
} uct_cuda_ipc_ns_cq_t;


ucs_status_t uct_cuda_ipc_ns_cq_init(uct_cuda_ipc_ns_cq_t *cq,
                                     unsigned max_streams, unsigned max_poll,
                                     unsigned max_events,
                                     uct_cuda_ipc_ns_op_done_cb_t done_cb,
                                     void *done_arg);

/* Waits for the streams, then completes what is left with UCS_ERR_CANCELED */
void uct_cuda_ipc_ns_cq_cleanup(uct_cuda_ipc_ns_cq_t *cq);


/**
 * The stream for copies between context @a ctx (current on this thread) and
 * remote device @a remote_uuid, created on first use.
 */
ucs_status_t uct_cuda_ipc_ns_cq_stream(uct_cuda_ipc_ns_cq_t *cq, CUcontext ctx,
                                       const uint8_t *remote_uuid,
                                       uct_cuda_ipc_ns_stream_t **stream_p);


/** An op descriptor, or NULL when max_events ops are in flight */
static inline uct_cuda_ipc_ns_op_t *uct_cuda_ipc_ns_cq_op_get(uct_cuda_ipc_ns_cq_t *cq)
{
    uct_cuda_ipc_ns_op_t *op;

    if (cq->num_ops >= cq->max_ops) {
        return NULL;
    }

    op = (uct_cuda_ipc_ns_op_t*)ucs_mpool_get(&cq->op_mp);
    if (op != NULL) {
        ++cq->num_ops;
    }
    return op;
}

static inline void uct_cuda_ipc_ns_cq_op_put(uct_cuda_ipc_ns_cq_t *cq,
                                             uct_cuda_ipc_ns_op_t *op)
{
    --cq->num_ops;
    ucs_mpool_put(op);
}

static inline int uct_cuda_ipc_ns_cq_has_resources(const uct_cuda_ipc_ns_cq_t *cq)
{
    return cq->num_ops < cq->max_ops;
}


/**
 * Record the op's event on @a stream behind the copies just enqueued there
 * (the stream's context current) and queue the op for completion. On
 * failure the copies are waited for, so the caller may release what they
 * use.
 */
ucs_status_t uct_cuda_ipc_ns_cq_post(uct_cuda_ipc_ns_cq_t *cq,
                                     uct_cuda_ipc_ns_op_t *op,
                                     uct_cuda_ipc_ns_stream_t *stream);


/** Make @a stream wait for the op's event (fences across streams) */
ucs_status_t uct_cuda_ipc_ns_cq_wait_op(uct_cuda_ipc_ns_stream_t *stream,
                                        const uct_cuda_ipc_ns_op_t *op);


/** Complete up to max_poll finished ops; returns how many */
unsigned uct_cuda_ipc_ns_cq_progress(uct_cuda_ipc_ns_cq_t *cq);


/**
 * Arm the eventfd: UCS_ERR_BUSY when a completion is ready now, else
 * UCS_OK with every busy stream set to signal it when its work is done.
 */
ucs_status_t uct_cuda_ipc_ns_cq_arm(uct_cuda_ipc_ns_cq_t *cq);

#endif
