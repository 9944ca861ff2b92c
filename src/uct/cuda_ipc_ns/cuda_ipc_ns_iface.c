/*
 * cuda_ipc_ns: interface — addresses, reachability, progress.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_iface.h"
#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_nsid.h"

#include <ucs/debug/log.h>
#include <ucs/type/class.h>
#include <string.h>
#include <limits.h>
#include <inttypes.h>


ucs_config_field_t uct_cuda_ipc_ns_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"MAX_POLL", "16",
     "Maximal number of completed copies handled by one progress call.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, max_poll),
     UCS_CONFIG_TYPE_UINT},

    {"MAX_STREAMS", "16",
     "Number of CUDA streams per device that copies are spread over.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, max_streams),
     UCS_CONFIG_TYPE_UINT},

    {"MAX_EVENTS", "inf",
     "Maximal number of CUDA events in the completion pool, that is of\n"
     "copies in flight on one interface.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, max_events),
     UCS_CONFIG_TYPE_UINT},

    {"BW", "50000MBs",
     "Bandwidth of a copy between two GPUs reported to UCP.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, bandwidth),
     UCS_CONFIG_TYPE_BW},

    {"LAT", "1.8us",
     "Latency of a copy reported to UCP.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, latency),
     UCS_CONFIG_TYPE_TIME},

    {"OVERHEAD", "4.0us",
     "CPU overhead of posting a copy reported to UCP.",
     ucs_offsetof(uct_cuda_ipc_ns_iface_config_t, overhead),
     UCS_CONFIG_TYPE_TIME},

    {NULL}
};


ucs_status_t uct_cuda_ipc_ns_query_devices(uct_md_h md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p)
{
    return uct_single_device_resource(md, UCT_CUDA_IPC_NS_DEV_NAME,
                                      UCT_DEVICE_TYPE_ACC,
                                      UCS_SYS_DEVICE_ID_UNKNOWN, devices_p,
                                      num_devices_p);
}


static ucs_status_t uct_cuda_ipc_ns_iface_query(uct_iface_h tl_iface,
                                                uct_iface_attr_t *iface_attr)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);

    uct_base_iface_query(&iface->super, iface_attr);

    iface_attr->iface_addr_len      = UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE;
    iface_attr->device_addr_len     = UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE;
    iface_attr->ep_addr_len         = 0;
    iface_attr->max_conn_priv       = 0;
    iface_attr->cap.flags           = UCT_IFACE_FLAG_CONNECT_TO_IFACE;
    iface_attr->cap.event_flags     = 0;
    iface_attr->latency             = ucs_linear_func_make(iface->config.latency,
                                                           0);
    iface_attr->bandwidth.dedicated = 0;
    iface_attr->bandwidth.shared    = iface->config.bandwidth;
    iface_attr->overhead            = iface->config.overhead;
    iface_attr->priority            = 0;
    return UCS_OK;
}


static ucs_status_t
uct_cuda_ipc_ns_iface_get_device_address(uct_iface_h tl_iface,
                                         uct_device_addr_t *addr)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);

    uct_cuda_ipc_ns_device_addr_pack(&iface->dev_addr, addr);
    return UCS_OK;
}


static ucs_status_t uct_cuda_ipc_ns_iface_get_address(uct_iface_h tl_iface,
                                                      uct_iface_addr_t *addr)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);

    uct_cuda_ipc_ns_iface_addr_pack(&iface->iface_addr, addr);
    return UCS_OK;
}


static int uct_cuda_ipc_ns_iface_is_reachable(const uct_iface_h tl_iface,
                                              const uct_device_addr_t *dev_addr,
                                              const uct_iface_addr_t *iface_addr)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(tl_iface,
                                                    uct_cuda_ipc_ns_iface_t);
    uct_cuda_ipc_ns_device_addr_t remote_dev;
    uct_cuda_ipc_ns_iface_addr_t remote_iface;
    const char *reason;

    /* UCP passes addresses of the sizes we advertise */
    if ((dev_addr == NULL) || (iface_addr == NULL) ||
        (uct_cuda_ipc_ns_device_addr_parse(dev_addr,
                                           UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE,
                                           &remote_dev) != UCS_OK) ||
        (uct_cuda_ipc_ns_iface_addr_parse(iface_addr,
                                          UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE,
                                          &remote_iface) != UCS_OK)) {
        return 0;
    }

    if (!uct_cuda_ipc_ns_addr_is_reachable(&iface->dev_addr, &iface->iface_addr,
                                           &remote_dev, &remote_iface,
                                           &reason)) {
        ucs_debug("cuda_ipc_ns: pid %u in PID namespace %" PRIu64
                  " is unreachable: %s", remote_iface.pid, remote_iface.pid_ns,
                  reason);
        return 0;
    }

    return 1;
}


static UCS_CLASS_INIT_FUNC(uct_cuda_ipc_ns_ep_t, const uct_ep_params_t *params)
{
    uct_cuda_ipc_ns_iface_t *iface = ucs_derived_of(params->iface,
                                                    uct_cuda_ipc_ns_iface_t);
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR)) {
        ucs_error("cuda_ipc_ns: ep_create needs the peer's iface address");
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_cuda_ipc_ns_iface_addr_parse(params->iface_addr,
                                              UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE,
                                              &self->remote);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: invalid peer iface address");
        return status;
    }

    return UCS_OK;
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_ipc_ns_ep_t)
{
}


UCS_CLASS_DEFINE(uct_cuda_ipc_ns_ep_t, uct_base_ep_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t,
                                 const uct_ep_params_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t);


static UCS_CLASS_DECLARE_DELETE_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t);


static uct_iface_ops_t uct_cuda_ipc_ns_iface_ops = {
    .ep_pending_add           = (uct_ep_pending_add_func_t)ucs_empty_function_return_busy,
    .ep_pending_purge         = (uct_ep_pending_purge_func_t)ucs_empty_function,
    .ep_flush                 = uct_base_ep_flush,
    .ep_fence                 = uct_base_ep_fence,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_cuda_ipc_ns_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_cuda_ipc_ns_ep_t),
    .iface_flush              = uct_base_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = (uct_iface_progress_func_t)ucs_empty_function_return_zero,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_cuda_ipc_ns_iface_t),
    .iface_query              = uct_cuda_ipc_ns_iface_query,
    .iface_get_device_address = uct_cuda_ipc_ns_iface_get_device_address,
    .iface_get_address        = uct_cuda_ipc_ns_iface_get_address,
    .iface_is_reachable       = uct_cuda_ipc_ns_iface_is_reachable
};


static UCS_CLASS_INIT_FUNC(uct_cuda_ipc_ns_iface_t, uct_md_h tl_md,
                           uct_worker_h worker, const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_cuda_ipc_ns_iface_config_t *config =
            ucs_derived_of(tl_config, uct_cuda_ipc_ns_iface_config_t);
    uct_cuda_ipc_ns_md_t *md = ucs_derived_of(tl_md, uct_cuda_ipc_ns_md_t);
    const uct_cuda_ipc_ns_identity_t *id = uct_cuda_ipc_ns_self();

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_cuda_ipc_ns_iface_ops,
                              &uct_base_iface_internal_ops, tl_md, worker,
                              params, tl_config
                              UCS_STATS_ARG(params->stats_root)
                              UCS_STATS_ARG(UCT_CUDA_IPC_NS_NAME));

    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE) ||
        strcmp(params->mode.device.dev_name, UCT_CUDA_IPC_NS_DEV_NAME)) {
        ucs_error("cuda_ipc_ns: no device '%s' (only '%s')",
                  (params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE) ?
                  params->mode.device.dev_name : "<none>",
                  UCT_CUDA_IPC_NS_DEV_NAME);
        return UCS_ERR_NO_DEVICE;
    }

    if ((config->max_poll == 0) || (config->max_streams == 0) ||
        (config->max_events == 0)) {
        ucs_error("cuda_ipc_ns: UCX_CUDA_IPC_NS_MAX_POLL, _MAX_STREAMS and "
                  "_MAX_EVENTS must be positive");
        return UCS_ERR_INVALID_PARAM;
    }

    self->config.max_poll    = config->max_poll;
    self->config.max_streams = config->max_streams;
    self->config.max_events  = config->max_events;
    self->config.bandwidth   = config->bandwidth;
    self->config.latency     = config->latency;
    self->config.overhead    = config->overhead;

    self->dev_addr.system_id = id->system_id;
    self->dev_addr.flags     = md->addr_flags;
    self->iface_addr.pid     = id->pid;
    self->iface_addr.pid_ns  = id->pid_ns;
    self->iface_addr.flags   = md->addr_flags;
    return UCS_OK;
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_ipc_ns_iface_t)
{
}


UCS_CLASS_DEFINE(uct_cuda_ipc_ns_iface_t, uct_base_iface_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t, uct_md_h,
                          uct_worker_h, const uct_iface_params_t*,
                          const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t);
