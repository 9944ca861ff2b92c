/*
 * cuda_ipc_ns: the op model (docs/architecture.md, "Op model"). Every put or
 * get of an endpoint, whichever lane carries it — copies on a stream of
 * ours, one copy by the memory's owner, or two through a staging ring — is
 * a descriptor from its lane's pool that starts with uct_cuda_ipc_ns_op_t.
 * It waits on its endpoint's one list of ops, in post order, until its lane
 * ends it with uct_cuda_ipc_ns_op_complete(), the one completion: the
 * user's completion, then the endpoint's flushes that no op holds back.
 * Flush and fence read that list alone.
 */
#ifndef UCT_CUDA_IPC_NS_OP_H
#define UCT_CUDA_IPC_NS_OP_H

#include <uct/api/uct.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/datastruct/queue_types.h>
#include <stdint.h>


/* How an op's copies end, which decides how a later op orders after it */
typedef enum {
    /* on a stream of ours, with an event: a later op's stream waits for
     * the event */
    UCT_CUDA_IPC_NS_OP_STREAM,
    /* by the owner, ended when answered: a later op waits (pending) */
    UCT_CUDA_IPC_NS_OP_OWNER
} uct_cuda_ipc_ns_op_kind_t;


/* The ops of one endpoint (embedded in it), and its flushes waiting */
typedef struct uct_cuda_ipc_ns_op_list {
    ucs_list_link_t  ops;       /* uct_cuda_ipc_ns_op_t, post order */
    ucs_queue_head_t flush_q;   /* flushes, post order */
    uint64_t         seq;       /* ops posted */
    uint64_t         fence_seq; /* the next op comes after the ops up to
                                 * it; 0: no fence */
    ucs_mpool_t      *flush_mp; /* the flushes' pool */
} uct_cuda_ipc_ns_op_list_t;


/* The head of every op descriptor */
typedef struct uct_cuda_ipc_ns_op {
    ucs_list_link_t           elem;  /* in its list */
    uct_cuda_ipc_ns_op_list_t *list; /* NULL: not posted, or its endpoint
                                      * is gone (nobody is told) */
    uct_completion_t          *comp; /* user's, may be NULL */
    uint64_t                  seq;   /* post order in its list */
    uct_cuda_ipc_ns_op_kind_t kind;
} uct_cuda_ipc_ns_op_t;


/* The pool of the flushes op lists queue (one per interface) */
ucs_status_t uct_cuda_ipc_ns_op_flush_mp_init(ucs_mpool_t *flush_mp);

void uct_cuda_ipc_ns_op_list_init(uct_cuda_ipc_ns_op_list_t *list,
                                  ucs_mpool_t *flush_mp);

/* The endpoint is going away: its ops run on (their lanes keep them) but
 * nobody is told, and its waiting flushes are dropped, as UCT discards
 * what is outstanding on a destroyed endpoint */
void uct_cuda_ipc_ns_op_list_cleanup(uct_cuda_ipc_ns_op_list_t *list);

static inline int
uct_cuda_ipc_ns_op_list_is_empty(uct_cuda_ipc_ns_op_list_t *list)
{
    return ucs_list_is_empty(&list->ops);
}

/* @a op (its kind and completion set) joins @a list, last */
static inline void uct_cuda_ipc_ns_op_list_add(uct_cuda_ipc_ns_op_list_t *list,
                                               uct_cuda_ipc_ns_op_t *op)
{
    op->list = list;
    op->seq  = ++list->seq;
    ucs_list_add_tail(&list->ops, &op->elem);
}

/* @a op leaves its list untold (its post failed after it joined) */
static inline void uct_cuda_ipc_ns_op_list_del(uct_cuda_ipc_ns_op_t *op)
{
    ucs_list_del(&op->elem);
    op->list = NULL;
}

/**
 * Flush: UCS_OK when the list is empty, else UCS_INPROGRESS, and @a comp
 * (if not NULL) is called once the ops posted so far have completed;
 * UCS_ERR_NO_MEMORY when it cannot be queued.
 */
ucs_status_t uct_cuda_ipc_ns_op_list_flush(uct_cuda_ipc_ns_op_list_t *list,
                                           uct_completion_t *comp);

/* Fence: the next op comes after every op posted so far */
static inline void uct_cuda_ipc_ns_op_list_fence(uct_cuda_ipc_ns_op_list_t *list)
{
    if (!ucs_list_is_empty(&list->ops)) {
        list->fence_seq = list->seq;
    }
}

/**
 * The fence rule: whether an op of @a kind posted now must wait (pending)
 * for ops before the fence: one of OWNER kind waits for any, one of STREAM
 * kind only for those of OWNER kind (its stream waits for the others'
 * events). The fence is over once no op before it remains.
 */
int uct_cuda_ipc_ns_op_list_fenced(uct_cuda_ipc_ns_op_list_t *list,
                                   uct_cuda_ipc_ns_op_kind_t kind);

/**
 * The one completion of an op, with @a status: it leaves its list, the
 * user's completion is called, then the list's flushes that no op holds
 * back any more. An op whose endpoint is gone only leaves. The lane
 * returns the descriptor to its pool after.
 */
void uct_cuda_ipc_ns_op_complete(uct_cuda_ipc_ns_op_t *op, ucs_status_t status);

#endif
