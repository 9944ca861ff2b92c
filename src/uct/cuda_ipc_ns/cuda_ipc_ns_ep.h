/*
 * cuda_ipc_ns: endpoint — put/get zero-copy, flush, fence, pending requests
 * and peer checks (docs/architecture.md).
 */
#ifndef UCT_CUDA_IPC_NS_EP_H
#define UCT_CUDA_IPC_NS_EP_H

#include "cuda_ipc_ns_iface.h"
#include "cuda_ipc_ns_cache.h"

#include <ucs/datastruct/list.h>
#include <ucs/datastruct/queue_types.h>


typedef struct uct_cuda_ipc_ns_ep {
    uct_base_ep_t                super;
    uct_cuda_ipc_ns_iface_addr_t remote;      /* peer's iface address */
    uct_cuda_ipc_ns_peer_t       *peer;       /* its cache entry */
    ucs_list_link_t              ops;         /* in flight, post order */
    ucs_queue_head_t             flush_q;     /* flushes waiting for ops */
    uint64_t                     seq;         /* ops posted */
    uint64_t                     fence_seq;   /* ops up to it finish first */
    unsigned                     num_pending; /* in the iface pending queue */
    int                          watch_tried; /* broker watch attempted */
    int                          failed;      /* peer failure reported */
} uct_cuda_ipc_ns_ep_t;


/* Private data of a pending request */
typedef struct {
    ucs_queue_elem_t     queue;
    uct_cuda_ipc_ns_ep_t *ep;
} uct_cuda_ipc_ns_pending_priv_t;


UCS_CLASS_DECLARE_NEW_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t);

ucs_status_t uct_cuda_ipc_ns_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp);

ucs_status_t uct_cuda_ipc_ns_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp);

ucs_status_t uct_cuda_ipc_ns_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                      uct_completion_t *comp);

ucs_status_t uct_cuda_ipc_ns_ep_fence(uct_ep_h tl_ep, unsigned flags);

ucs_status_t uct_cuda_ipc_ns_ep_check(uct_ep_h tl_ep, unsigned flags,
                                      uct_completion_t *comp);

ucs_status_t uct_cuda_ipc_ns_ep_pending_add(uct_ep_h tl_ep,
                                            uct_pending_req_t *req,
                                            unsigned flags);

void uct_cuda_ipc_ns_ep_pending_purge(uct_ep_h tl_ep,
                                      uct_pending_purge_callback_t cb,
                                      void *arg);

/* Completion of an op (uct_cuda_ipc_ns_op_done_cb_t; arg: the iface) */
void uct_cuda_ipc_ns_ep_op_done(uct_cuda_ipc_ns_op_t *op, ucs_status_t status,
                                void *arg);

#endif
