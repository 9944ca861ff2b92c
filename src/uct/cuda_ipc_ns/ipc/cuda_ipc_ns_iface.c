/*
 * cuda_ipc_ns: the transport cu_ipc_ns and its interface — capabilities,
 * performance figures, progress, wakeup and flush (docs/architecture.md).
 * Addresses and reachability come from the base class
 * (cuda_ipc_ns_iface_base.h), endpoints from cuda_ipc_ns_ep.c.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_iface.h"
#include "cuda_ipc_ns_copies.h"
#include "cuda_ipc_ns_ep.h"
#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_md_base.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_compat.h"

#include <ucs/sys/math.h>
#include <ucs/time/time.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/type/class.h>


static ucs_config_field_t uct_cuda_ipc_ns_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"MAX_POLL", "16",
     "Maximal number of completed copies handled by one progress call.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, max_poll),
     UCS_CONFIG_TYPE_UINT},

    {"MAX_STREAMS", "16",
     "Maximal number of CUDA streams per local context: one per remote device\n"
     "up to this number, then remote devices share them.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, max_streams),
     UCS_CONFIG_TYPE_UINT},

    {"MAX_EVENTS", "inf",
     "Maximal number of CUDA events in the completion pool, that is of\n"
     "copies in flight on one interface.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, max_events),
     UCS_CONFIG_TYPE_UINT},

    {"BW", "auto",
     "Bandwidth of a copy reported to UCP. auto: the worst pair of devices\n"
     "that reach each other (docs/configuration.md): NVLink estimate by compute\n"
     "capability when every pair has native atomics, else PCIe; one device:\n"
     "half the device memory bandwidth.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, bandwidth),
     UCS_CONFIG_TYPE_BW},

    {"LAT", "auto",
     "Latency of a copy reported to UCP. auto: 1.8us (2.5us before compute\n"
     "capability 7.0).",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, latency),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"OVERHEAD", "auto",
     "CPU overhead of posting a copy reported to UCP. auto: 4us.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, overhead),
     UCS_CONFIG_TYPE_TIME_UNITS},

    {"OWNER_COPY_MAX_REQUESTS", "32",
     "Maximal number of copy requests waiting for their answer on the session\n"
     "with one owner (puts and gets on memory its owner copies, see\n"
     "docs/owner-copies.md); more wait as pending requests.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, owner_copy_max_requests),
     UCS_CONFIG_TYPE_UINT},

    {"OWNER_COPY_STAGING_SLOTS", "4",
     "Number of slots of the staging ring (1 to 64) that a put or get on memory\n"
     "its owner copies goes through when the local buffer is not VMM memory\n"
     "the owner can map (cuMemAlloc memory, host memory): one ring per owner,\n"
     "local device and kind of memory, allocated on first use; an op's chunks\n"
     "are pipelined over the slots (docs/owner-copies.md).",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, owner_copy_staging_slots),
     UCS_CONFIG_TYPE_UINT},

    {"OWNER_COPY_STAGING_SLOT_SIZE", "4m",
     "Size of one slot of a staging ring, that is the largest chunk of a staged\n"
     "put or get (an op smaller than the ring is cut into one chunk per slot);\n"
     "rounded up to the device's allocation granularity, at most 1g.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, owner_copy_staging_slot_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"OWNER_COPY_STAGING", "auto",
     "Memory of the staging ring:\n"
     " device - a VMM allocation on the local buffer's GPU, which the owner\n"
     "          maps (both GPUs must be usable by the owner);\n"
     " host   - pinned host memory both sides register with the driver: two\n"
     "          copies over PCIe, for GPUs that cannot see each other;\n"
     " auto   - host when the owner's GPU is not one this process can use\n"
     "          (pods with GPUs of their own), else device.\n"
     "(docs/owner-copies.md, \"The pinned host ring\")",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, owner_copy_staging),
     UCS_CONFIG_TYPE_ENUM(uct_cuda_ipc_ns_staging_kind_names)},

    {NULL}
};


static ucs_status_t uct_cuda_ipc_ns_iface_query(uct_iface_h tl_iface,
                                                uct_iface_attr_t *iface_attr)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);

    uct_cuda_ipc_ns_iface_base_query(&iface->super, iface_attr,
                                     UCT_CUDA_IPC_NS_MAX_IOV);
    iface_attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                                  UCT_IFACE_FLAG_PUT_SHORT |
                                  UCT_IFACE_FLAG_PUT_BCOPY |
                                  UCT_IFACE_FLAG_GET_BCOPY |
                                  UCT_IFACE_FLAG_PUT_ZCOPY |
                                  UCT_IFACE_FLAG_GET_ZCOPY |
                                  UCT_IFACE_FLAG_PENDING |
                                  UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                                  UCT_IFACE_FLAG_EP_CHECK;
    iface_attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                                  UCT_IFACE_FLAG_EVENT_FD;

    iface_attr->cap.put.max_short = UCT_CUDA_IPC_NS_MAX_SHORT;
    iface_attr->cap.put.max_bcopy = UCT_CUDA_IPC_NS_MAX_BCOPY;
    iface_attr->cap.get.max_bcopy = UCT_CUDA_IPC_NS_MAX_BCOPY;
    return UCS_OK;
}


/* Start a pending request while events are available */
static ucs_arbiter_cb_result_t
uct_cuda_ipc_ns_iface_pending_dispatch_cb(ucs_arbiter_t *arbiter,
                                          ucs_arbiter_group_t *group,
                                          ucs_arbiter_elem_t *elem, void *arg)
{
    uct_cuda_ipc_ns_iface_t *iface = arg;
    uct_pending_req_t *req         = ucs_container_of(elem, uct_pending_req_t,
                                                      priv);
    ucs_status_t status;

    if (!uct_cuda_ipc_ns_cq_has_resources(&iface->cq)) {
        return UCS_ARBITER_CB_RESULT_STOP;
    }

    status = req->func(req);
    if (status == UCS_OK) {
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    } else if (status == UCS_INPROGRESS) {
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP; /* partly done: stays */
    }

    /* not done: it keeps its place at the head of its endpoint's group */
    return UCS_ARBITER_CB_RESULT_STOP;
}


static unsigned uct_cuda_ipc_ns_iface_progress(uct_iface_h tl_iface)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);
    unsigned count;

    /* UCT: a waiter progresses, then arms again before it sleeps */
    uct_cuda_ipc_ns_cq_disarm(&iface->cq);
    count = 0;
    /* the sockets of owner copies are read only while answers are owed */
    if (ucs_unlikely(iface->copies.outstanding > 0)) {
        count = uct_cuda_ipc_ns_copies_progress(&iface->copies);
    }
    if (!ucs_list_is_empty(&iface->cq.active)) {
        count += uct_cuda_ipc_ns_cq_progress(&iface->cq);
    }

    if (count > 0) {
        ucs_arbiter_dispatch(&iface->arbiter, 1,
                             uct_cuda_ipc_ns_iface_pending_dispatch_cb, iface);
    }
    return count;
}


static ucs_status_t uct_cuda_ipc_ns_iface_flush(uct_iface_h tl_iface,
                                                unsigned flags,
                                                uct_completion_t *comp)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }

    if ((iface->cq.num_ops == 0) && (iface->copies.outstanding == 0) &&
        ucs_arbiter_is_empty(&iface->arbiter)) {
        UCT_TL_IFACE_STAT_FLUSH(&iface->super.super);
        return UCS_OK;
    }

    UCT_TL_IFACE_STAT_FLUSH_WAIT(&iface->super.super);
    return UCS_INPROGRESS;
}


static ucs_status_t uct_cuda_ipc_ns_iface_fence(uct_iface_h tl_iface,
                                                unsigned flags)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);

    /* the next op, of whatever endpoint and lane, comes after every op in
     * flight (uct_cuda_ipc_ns_ep_fenced) */
    iface->fence = !ucs_list_is_empty(&iface->cq.active) ||
                   (iface->copies.outstanding > 0);
    UCT_TL_IFACE_STAT_FENCE(&iface->super.super);
    return UCS_OK;
}


static ucs_status_t uct_cuda_ipc_ns_iface_event_fd_get(uct_iface_h tl_iface,
                                                       int *fd_p)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);

    /* an epoll set: the completion queue's eventfd, and the sockets of
     * owner copy sessions while they owe answers */
    *fd_p = iface->copies.wakeup_fd;
    return UCS_OK;
}


static ucs_status_t uct_cuda_ipc_ns_iface_event_arm(uct_iface_h tl_iface,
                                                    unsigned events)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);
    ucs_status_t status;

    if (!(events & UCT_EVENT_SEND_COMP)) {
        return UCS_OK; /* nothing else ever happens here */
    }

    status = uct_cuda_ipc_ns_cq_arm(&iface->cq);
    if ((status == UCS_OK) && (iface->copies.outstanding > 0) &&
        uct_cuda_ipc_ns_copies_ready(&iface->copies)) {
        /* an answer waits: an edge-triggered waiter would miss it */
        return UCS_ERR_BUSY;
    }
    return status;
}


static uct_iface_internal_ops_t uct_cuda_ipc_ns_iface_internal_ops = {
    .iface_estimate_perf = uct_base_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query            = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate       = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported,
    UCT_CUDA_IPC_NS_IFACE_INTERNAL_OPS_ADDED
};


static UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t);


static uct_iface_ops_t uct_cuda_ipc_ns_iface_ops = {
    .ep_put_short             = uct_cuda_ipc_ns_ep_put_short,
    .ep_put_bcopy             = uct_cuda_ipc_ns_ep_put_bcopy,
    .ep_put_zcopy             = uct_cuda_ipc_ns_ep_put_zcopy,
    .ep_get_bcopy             = uct_cuda_ipc_ns_ep_get_bcopy,
    .ep_get_zcopy             = uct_cuda_ipc_ns_ep_get_zcopy,
    .ep_pending_add           = uct_cuda_ipc_ns_ep_pending_add,
    .ep_pending_purge         = uct_cuda_ipc_ns_ep_pending_purge,
    .ep_flush                 = uct_cuda_ipc_ns_ep_flush,
    .ep_fence                 = uct_cuda_ipc_ns_ep_fence,
    .ep_check                 = uct_cuda_ipc_ns_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_cuda_ipc_ns_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_cuda_ipc_ns_ep_t),
    .iface_flush              = uct_cuda_ipc_ns_iface_flush,
    .iface_fence              = uct_cuda_ipc_ns_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_cuda_ipc_ns_iface_progress,
    .iface_event_fd_get       = uct_cuda_ipc_ns_iface_event_fd_get,
    .iface_event_arm          = uct_cuda_ipc_ns_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_cuda_ipc_ns_iface_t),
    .iface_query              = uct_cuda_ipc_ns_iface_query,
    .iface_get_device_address = uct_cuda_ipc_ns_iface_base_get_device_address,
    .iface_get_address        = uct_cuda_ipc_ns_iface_base_get_address,
    .iface_is_reachable       = uct_cuda_ipc_ns_iface_base_is_reachable
};


static int uct_cuda_ipc_ns_device_attr(CUdevice device,
                                       CUdevice_attribute attr)
{
    int value = 0;

    (void)UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGetAttribute,
                                  &value, attr, device);
    return value;
}


/*
 * Bandwidth and latency when the configuration says "auto", from device 0
 * (docs/configuration.md): between two GPUs the link decides (NVLink when the
 * driver reports native peer atomics, else PCIe), by compute capability;
 * on one GPU a copy reads and writes device memory, at half its bandwidth.
 */
/*
 * The link between two different devices as the driver tells it: -1 when
 * they cannot reach each other (no peer access), 1 when they have native
 * atomics (NVLink), 0 otherwise (PCIe, or the driver cannot tell)
 */
static int uct_cuda_ipc_ns_iface_link(CUdevice a, CUdevice b)
{
    int access = 0, atomics = 0;

    if ((UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGetP2PAttribute,
                                 &access,
                                 CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, a,
                                 b) == UCS_OK) && !access) {
        return -1;
    }
    if (UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGetP2PAttribute,
                                &atomics,
                                CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                                a, b) != UCS_OK) {
        atomics = 0;
    }
    return !!atomics;
}


/* Of the ordered pairs of different devices among the first @a count, those
 * that can reach each other (@a *pairs_p) and of them those over PCIe
 * (@a *pcie_pairs_p) */
static void uct_cuda_ipc_ns_iface_count_links(int count, int *pairs_p,
                                              int *pcie_pairs_p)
{
    CUdevice dev_i, dev_j;
    int i, j;

    *pairs_p      = 0;
    *pcie_pairs_p = 0;
    for (i = 0; i < count; ++i) {
        for (j = 0; j < count; ++j) {
            if ((i == j) ||
                (UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGet,
                                         &dev_i, i) != UCS_OK) ||
                (UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGet,
                                         &dev_j, j) != UCS_OK)) {
                continue;
            }
            switch (uct_cuda_ipc_ns_iface_link(dev_i, dev_j)) {
            case 0:
                ++*pcie_pairs_p;
                /* fall through */
            case 1:
                ++*pairs_p;
                break;
            default:
                break;
            }
        }
    }
}


/*
 * One figure for the interface, which serves every device pair (UCT reports
 * one per iface): the worst pair of different devices that can reach each
 * other, NVLink only when every such pair has native atomics
 * (docs/configuration.md, "Performance figures")
 */
static void uct_cuda_ipc_ns_iface_auto_perf(double *bandwidth_p,
                                            double *latency_p)
{
    static const double nvlink_gbs[] = {0, 0, 0, 0, 0, 0, 40, 150, 300, 450,
                                        900};
    static const double pcie_gbs[]   = {0, 0, 0, 6, 6, 12, 12, 12, 25, 50,
                                        50};
    int count = 0, pairs, pcie_pairs, major, mem_khz, bus_bits;
    CUdevice dev0;
    const char *how;
    double gbs;

    if ((UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGet, &dev0, 0) !=
         UCS_OK)) {
        *bandwidth_p = 50e9;
        *latency_p   = 1.8e-6;
        return;
    }

    major    = ucs_min(uct_cuda_ipc_ns_device_attr(dev0,
                           CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                       (int)ucs_static_array_size(nvlink_gbs) - 1);
    major    = ucs_max(major, 0);
    mem_khz  = uct_cuda_ipc_ns_device_attr(dev0,
                                           CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    bus_bits = uct_cuda_ipc_ns_device_attr(dev0,
                                           CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    (void)UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGetCount, &count);

    uct_cuda_ipc_ns_iface_count_links(count, &pairs, &pcie_pairs);

    if (pairs > 0) {
        gbs = (pcie_pairs == 0) ? nvlink_gbs[major] : pcie_gbs[major];
        how = (pcie_pairs == 0) ? "NVLink between every pair" :
                                  "PCIe between some pair";
    } else if ((mem_khz > 0) && (bus_bits > 0)) {
        /* double data rate: 2 transfers per clock */
        gbs = (2.0 * mem_khz * 1e3 * bus_bits / 8) / 2 / 1e9;
        how = "device memory";
    } else {
        gbs = nvlink_gbs[major];
        how = "compute capability";
    }

    *bandwidth_p = ((gbs > 0) ? gbs : 50) * 1e9;
    *latency_p   = (major >= 7) ? 1.8e-6 : 2.5e-6;
    ucs_debug("cuda_ipc_ns: compute capability %d, %d devices, %d linked "
              "pairs (%d PCIe): auto bandwidth %.1f GB/s (%s)", major, count,
              pairs, pcie_pairs, *bandwidth_p / 1e9, how);
}


/* The interface's performance figures: configured, or measured (auto) */
static void
uct_cuda_ipc_ns_iface_set_perf(uct_cuda_ipc_ns_iface_t *iface,
                               const uct_cuda_ipc_ns_iface_config_t *config)
{
    double auto_bandwidth, auto_latency;

    uct_cuda_ipc_ns_iface_auto_perf(&auto_bandwidth, &auto_latency);
    iface->super.perf.bandwidth = uct_cuda_ipc_ns_compat_config_bw_is_auto(
                                          config->bandwidth) ?
                                  auto_bandwidth : config->bandwidth;
    iface->super.perf.latency   = (config->latency == UCS_TIME_AUTO) ?
                                  auto_latency :
                                  ucs_time_to_sec(config->latency);
    iface->super.perf.overhead  = (config->overhead == UCS_TIME_AUTO) ?
                                  4e-6 : ucs_time_to_sec(config->overhead);
}


static UCS_CLASS_INIT_FUNC(uct_cuda_ipc_ns_iface_t, uct_md_h tl_md,
                           uct_worker_h worker, const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_cuda_ipc_ns_iface_config_t *config =
            ucs_derived_of(tl_config, uct_cuda_ipc_ns_iface_config_t);
    uct_cuda_ipc_ns_md_t *md = ucs_derived_of(tl_md, uct_cuda_ipc_ns_md_t);
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_cuda_ipc_ns_iface_base_t,
                              &uct_cuda_ipc_ns_iface_ops,
                              &uct_cuda_ipc_ns_iface_internal_ops, tl_md, worker,
                              params, tl_config, UCT_CUDA_IPC_NS_DEV_NAME,
                              md->addr_flags,
                              uct_cuda_ipc_ns_addr_is_reachable);

    if ((config->max_poll == 0) || (config->max_streams == 0) ||
        (config->max_events == 0)) {
        ucs_error("cuda_ipc_ns: UCX_CUDA_IPC_NS_MAX_POLL, _MAX_STREAMS and "
                  "_MAX_EVENTS must be positive");
        return UCS_ERR_INVALID_PARAM;
    }

    uct_cuda_ipc_ns_iface_set_perf(self, config);
    self->fence                = 0;
    self->cancel_prog_id       = UCS_CALLBACKQ_ID_NULL;
    ucs_arbiter_init(&self->arbiter);

    self->bounce = ucs_malloc(UCT_CUDA_IPC_NS_MAX_BCOPY, "cuda_ipc_ns_bounce");
    if (self->bounce == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate the bcopy staging buffer");
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_ipc_ns_cq_init(&self->cq, config->max_streams,
                                     config->max_poll, config->max_events);
    if (status != UCS_OK) {
        goto err_free_bounce;
    }

    status = uct_cuda_ipc_ns_copies_init(&self->copies, &md->fdx,
                                         config->owner_copy_max_requests,
                                         config->owner_copy_staging_slots,
                                         config->owner_copy_staging_slot_size,
                                         config->owner_copy_staging,
                                         &self->cq,
                                         uct_cuda_ipc_ns_ep_ops_failed);
    if (status != UCS_OK) {
        goto err_cq_cleanup;
    }
    return UCS_OK;

err_cq_cleanup:
    uct_cuda_ipc_ns_cq_cleanup(&self->cq);
err_free_bounce:
    ucs_free(self->bounce);
    return status;
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_ipc_ns_iface_t)
{
    uct_worker_progress_unregister_safe(&self->super.super.worker->super,
                                        &self->cancel_prog_id);
    uct_cuda_ipc_ns_copies_cleanup(&self->copies);
    uct_cuda_ipc_ns_cq_cleanup(&self->cq);
    ucs_arbiter_cleanup(&self->arbiter);
    ucs_free(self->bounce);
}


UCS_CLASS_DEFINE(uct_cuda_ipc_ns_iface_t, uct_cuda_ipc_ns_iface_base_t);

static UCS_CLASS_DEFINE_NEW_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);

static UCS_CLASS_DEFINE_DELETE_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t);



static ucs_status_t
uct_cuda_ipc_ns_query_devices(uct_md_h md,
                              uct_tl_device_resource_t **devices_p,
                              unsigned *num_devices_p)
{
    return uct_single_device_resource(md, UCT_CUDA_IPC_NS_DEV_NAME,
                                      UCT_DEVICE_TYPE_ACC,
                                      UCS_SYS_DEVICE_ID_UNKNOWN, devices_p,
                                      num_devices_p);
}


/* UCX 1.13.1 keeps transport names in char[UCT_TL_NAME_MAX] */
_Static_assert(sizeof("cu_ipc_ns") <= UCT_TL_NAME_MAX, "transport name too long");

UCT_TL_DEFINE_ENTRY(&uct_cuda_ipc_ns_component, cu_ipc_ns,
                    uct_cuda_ipc_ns_query_devices, uct_cuda_ipc_ns_iface_t,
                    UCT_CUDA_IPC_NS_CFG_PREFIX,
                    uct_cuda_ipc_ns_iface_config_table,
                    uct_cuda_ipc_ns_iface_config_t);

/* uct_cu_ipc_ns_init() registers the component and the transport,
 * uct_cu_ipc_ns_cleanup() unregisters them: called by the module's constructor
 * and destructor (cuda_ipc_ns_module.c), after the ABI guard */
UCT_SINGLE_TL_INIT(&uct_cuda_ipc_ns_component, cu_ipc_ns,,,)
