/*
 * cuda_ipc_ns: the op model (see cuda_ipc_ns_op.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_op.h"
#include "cuda_ipc_ns_compat.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/queue.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <limits.h>


/* An ep_flush with a completion, waiting for the ops up to seq */
typedef struct uct_cuda_ipc_ns_op_flush {
    ucs_queue_elem_t queue;
    uct_completion_t *comp;
    uint64_t         seq;
} uct_cuda_ipc_ns_op_flush_t;


ucs_status_t uct_cuda_ipc_ns_op_flush_mp_init(ucs_mpool_t *flush_mp)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_compat_mpool_init(flush_mp,
                                               sizeof(uct_cuda_ipc_ns_op_flush_t),
                                               UCS_SYS_CACHE_LINE_SIZE, 16,
                                               UINT_MAX, NULL,
                                               "cuda_ipc_ns_flush_reqs");
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: failed to create the flush request pool: %s",
                  ucs_status_string(status));
    }
    return status;
}


void uct_cuda_ipc_ns_op_list_init(uct_cuda_ipc_ns_op_list_t *list,
                                  ucs_mpool_t *flush_mp)
{
    ucs_list_head_init(&list->ops);
    ucs_queue_head_init(&list->flush_q);
    list->seq       = 0;
    list->fence_seq = 0;
    list->flush_mp  = flush_mp;
}


void uct_cuda_ipc_ns_op_list_cleanup(uct_cuda_ipc_ns_op_list_t *list)
{
    uct_cuda_ipc_ns_op_flush_t *flush;
    uct_cuda_ipc_ns_op_t *op, *tmp;

    ucs_list_for_each_safe(op, tmp, &list->ops, elem) {
        ucs_list_del(&op->elem);
        op->list = NULL;
        op->comp = NULL;
    }
    ucs_queue_for_each_extract(flush, &list->flush_q, queue, 1) {
        ucs_mpool_put(flush);
    }
}


ucs_status_t uct_cuda_ipc_ns_op_list_flush(uct_cuda_ipc_ns_op_list_t *list,
                                           uct_completion_t *comp)
{
    uct_cuda_ipc_ns_op_flush_t *flush;

    if (ucs_list_is_empty(&list->ops)) {
        return UCS_OK;
    }

    /* ops are in flight: never OK, with or without a completion */
    if (comp != NULL) {
        flush = ucs_mpool_get(list->flush_mp);
        if (flush == NULL) {
            ucs_error("cuda_ipc_ns: failed to allocate a flush request");
            return UCS_ERR_NO_MEMORY;
        }
        flush->comp = comp;
        flush->seq  = list->seq;
        ucs_queue_push(&list->flush_q, &flush->queue);
    }
    return UCS_INPROGRESS;
}


int uct_cuda_ipc_ns_op_list_fenced(uct_cuda_ipc_ns_op_list_t *list,
                                   uct_cuda_ipc_ns_op_kind_t kind)
{
    uct_cuda_ipc_ns_op_t *op;

    ucs_list_for_each(op, &list->ops, elem) {
        if (op->seq > list->fence_seq) {
            break;
        }
        if (op->kind != UCT_CUDA_IPC_NS_OP_STREAM) {
            return 1; /* ends when answered: nothing to wait on but that */
        }
        if (kind != UCT_CUDA_IPC_NS_OP_STREAM) {
            return 1; /* no stream of ours to make wait for its event */
        }
    }

    if (ucs_list_is_empty(&list->ops) ||
        (ucs_list_head(&list->ops, uct_cuda_ipc_ns_op_t, elem)->seq >
         list->fence_seq)) {
        list->fence_seq = 0; /* everything before it completed */
    }
    return 0;
}


void uct_cuda_ipc_ns_op_complete(uct_cuda_ipc_ns_op_t *op, ucs_status_t status)
{
    uct_cuda_ipc_ns_op_list_t *list = op->list;
    uct_cuda_ipc_ns_op_flush_t *flush;
    uint64_t oldest;

    if (list == NULL) {
        return;
    }

    ucs_list_del(&op->elem);
    op->list = NULL;
    if (op->comp != NULL) {
        uct_invoke_completion(op->comp, status);
    }

    /* ops complete in any order across streams and lanes: the oldest one
     * in flight holds back the flushes posted after it */
    oldest = ucs_list_is_empty(&list->ops) ? UINT64_MAX :
             ucs_list_head(&list->ops, uct_cuda_ipc_ns_op_t, elem)->seq;
    while (!ucs_queue_is_empty(&list->flush_q)) {
        flush = ucs_queue_head_elem_non_empty(&list->flush_q,
                                              uct_cuda_ipc_ns_op_flush_t,
                                              queue);
        if (flush->seq >= oldest) {
            break;
        }
        ucs_queue_pull_non_empty(&list->flush_q);
        uct_invoke_completion(flush->comp, UCS_OK);
        ucs_mpool_put(flush);
    }
}
