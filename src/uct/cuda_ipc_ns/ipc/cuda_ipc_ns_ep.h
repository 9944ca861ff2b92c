/*
 * cuda_ipc_ns: endpoint — put/get zero-copy, put short, put/get bcopy,
 * flush, fence, pending requests and peer checks (docs/architecture.md).
 * The interface's ops table lists these. Below the lanes, which read the
 * endpoint; cuda_ipc_ns_ep.c implements it above them.
 */
#ifndef UCT_CUDA_IPC_NS_EP_H
#define UCT_CUDA_IPC_NS_EP_H

#include "cuda_ipc_ns_iface_base.h"
#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_op.h"

#include <ucs/datastruct/arbiter.h>


typedef struct uct_cuda_ipc_ns_ep {
    uct_cuda_ipc_ns_iface_base_ep_t super;       /* the peer's addresses */
    uct_cuda_ipc_ns_cache_peer_t    *peer;       /* its cache entry */
    uct_cuda_ipc_ns_op_list_t       ops;         /* its ops in flight, every
                                                  * lane, and its fence */
    ucs_arbiter_group_t             arb_group;   /* its pending requests */
    /* an op was refused until copies outstanding complete (fence, or an
     * owner's session full): pending requests wait for a completion */
    int                             must_wait;
    int                             failed;      /* peer failure reported */
    int                             canceled;    /* flushed with CANCEL */
} uct_cuda_ipc_ns_ep_t;


UCS_CLASS_DECLARE_NEW_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t);

/* A session with an owner ended while the endpoint of @a ops waited for
 * copies on it: the peer failed (uct_cuda_ipc_ns_copy_op_failed_func_t) */
void uct_cuda_ipc_ns_ep_ops_failed(uct_cuda_ipc_ns_op_list_t *ops);

ucs_status_t uct_cuda_ipc_ns_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey);

ssize_t uct_cuda_ipc_ns_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                     void *arg, uint64_t remote_addr,
                                     uct_rkey_t rkey);

ucs_status_t uct_cuda_ipc_ns_ep_get_bcopy(uct_ep_h tl_ep,
                                          uct_unpack_callback_t unpack_cb,
                                          void *arg, size_t length,
                                          uint64_t remote_addr, uct_rkey_t rkey,
                                          uct_completion_t *comp);

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

#endif
