/*
 * cuda_cpy_ns: endpoint operations of cu_cpy_ns. Every operation is a
 * synchronous copy through the CUDA driver (cuda_cpy_ns_copy.h): the data
 * has moved when it returns. Short operations return UCS_OK; zero-copy ones
 * with a completion return UCS_INPROGRESS and deliver it from progress
 * (uct_cuda_cpy_ns_iface_complete_later).
 *
 * UCP's memory-type endpoint calls put_short(host data, CUDA remote_addr) to
 * unpack into a CUDA buffer and get_short(host buffer, CUDA remote_addr) to
 * pack from one (ucp_mem_type_unpack/pack, ucp/dt/dt.c); the rendezvous
 * pipeline stages fragments with put/get_zcopy. The remote key is unused.
 */
#ifndef UCT_CUDA_CPY_NS_EP_H
#define UCT_CUDA_CPY_NS_EP_H

#include "cuda_cpy_ns_iface.h"


UCS_CLASS_DECLARE_NEW_FUNC(uct_cuda_cpy_ns_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_cpy_ns_ep_t, uct_ep_t);

ucs_status_t uct_cuda_cpy_ns_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey);

ucs_status_t uct_cuda_cpy_ns_ep_get_short(uct_ep_h tl_ep, void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey);

ucs_status_t uct_cuda_cpy_ns_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp);

ucs_status_t uct_cuda_cpy_ns_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp);

#endif
