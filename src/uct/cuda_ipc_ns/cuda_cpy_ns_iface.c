/*
 * cuda_cpy_ns: interface of the loopback copy transport (see
 * cuda_cpy_ns_iface.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_iface.h"
#include "cuda_cpy_ns_md.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/type/class.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>


static ucs_config_field_t uct_cuda_cpy_ns_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_cuda_cpy_ns_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"BW", "10000MBs",
     "Bandwidth of a copy between host and device memory reported to UCP.",
     ucs_offsetof(uct_cuda_cpy_ns_iface_config_t, bandwidth),
     UCS_CONFIG_TYPE_BW},

    {"LAT", "8us",
     "Latency of a synchronous copy reported to UCP.",
     ucs_offsetof(uct_cuda_cpy_ns_iface_config_t, latency),
     UCS_CONFIG_TYPE_TIME},

    {"OVERHEAD", "10us",
     "CPU overhead of a synchronous copy reported to UCP.",
     ucs_offsetof(uct_cuda_cpy_ns_iface_config_t, overhead),
     UCS_CONFIG_TYPE_TIME},

    {NULL}
};


static ucs_status_t uct_cuda_cpy_ns_iface_query(uct_iface_h tl_iface,
                                                uct_iface_attr_t *iface_attr)
{
    uct_cuda_cpy_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_cpy_ns_iface_t);

    uct_cuda_ipc_ns_iface_base_query(&iface->super, iface_attr, 1);
    /* SHORT for UCP's pack/unpack of any length (max_short is not checked
     * there), ZCOPY and PENDING for its rendezvous pipeline lanes */
    iface_attr->cap.flags         = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                                    UCT_IFACE_FLAG_PUT_SHORT |
                                    UCT_IFACE_FLAG_GET_SHORT |
                                    UCT_IFACE_FLAG_PUT_ZCOPY |
                                    UCT_IFACE_FLAG_GET_ZCOPY |
                                    UCT_IFACE_FLAG_PENDING;
    iface_attr->cap.event_flags   = 0;
    iface_attr->cap.put.max_short = UINT_MAX;
    iface_attr->cap.get.max_short = UINT_MAX;
    return UCS_OK;
}


/* A copy costs the caller only: UCP's protocols v2 assert that the copy
 * operations of a memory-type endpoint have no receive overhead */
static ucs_status_t
uct_cuda_cpy_ns_iface_estimate_perf(uct_iface_h tl_iface,
                                    uct_perf_attr_t *perf_attr)
{
    ucs_status_t status;

    status = uct_base_iface_estimate_perf(tl_iface, perf_attr);
    if ((status == UCS_OK) &&
        (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_RECV_OVERHEAD)) {
        perf_attr->recv_overhead = 0;
    }
    return status;
}


static uct_iface_internal_ops_t uct_cuda_cpy_ns_iface_internal_ops = {
    .iface_estimate_perf = uct_cuda_cpy_ns_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query            = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate       = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported
};


ucs_status_t uct_cuda_cpy_ns_iface_complete_later(uct_cuda_cpy_ns_iface_t *iface,
                                                  uct_completion_t *comp)
{
    unsigned capacity;
    uct_completion_t **comps;

    if (iface->done.count == iface->done.capacity) {
        capacity = ucs_max(16, iface->done.capacity * 2);
        comps    = ucs_realloc(iface->done.comps, capacity * sizeof(*comps),
                               "cuda_cpy_ns_comps");
        if (comps == NULL) {
            ucs_error("cuda_cpy_ns: failed to queue a completion");
            return UCS_ERR_NO_MEMORY;
        }
        iface->done.comps    = comps;
        iface->done.capacity = capacity;
    }

    iface->done.comps[iface->done.count++] = comp;
    return UCS_INPROGRESS;
}


static unsigned uct_cuda_cpy_ns_iface_progress(uct_iface_h tl_iface)
{
    uct_cuda_cpy_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_cpy_ns_iface_t);
    unsigned count                 = iface->done.count;
    uct_completion_t *comp;
    unsigned i;

    /* each completion leaves the queue before it is invoked, so a callback
     * may post operations (queued behind, for the next call) or progress */
    for (i = 0; (i < count) && (iface->done.count > 0); ++i) {
        comp = iface->done.comps[0];
        --iface->done.count;
        memmove(iface->done.comps, iface->done.comps + 1,
                iface->done.count * sizeof(*iface->done.comps));
        uct_invoke_completion(comp, UCS_OK);
    }
    return i;
}


/* Operations are done when their completions were delivered */
static ucs_status_t
uct_cuda_cpy_ns_iface_flush(uct_iface_h tl_iface, unsigned flags,
                            uct_completion_t *comp)
{
    uct_cuda_cpy_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_cpy_ns_iface_t);

    if (iface->done.count == 0) {
        return UCS_OK;
    }

    return (comp == NULL) ? UCS_INPROGRESS :
           uct_cuda_cpy_ns_iface_complete_later(iface, comp);
}


static ucs_status_t uct_cuda_cpy_ns_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                             uct_completion_t *comp)
{
    return uct_cuda_cpy_ns_iface_flush(tl_ep->iface, flags, comp);
}


static UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_cpy_ns_iface_t, uct_iface_t);


UCT_CUDA_IPC_NS_EP_ZCOPY_DEFINE(static, uct_cuda_cpy_ns, uct_cuda_cpy_ns_ep_zcopy)


static uct_iface_ops_t uct_cuda_cpy_ns_iface_ops = {
    UCT_CUDA_IPC_NS_IFACE_CLASS_OPS(uct_cuda_cpy_ns),
    UCT_CUDA_IPC_NS_IFACE_BASE_OPS,
    .ep_put_short             = uct_cuda_cpy_ns_ep_put_short,
    .ep_get_short             = uct_cuda_cpy_ns_ep_get_short,
    UCT_CUDA_IPC_NS_EP_ZCOPY_OPS(uct_cuda_cpy_ns),
    .ep_flush                 = uct_cuda_cpy_ns_ep_flush,
    .ep_fence                 = uct_base_ep_fence,
    /* operations never lack resources: nothing is ever pending */
    .ep_pending_add           = (uct_ep_pending_add_func_t)ucs_empty_function_return_busy,
    .ep_pending_purge         = (uct_ep_pending_purge_func_t)ucs_empty_function,
    .iface_flush              = uct_cuda_cpy_ns_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress           = uct_cuda_cpy_ns_iface_progress,
    .iface_query              = uct_cuda_cpy_ns_iface_query
};


static UCS_CLASS_INIT_FUNC(uct_cuda_cpy_ns_iface_t, uct_md_h md,
                           uct_worker_h worker, const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_cuda_cpy_ns_iface_config_t *config =
            ucs_derived_of(tl_config, uct_cuda_cpy_ns_iface_config_t);

    UCS_CLASS_CALL_SUPER_INIT(uct_cuda_ipc_ns_iface_base_t,
                              &uct_cuda_cpy_ns_iface_ops,
                              &uct_cuda_cpy_ns_iface_internal_ops, md, worker,
                              params, tl_config, UCT_CUDA_CPY_NS_DEV_NAME, 0,
                              uct_cuda_ipc_ns_addr_is_self);

    self->done.comps           = NULL;
    self->done.count           = 0;
    self->done.capacity        = 0;
    self->super.perf.bandwidth = config->bandwidth;
    self->super.perf.latency   = config->latency;
    self->super.perf.overhead  = config->overhead;
    return UCS_OK;
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_cpy_ns_iface_t)
{
    if (self->done.count != 0) {
        ucs_warn("cuda_cpy_ns: closing the interface with %u completions "
                 "not delivered", self->done.count);
    }
    ucs_free(self->done.comps);
}


/* the class, its new/delete functions, the transport and its registration */
UCT_CUDA_IPC_NS_TL_DEFINE(&uct_cuda_cpy_ns_component, cu_cpy_ns, uct_cuda_cpy_ns,
                          UCT_CUDA_CPY_NS_DEV_NAME, UCT_CUDA_CPY_NS_CFG_PREFIX)
