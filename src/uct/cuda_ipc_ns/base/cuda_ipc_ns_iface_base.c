/*
 * cuda_ipc_ns: base class of both transports' interfaces (see
 * cuda_ipc_ns_iface_base.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_iface_base.h"
#include "cuda_ipc_ns_nsid.h"

#include <uct/base/uct_md.h>

#include <ucs/debug/log.h>
#include <ucs/type/class.h>
#include <inttypes.h>
#include <string.h>


/* Zero-copy of any size and alignment, @a _max_iov entries; for the put
 * and get capabilities, which are distinct structure types */
#define UCT_CUDA_IPC_NS_IFACE_ZCOPY_CAPS(_cap, _max_iov) \
    do { \
        (_cap).min_zcopy       = 0; \
        (_cap).max_zcopy       = SIZE_MAX; \
        (_cap).opt_zcopy_align = 1; \
        (_cap).align_mtu       = 1; \
        (_cap).max_iov         = (_max_iov); \
    } while (0)


void uct_cuda_ipc_ns_iface_base_query(uct_cuda_ipc_ns_iface_base_t *iface,
                                      uct_iface_attr_t *attr, size_t max_iov)
{
    uct_base_iface_query(&iface->super, attr);
    attr->iface_addr_len      = UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE;
    attr->device_addr_len     = UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE;
    attr->ep_addr_len         = 0;
    attr->max_conn_priv       = 0;
    attr->latency             = ucs_linear_func_make(iface->perf.latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->perf.bandwidth;
    attr->overhead            = iface->perf.overhead;
    attr->priority            = 0;
    UCT_CUDA_IPC_NS_IFACE_ZCOPY_CAPS(attr->cap.put, max_iov);
    UCT_CUDA_IPC_NS_IFACE_ZCOPY_CAPS(attr->cap.get, max_iov);
}


ucs_status_t
uct_cuda_ipc_ns_iface_base_get_device_address(uct_iface_h tl_iface,
                                              uct_device_addr_t *addr)
{
    uct_cuda_ipc_ns_addr_device_pack(
            &ucs_derived_of(tl_iface, uct_cuda_ipc_ns_iface_base_t)->dev_addr,
            addr);
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_iface_base_get_address(uct_iface_h tl_iface,
                                                    uct_iface_addr_t *addr)
{
    uct_cuda_ipc_ns_addr_iface_pack(
            &ucs_derived_of(tl_iface, uct_cuda_ipc_ns_iface_base_t)->iface_addr,
            addr);
    return UCS_OK;
}


int uct_cuda_ipc_ns_iface_base_is_reachable(const uct_iface_h tl_iface,
                                            const uct_device_addr_t *dev_addr,
                                            const uct_iface_addr_t *iface_addr)
{
    uct_cuda_ipc_ns_iface_base_t *iface =
            ucs_derived_of(tl_iface, uct_cuda_ipc_ns_iface_base_t);
    uct_cuda_ipc_ns_addr_device_t remote_dev;
    uct_cuda_ipc_ns_addr_iface_t remote_iface;
    const char *reason;

    if (uct_cuda_ipc_ns_addr_parse_remote(dev_addr, iface_addr, &remote_dev,
                                          &remote_iface) != UCS_OK) {
        return 0;
    }

    if (!iface->reachable(&iface->dev_addr, &iface->iface_addr, &remote_dev,
                          &remote_iface, &reason)) {
        ucs_debug("%s: pid %u in PID namespace %" PRIu64 " is unreachable: %s",
                  iface->super.md->component->name, remote_iface.pid,
                  remote_iface.pid_ns, reason);
        return 0;
    }

    return 1;
}


UCS_CLASS_INIT_FUNC(uct_cuda_ipc_ns_iface_base_t, uct_iface_ops_t *ops,
                    uct_iface_internal_ops_t *internal_ops, uct_md_h md,
                    uct_worker_h worker, const uct_iface_params_t *params,
                    const uct_iface_config_t *tl_config, const char *dev_name,
                    uint8_t addr_flags,
                    uct_cuda_ipc_ns_addr_reach_func_t reachable)
{
    const uct_cuda_ipc_ns_nsid_identity_t *id = uct_cuda_ipc_ns_nsid_self();

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, ops, internal_ops, md, worker,
                              params, tl_config
                              UCS_STATS_ARG(params->stats_root)
                              UCS_STATS_ARG(md->component->name));

    /* the completion queues take no lock; UCP opens SERIALIZED workers
     * (a MULTI UCP worker serializes its UCT worker itself) */
    if (ucs_derived_of(worker, uct_priv_worker_t)->thread_mode ==
        UCS_THREAD_MODE_MULTI) {
        ucs_error("%s: a multi-threaded worker is not supported (use "
                  "UCS_THREAD_MODE_SERIALIZED)", md->component->name);
        return UCS_ERR_INVALID_PARAM;
    }

    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE) ||
        strcmp(params->mode.device.dev_name, dev_name)) {
        ucs_error("%s: no device '%s' (only '%s')", md->component->name,
                  (params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE) ?
                  params->mode.device.dev_name : "<none>", dev_name);
        return UCS_ERR_NO_DEVICE;
    }

    self->dev_addr.system_id    = id->system_id;
    self->dev_addr.flags        = addr_flags;
    self->iface_addr.pid        = id->pid;
    self->iface_addr.pid_ns     = id->pid_ns;
    self->iface_addr.start_time = id->start_time;
    self->iface_addr.flags      = addr_flags;
    self->reachable             = reachable;
    self->perf.bandwidth        = 0;
    self->perf.latency          = 0;
    self->perf.overhead         = 0;
    return UCS_OK;
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_ipc_ns_iface_base_t)
{
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}


UCS_CLASS_DEFINE(uct_cuda_ipc_ns_iface_base_t, uct_base_iface_t);


UCS_CLASS_INIT_FUNC(uct_cuda_ipc_ns_iface_base_ep_t, const uct_ep_params_t *params)
{
    uct_cuda_ipc_ns_iface_base_t *iface =
            ucs_derived_of(params->iface, uct_cuda_ipc_ns_iface_base_t);
    const char *name = iface->super.md->component->name;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    self->remote_dev = iface->dev_addr;
    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) ||
        (uct_cuda_ipc_ns_addr_iface_parse(params->iface_addr,
                                          UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE,
                                          &self->remote_iface) != UCS_OK)) {
        ucs_error("%s: ep_create needs the peer's iface address", name);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) &&
        (uct_cuda_ipc_ns_addr_device_parse(params->dev_addr,
                                           UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE,
                                           &self->remote_dev) != UCS_OK)) {
        ucs_error("%s: invalid peer device address", name);
        return UCS_ERR_INVALID_PARAM;
    }

    return UCS_OK;
}


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_ipc_ns_iface_base_ep_t)
{
}


UCS_CLASS_DEFINE(uct_cuda_ipc_ns_iface_base_ep_t, uct_base_ep_t);


int uct_cuda_ipc_ns_iface_base_ep_is_connected(const uct_cuda_ipc_ns_iface_base_ep_t *ep,
                                               const uct_device_addr_t *dev_addr,
                                               const uct_iface_addr_t *iface_addr)
{
    uct_cuda_ipc_ns_addr_device_t remote_dev;
    uct_cuda_ipc_ns_addr_iface_t remote_iface;

    if ((dev_addr != NULL) &&
        ((uct_cuda_ipc_ns_addr_device_parse(dev_addr,
                                            UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE,
                                            &remote_dev) != UCS_OK) ||
         (remote_dev.system_id != ep->remote_dev.system_id))) {
        return 0;
    }

    return (iface_addr != NULL) &&
           (uct_cuda_ipc_ns_addr_iface_parse(iface_addr,
                                             UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE,
                                             &remote_iface) == UCS_OK) &&
           (remote_iface.pid == ep->remote_iface.pid) &&
           (remote_iface.pid_ns == ep->remote_iface.pid_ns) &&
           (remote_iface.start_time == ep->remote_iface.start_time);
}
