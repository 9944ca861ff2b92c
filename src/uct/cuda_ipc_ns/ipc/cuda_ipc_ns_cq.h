/*
 * cuda_ipc_ns: the completion queue — asynchronous completion of copies,
 * end to end (docs/architecture.md, "Completion path").
 *
 * Copies run on streams created lazily per (local context, remote device),
 * at most max_streams per context (more remote devices share them). Each
 * copy records an event from a pool bounded by max_events and waits in its
 * stream's queue and in its endpoint's list. Progress completes up to
 * max_poll copies per call, in stream order: it turns the copy's outcome
 * into the op's status, unpins the mapping, calls the user's completion,
 * completes the endpoint's flushes that no longer wait, and returns the op
 * and its event to the pool. For blocking waits an eventfd is signalled by a
 * host function that arm() enqueues behind the work of each busy stream.
 */
#ifndef UCT_CUDA_IPC_NS_CQ_H
#define UCT_CUDA_IPC_NS_CQ_H

#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_op.h"

#include <uct/api/uct.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/datastruct/queue_types.h>
#include <cuda.h>


typedef struct uct_cuda_ipc_ns_cq_stream uct_cuda_ipc_ns_cq_stream_t;


/* One copy in flight on a stream (an op of STREAM kind) */
typedef struct uct_cuda_ipc_ns_cq_op {
    /* first: ucs_queue_for_each_extract() takes the element of an empty
     * queue's NULL head, at no offset */
    ucs_queue_elem_t               queue;    /* in its stream's queue */
    uct_cuda_ipc_ns_op_t           super;
    uct_cuda_ipc_ns_cache_region_t *region;  /* pinned until completion, or
                                              * NULL: a copy within our memory */
    /* an op over several allocations of a registration: the regions after
     * the first, pinned until completion; owned by the op (ucs_free) */
    uct_cuda_ipc_ns_cache_region_t **more_regions;
    unsigned                       num_more_regions;
    uct_cuda_ipc_ns_cq_stream_t    *stream;
    CUevent                        event;
    CUcontext                      event_ctx; /* context the event belongs to */
} uct_cuda_ipc_ns_cq_op_t;


struct uct_cuda_ipc_ns_cq_stream {
    CUcontext        ctx;
    uint8_t          remote_uuid[UCT_CUDA_IPC_NS_UUID_SIZE];
    CUstream         stream;
    ucs_queue_head_t queue;     /* ops in stream order */
    ucs_list_link_t  active;    /* in the cq's list while ops are queued */
};


/*
 * The eventfd the stream callbacks write, owned by the completion queue and
 * by every callback queued: the last of them closes it. A callback may run
 * after the interface is gone: after an error in the context
 * cuStreamSynchronize returns at once, and the driver still calls the
 * callbacks queued (cuda.h).
 */
typedef struct {
    int      fd;
    uint32_t refs;
} uct_cuda_ipc_ns_cq_wakeup_t;


typedef struct uct_cuda_ipc_ns_cq {
    unsigned                     max_streams; /* per context */
    unsigned                     max_poll;
    unsigned                     max_ops;     /* events in flight */
    unsigned                     num_ops;
    uct_cuda_ipc_ns_cq_stream_t     **streams;
    unsigned                     num_streams;
    ucs_list_link_t              active;      /* streams with queued ops */
    ucs_mpool_t                  op_mp;
    ucs_mpool_t                  flush_mp;    /* of the endpoints' op lists */
    uct_cuda_ipc_ns_cq_wakeup_t  *wakeup;      /* its fd: the iface's event fd */
    int                          armed;       /* a waiter sleeps on the fd */
} uct_cuda_ipc_ns_cq_t;


ucs_status_t uct_cuda_ipc_ns_cq_init(uct_cuda_ipc_ns_cq_t *cq,
                                     unsigned max_streams, unsigned max_poll,
                                     unsigned max_events);

/* Waits for the streams, then completes what is left with UCS_ERR_CANCELED */
void uct_cuda_ipc_ns_cq_cleanup(uct_cuda_ipc_ns_cq_t *cq);


/**
 * The stream for copies between context @a ctx (current on this thread) and
 * remote device @a remote_uuid, created on first use.
 */
ucs_status_t uct_cuda_ipc_ns_cq_stream(uct_cuda_ipc_ns_cq_t *cq, CUcontext ctx,
                                       const uint8_t *remote_uuid,
                                       uct_cuda_ipc_ns_cq_stream_t **stream_p);


/** An op descriptor, or NULL when max_events ops are in flight */
static inline uct_cuda_ipc_ns_cq_op_t *uct_cuda_ipc_ns_cq_op_get(uct_cuda_ipc_ns_cq_t *cq)
{
    uct_cuda_ipc_ns_cq_op_t *op;

    if (cq->num_ops >= cq->max_ops) {
        return NULL;
    }

    op = (uct_cuda_ipc_ns_cq_op_t*)ucs_mpool_get(&cq->op_mp);
    if (op != NULL) {
        ++cq->num_ops;
    }
    return op;
}

static inline void uct_cuda_ipc_ns_cq_op_put(uct_cuda_ipc_ns_cq_t *cq,
                                             uct_cuda_ipc_ns_cq_op_t *op)
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
 * (the stream's context current) and queue the op for completion, last in
 * @a list: from then on the queue owns it, its pinned @a region and
 * @a comp. On failure the copies are waited for, so the caller may release
 * what they use.
 */
ucs_status_t uct_cuda_ipc_ns_cq_post(uct_cuda_ipc_ns_cq_t *cq,
                                     uct_cuda_ipc_ns_op_list_t *list,
                                     uct_cuda_ipc_ns_cq_op_t *op,
                                     uct_cuda_ipc_ns_cq_stream_t *stream,
                                     uct_cuda_ipc_ns_cache_region_t *region,
                                     uct_completion_t *comp);


/** Make @a stream wait for the op's event (fences across streams) */
ucs_status_t uct_cuda_ipc_ns_cq_wait_op(uct_cuda_ipc_ns_cq_stream_t *stream,
                                        const uct_cuda_ipc_ns_cq_op_t *op);


/** Complete up to max_poll finished ops; returns how many */
unsigned uct_cuda_ipc_ns_cq_progress(uct_cuda_ipc_ns_cq_t *cq);


/**
 * Arm the eventfd: UCS_ERR_BUSY when a completion is ready now, else
 * UCS_OK with every busy stream set to signal it when its work is done; ops
 * posted while armed signal it too (a waiter may sleep while another thread
 * posts). Progress ends the arming (uct_cuda_ipc_ns_cq_disarm).
 */
ucs_status_t uct_cuda_ipc_ns_cq_arm(uct_cuda_ipc_ns_cq_t *cq);

static inline void uct_cuda_ipc_ns_cq_disarm(uct_cuda_ipc_ns_cq_t *cq)
{
    cq->armed = 0;
}

#endif
