/*
 * cuda_cpy_ns: interface of the loopback copy transport (see
 * cuda_cpy_ns_iface.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_iface.h"
#include "cuda_cpy_ns_md.h"
#include "cuda_ipc_ns_compat.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log.h>
#include <ucs/arch/cpu.h>
#include <ucs/sys/math.h>
#include <ucs/type/class.h>
#include <limits.h>


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
    .ep_invalidate       = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported,
    UCT_CUDA_IPC_NS_IFACE_INTERNAL_OPS_ADDED
};


ucs_status_t uct_cuda_cpy_ns_iface_complete_later(uct_cuda_cpy_ns_iface_t *iface,
                                                  uct_completion_t *comp)
{
    uct_cuda_cpy_ns_iface_done_t *done;

    done = ucs_mpool_get(&iface->done_mp);
    if (done == NULL) {
        ucs_error("cuda_cpy_ns: failed to queue a completion");
        return UCS_ERR_NO_MEMORY;
    }

    done->comp = comp;
    ucs_queue_push(&iface->done_q, &done->queue);
    return UCS_INPROGRESS;
}


static unsigned uct_cuda_cpy_ns_iface_progress(uct_iface_h tl_iface)
{
    uct_cuda_cpy_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_cpy_ns_iface_t);
    uct_cuda_cpy_ns_iface_done_t *done, *last;
    uct_completion_t *comp;
    unsigned count                 = 0;

    if (ucs_queue_is_empty(&iface->done_q)) {
        return 0;
    }

    /* up to the completions queued now: each leaves the queue before it is
     * invoked, so a callback may post operations (queued behind, for the
     * next call) or progress */
    last = ucs_queue_tail_elem_non_empty(&iface->done_q,
                                         uct_cuda_cpy_ns_iface_done_t, queue);
    do {
        done = ucs_queue_pull_elem_non_empty(&iface->done_q,
                                             uct_cuda_cpy_ns_iface_done_t, queue);
        comp = done->comp;
        ucs_mpool_put(done);
        ++count;
        uct_invoke_completion(comp, UCS_OK);
    } while ((done != last) && !ucs_queue_is_empty(&iface->done_q));

    return count;
}


ucs_status_t uct_cuda_cpy_ns_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                         uct_completion_t *comp)
{
    uct_cuda_cpy_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_cpy_ns_iface_t);

    if (ucs_queue_is_empty(&iface->done_q)) {
        return UCS_OK;
    }

    return (comp == NULL) ? UCS_INPROGRESS :
           uct_cuda_cpy_ns_iface_complete_later(iface, comp);
}


static UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_cpy_ns_iface_t, uct_iface_t);


static uct_iface_ops_t uct_cuda_cpy_ns_iface_ops = {
    .ep_put_short             = uct_cuda_cpy_ns_ep_put_short,
    .ep_put_zcopy             = uct_cuda_cpy_ns_ep_put_zcopy,
    .ep_get_short             = uct_cuda_cpy_ns_ep_get_short,
    .ep_get_zcopy             = uct_cuda_cpy_ns_ep_get_zcopy,
    /* operations never lack resources: nothing is ever pending */
    .ep_pending_add           = (uct_ep_pending_add_func_t)
                                ucs_empty_function_return_busy,
    .ep_pending_purge         = (uct_ep_pending_purge_func_t)
                                ucs_empty_function,
    .ep_flush                 = uct_cuda_cpy_ns_ep_flush,
    .ep_fence                 = uct_base_ep_fence,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_cuda_cpy_ns_iface_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_cuda_cpy_ns_iface_ep_t),
    .iface_flush              = uct_cuda_cpy_ns_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_cuda_cpy_ns_iface_progress,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_cuda_cpy_ns_iface_t),
    .iface_query              = uct_cuda_cpy_ns_iface_query,
    .iface_get_device_address = uct_cuda_ipc_ns_iface_base_get_device_address,
    .iface_get_address        = uct_cuda_ipc_ns_iface_base_get_address,
    .iface_is_reachable       = uct_cuda_ipc_ns_iface_base_is_reachable
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

    self->super.perf.bandwidth = config->bandwidth;
    self->super.perf.latency   = config->latency;
    self->super.perf.overhead  = config->overhead;
    ucs_queue_head_init(&self->done_q);
    return uct_cuda_ipc_ns_compat_mpool_init(&self->done_mp,
                                             sizeof(uct_cuda_cpy_ns_iface_done_t),
                                             UCS_SYS_CACHE_LINE_SIZE, 16,
                                             UINT_MAX,
                                             NULL,
                                             "cuda_cpy_ns_completions");
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_cpy_ns_iface_t)
{
    uct_cuda_cpy_ns_iface_done_t *done;
    unsigned count = 0;

    ucs_queue_for_each_extract(done, &self->done_q, queue, 1) {
        ucs_mpool_put(done);
        ++count;
    }
    if (count != 0) {
        ucs_warn("cuda_cpy_ns: closing the interface with %u completions "
                 "not delivered", count);
    }
    ucs_mpool_cleanup(&self->done_mp, 1);
}


UCS_CLASS_DEFINE(uct_cuda_cpy_ns_iface_t, uct_cuda_ipc_ns_iface_base_t);

static UCS_CLASS_DEFINE_NEW_FUNC(uct_cuda_cpy_ns_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);

static UCS_CLASS_DEFINE_DELETE_FUNC(uct_cuda_cpy_ns_iface_t, uct_iface_t);


static ucs_status_t
uct_cuda_cpy_ns_query_devices(uct_md_h md,
                              uct_tl_device_resource_t **devices_p,
                              unsigned *num_devices_p)
{
    return uct_single_device_resource(md, UCT_CUDA_CPY_NS_DEV_NAME,
                                      UCT_DEVICE_TYPE_ACC,
                                      UCS_SYS_DEVICE_ID_UNKNOWN, devices_p,
                                      num_devices_p);
}


/* UCX 1.13.1 keeps transport names in char[UCT_TL_NAME_MAX] */
_Static_assert(sizeof("cu_cpy_ns") <= UCT_TL_NAME_MAX, "transport name too long");

UCT_TL_DEFINE_ENTRY(&uct_cuda_cpy_ns_component, cu_cpy_ns,
                    uct_cuda_cpy_ns_query_devices, uct_cuda_cpy_ns_iface_t,
                    UCT_CUDA_CPY_NS_CFG_PREFIX,
                    uct_cuda_cpy_ns_iface_config_table,
                    uct_cuda_cpy_ns_iface_config_t);

/* uct_cu_cpy_ns_init() registers the component and the transport,
 * uct_cu_cpy_ns_cleanup() unregisters them: called by the module's constructor
 * and destructor (cuda_ipc_ns_module.c), after the ABI guard */
UCT_SINGLE_TL_INIT(&uct_cuda_cpy_ns_component, cu_cpy_ns,,,)
