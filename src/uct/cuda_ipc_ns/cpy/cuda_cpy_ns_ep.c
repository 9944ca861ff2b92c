/*
 * cuda_cpy_ns: endpoint operations (see cuda_cpy_ns_iface.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_iface.h"
#include "cuda_cpy_ns_copy.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log.h>
#include <ucs/type/class.h>
#include <inttypes.h>


static UCS_CLASS_INIT_FUNC(uct_cuda_cpy_ns_iface_ep_t, const uct_ep_params_t *params)
{
    uct_cuda_cpy_ns_iface_t *iface = ucs_derived_of(params->iface,
                                                    uct_cuda_cpy_ns_iface_t);

    UCS_CLASS_CALL_SUPER_INIT(uct_cuda_ipc_ns_iface_base_ep_t, params);

    if (!uct_cuda_ipc_ns_addr_is_self(&iface->super.dev_addr,
                                      &iface->super.iface_addr,
                                      &self->super.remote_dev,
                                      &self->super.remote_iface, NULL)) {
        ucs_error("cuda_cpy_ns: cannot connect to pid %u in PID namespace %"
                  PRIu64 ": the transport reaches only its own process",
                  self->super.remote_iface.pid,
                  self->super.remote_iface.pid_ns);
        return UCS_ERR_UNREACHABLE;
    }

    return UCS_OK;
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_cpy_ns_iface_ep_t)
{
}


UCS_CLASS_DEFINE(uct_cuda_cpy_ns_iface_ep_t, uct_cuda_ipc_ns_iface_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_cuda_cpy_ns_iface_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_cuda_cpy_ns_iface_ep_t, uct_ep_t);


ucs_status_t uct_cuda_cpy_ns_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey)
{
    ucs_trace_data("cuda_cpy_ns: put_short %u bytes %p -> 0x%" PRIx64, length,
                   buffer, remote_addr);
    return uct_cuda_cpy_ns_copy((void*)remote_addr, buffer, length);
}


ucs_status_t uct_cuda_cpy_ns_ep_get_short(uct_ep_h tl_ep, void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey)
{
    ucs_trace_data("cuda_cpy_ns: get_short %u bytes 0x%" PRIx64 " -> %p",
                   length, remote_addr, buffer);
    return uct_cuda_cpy_ns_copy(buffer, (const void*)remote_addr, length);
}


/* Zero-copy in either direction, counted when it succeeds */
static ucs_status_t uct_cuda_cpy_ns_ep_zcopy(uct_ep_h tl_ep,
                                             const uct_iov_t *iov,
                                             size_t iovcnt,
                                             uint64_t remote_addr,
                                             uct_completion_t *comp, int is_put)
{
    void *remote = (void*)remote_addr;
    ucs_status_t status;
    size_t i, j;
    void *local;

    ucs_trace_data("cuda_cpy_ns: %s_zcopy %zu bytes %s 0x%" PRIx64,
                   is_put ? "put" : "get", uct_iov_total_length(iov, iovcnt),
                   is_put ? "->" : "<-", remote_addr);
    for (i = 0; i < iovcnt; ++i) {
        for (j = 0; j < iov[i].count; ++j) {
            local  = UCS_PTR_BYTE_OFFSET(iov[i].buffer, j * iov[i].stride);
            status = is_put ?
                     uct_cuda_cpy_ns_copy(remote, local, iov[i].length) :
                     uct_cuda_cpy_ns_copy(local, remote, iov[i].length);
            if (status != UCS_OK) {
                return status;
            }
            remote = UCS_PTR_BYTE_OFFSET(remote, iov[i].length);
        }
    }

    return (comp == NULL) ? UCS_OK :
           uct_cuda_cpy_ns_iface_complete_later(
                   ucs_derived_of(tl_ep->iface, uct_cuda_cpy_ns_iface_t), comp);
}


ucs_status_t uct_cuda_cpy_ns_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp)
{
    ucs_status_t status;

    status = uct_cuda_cpy_ns_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, comp,
                                      1);
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t),
                                 PUT, ZCOPY, uct_iov_total_length(iov, iovcnt));
    return status;
}


ucs_status_t uct_cuda_cpy_ns_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp)
{
    ucs_status_t status;

    status = uct_cuda_cpy_ns_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, comp,
                                      0);
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t),
                                 GET, ZCOPY, uct_iov_total_length(iov, iovcnt));
    return status;
}


ucs_status_t uct_cuda_cpy_ns_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                      uct_completion_t *comp)
{
    return uct_cuda_cpy_ns_iface_flush(tl_ep->iface, flags, comp);
}
