/*
 * cuda_cpy_ns: interface of the loopback copy transport cu_cpy_ns, which
 * gives UCP its memory-type endpoint for CUDA memory: synchronous copies
 * between host and device memory of its own process (docs/ucp.md).
 *
 * Addresses use the cu_ipc_ns formats (cuda_ipc_ns_addr.h) with no flags;
 * the transport reaches only its own process (uct_cuda_ipc_ns_addr_is_self).
 */
#ifndef UCT_CUDA_CPY_NS_IFACE_H
#define UCT_CUDA_CPY_NS_IFACE_H

#include "cuda_ipc_ns_iface_base.h"

#include <ucs/datastruct/mpool.h>
#include <ucs/datastruct/queue_types.h>


typedef struct uct_cuda_cpy_ns_iface_config {
    uct_iface_config_t super;
    double             bandwidth; /* bytes/s reported to UCP */
    double             latency;   /* seconds reported to UCP */
    double             overhead;  /* seconds reported to UCP */
} uct_cuda_cpy_ns_iface_config_t;


typedef struct uct_cuda_cpy_ns_iface {
    uct_cuda_ipc_ns_iface_base_t super;
    ucs_mpool_t                  done_mp; /* uct_cuda_cpy_ns_iface_done_t */
    ucs_queue_head_t             done_q;  /* to invoke from progress */
} uct_cuda_cpy_ns_iface_t;


/* A completion to deliver from progress */
typedef struct uct_cuda_cpy_ns_iface_done {
    ucs_queue_elem_t queue;
    uct_completion_t *comp;
} uct_cuda_cpy_ns_iface_done_t;


typedef struct uct_cuda_cpy_ns_iface_ep {
    uct_cuda_ipc_ns_iface_base_ep_t super; /* the peer's addresses: ours */
} uct_cuda_cpy_ns_iface_ep_t;


/*
 * Endpoint operations of the ops table, in cuda_cpy_ns_ep.c. Every operation
 * is a synchronous copy through the CUDA driver (cuda_cpy_ns_copy.h): the
 * data has moved when it returns. Short operations return UCS_OK; zero-copy
 * ones with a completion return UCS_INPROGRESS and deliver it from progress
 * (uct_cuda_cpy_ns_iface_complete_later).
 *
 * UCP's memory-type endpoint calls put_short(host data, CUDA remote_addr) to
 * unpack into a CUDA buffer and get_short(host buffer, CUDA remote_addr) to
 * pack from one (ucp_mem_type_unpack/pack, ucp/dt/dt.c); the rendezvous
 * pipeline stages fragments with put/get_zcopy. The remote key is unused.
 */
UCS_CLASS_DECLARE_NEW_FUNC(uct_cuda_cpy_ns_iface_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_cpy_ns_iface_ep_t, uct_ep_t);

ucs_status_t uct_cuda_cpy_ns_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey);

ucs_status_t uct_cuda_cpy_ns_ep_get_short(uct_ep_h tl_ep, void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey);

/*
 * Zero-copy put and get between the local iov and the contiguous range at
 * @a remote_addr. A completion is delivered from progress
 * (uct_cuda_cpy_ns_iface_complete_later).
 */
ucs_status_t uct_cuda_cpy_ns_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp);

ucs_status_t uct_cuda_cpy_ns_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp);

ucs_status_t uct_cuda_cpy_ns_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                      uct_completion_t *comp);


/**
 * Flush of the interface: operations are done when their completions were
 * delivered.
 */
ucs_status_t uct_cuda_cpy_ns_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                         uct_completion_t *comp);


/**
 * Deliver @a comp from the next progress call, after the completions queued
 * before it. Zero-copy operations finish their copy before they return, but
 * report UCS_INPROGRESS: UCP 1.13.1 protocols v2 set a request's state only
 * after the memory-type copy is posted (rndv_put.c), so a completion invoked
 * from inside the call would run ahead of it.
 *
 * @return UCS_INPROGRESS, or UCS_ERR_NO_MEMORY.
 */
ucs_status_t uct_cuda_cpy_ns_iface_complete_later(uct_cuda_cpy_ns_iface_t *iface,
                                                  uct_completion_t *comp);


#endif
