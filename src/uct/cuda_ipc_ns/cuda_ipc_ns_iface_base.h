/*
 * cuda_ipc_ns: base class of both transports' interfaces (cu_ipc_ns and the
 * loopback copy transport cu_cpy_ns): the device it opens on, its own
 * addresses (cuda_ipc_ns_addr.h), its reachability rule, the performance
 * figures it reports, and the attributes and operations both report alike
 * (docs/architecture.md).
 */
#ifndef UCT_CUDA_IPC_NS_IFACE_BASE_H
#define UCT_CUDA_IPC_NS_IFACE_BASE_H

#include "cuda_ipc_ns_addr.h"

#include <uct/base/uct_iface.h>


typedef struct uct_cuda_ipc_ns_iface_base {
    uct_base_iface_t                  super;
    uct_cuda_ipc_ns_device_addr_t     dev_addr;   /* ours */
    uct_cuda_ipc_ns_iface_addr_t      iface_addr; /* ours */
    uct_cuda_ipc_ns_addr_reach_func_t reachable;  /* the transport's rule */
    struct {
        double bandwidth; /* bytes/s */
        double latency;   /* seconds */
        double overhead;  /* seconds */
    } perf;               /* reported to UCP; set by the derived class */
} uct_cuda_ipc_ns_iface_base_t;


/*
 * Arguments of the base init after uct_base_iface_t's: the transport's
 * device name (the only one it opens on), the capability flags its
 * addresses carry (UCT_CUDA_IPC_NS_ADDR_FLAG_*) and its reachability rule.
 */
UCS_CLASS_DECLARE(uct_cuda_ipc_ns_iface_base_t, uct_iface_ops_t*,
                  uct_iface_internal_ops_t*, uct_md_h, uct_worker_h,
                  const uct_iface_params_t*, const uct_iface_config_t*,
                  const char*, uint8_t, uct_cuda_ipc_ns_addr_reach_func_t);


/**
 * The attributes both transports report alike: base attributes, address
 * sizes, the performance figures, and zero-copy put and get of any size and
 * alignment with at most @a max_iov entries. The caller adds its
 * capability flags and short/bcopy limits.
 */
void uct_cuda_ipc_ns_iface_base_query(uct_cuda_ipc_ns_iface_base_t *iface,
                                      uct_iface_attr_t *attr, size_t max_iov);

/* Operations of both ops tables */
ucs_status_t
uct_cuda_ipc_ns_iface_base_get_device_address(uct_iface_h tl_iface,
                                              uct_device_addr_t *addr);

ucs_status_t uct_cuda_ipc_ns_iface_base_get_address(uct_iface_h tl_iface,
                                                    uct_iface_addr_t *addr);

/** Parse the peer's addresses and apply the transport's rule. */
int uct_cuda_ipc_ns_iface_base_is_reachable(const uct_iface_h tl_iface,
                                            const uct_device_addr_t *dev_addr,
                                            const uct_iface_addr_t *iface_addr);



/*
 * The operations both ops tables list alike. The base class's:
 * progress control, addresses and reachability.
 */
#define UCT_CUDA_IPC_NS_IFACE_BASE_OPS \
    .iface_progress_enable    = uct_base_iface_progress_enable, \
    .iface_progress_disable   = uct_base_iface_progress_disable, \
    .iface_get_device_address = uct_cuda_ipc_ns_iface_base_get_device_address, \
    .iface_get_address        = uct_cuda_ipc_ns_iface_base_get_address, \
    .iface_is_reachable       = uct_cuda_ipc_ns_iface_base_is_reachable

/* Creating and destroying endpoints (class _prefix##_ep_t) and closing the
 * interface (class _prefix##_iface_t) */
#define UCT_CUDA_IPC_NS_IFACE_CLASS_OPS(_prefix) \
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(_prefix##_ep_t), \
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(_prefix##_ep_t), \
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(_prefix##_iface_t)


/*
 * Define _prefix##_ep_put_zcopy and _prefix##_ep_get_zcopy, of storage class
 * @a _scope (static or empty), as @a _copy(tl_ep, iov, iovcnt, remote_addr,
 * rkey, comp, is_put) in either direction, counted in the endpoint's
 * statistics when they succeed.
 */
#define UCT_CUDA_IPC_NS_EP_ZCOPY_DEFINE(_scope, _prefix, _copy) \
    UCT_CUDA_IPC_NS_EP_ZCOPY_FUNC(_scope, _prefix##_ep_put_zcopy, _copy, PUT, 1) \
    UCT_CUDA_IPC_NS_EP_ZCOPY_FUNC(_scope, _prefix##_ep_get_zcopy, _copy, GET, 0)

/* The ops table entries of the functions UCT_CUDA_IPC_NS_EP_ZCOPY_DEFINE
 * defines */
#define UCT_CUDA_IPC_NS_EP_ZCOPY_OPS(_prefix) \
    .ep_put_zcopy             = _prefix##_ep_put_zcopy, \
    .ep_get_zcopy             = _prefix##_ep_get_zcopy

#define UCT_CUDA_IPC_NS_EP_ZCOPY_FUNC(_scope, _name, _copy, _OP, _is_put) \
    _scope ucs_status_t _name(uct_ep_h tl_ep, const uct_iov_t *iov, \
                              size_t iovcnt, uint64_t remote_addr, \
                              uct_rkey_t rkey, uct_completion_t *comp) \
    { \
        ucs_status_t status = _copy(tl_ep, iov, iovcnt, remote_addr, rkey, \
                                    comp, _is_put); \
        \
        UCT_TL_EP_STAT_OP_IF_SUCCESS(status, \
                                     ucs_derived_of(tl_ep, uct_base_ep_t), \
                                     _OP, ZCOPY, \
                                     uct_iov_total_length(iov, iovcnt)); \
        return status; \
    }


/*
 * Define transport @a _tl (a token of at most 9 characters, the limit of UCX
 * 1.13.1's char[UCT_TL_NAME_MAX]) of @a _component on the single device
 * @a _dev_name: its iface class _prefix##_iface_t, derived from the base
 * class, with static new and delete functions (its init and cleanup defined
 * before), configured by _prefix##_iface_config_table under
 * UCX_<_cfg_prefix>; and register the component and the transport from the
 * library's constructor: preloading the library is the activation.
 */
#define UCT_CUDA_IPC_NS_TL_DEFINE(_component, _tl, _prefix, _dev_name, \
                                  _cfg_prefix) \
    UCS_CLASS_DEFINE(_prefix##_iface_t, uct_cuda_ipc_ns_iface_base_t); \
    static UCS_CLASS_DEFINE_NEW_FUNC(_prefix##_iface_t, uct_iface_t, uct_md_h, \
                                     uct_worker_h, const uct_iface_params_t*, \
                                     const uct_iface_config_t*); \
    static UCS_CLASS_DEFINE_DELETE_FUNC(_prefix##_iface_t, uct_iface_t); \
    \
    _Static_assert(sizeof(#_tl) <= UCT_TL_NAME_MAX, \
                   "transport name too long for UCX 1.13.1"); \
    \
    static ucs_status_t _prefix##_query_devices( \
            uct_md_h md, uct_tl_device_resource_t **devices_p, \
            unsigned *num_devices_p) \
    { \
        return uct_single_device_resource(md, _dev_name, UCT_DEVICE_TYPE_ACC, \
                                          UCS_SYS_DEVICE_ID_UNKNOWN, \
                                          devices_p, num_devices_p); \
    } \
    \
    UCT_TL_DEFINE_ENTRY(_component, _tl, _prefix##_query_devices, \
                        _prefix##_iface_t, _cfg_prefix, \
                        _prefix##_iface_config_table, \
                        _prefix##_iface_config_t); \
    \
    UCT_SINGLE_TL_INIT(_component, _tl, ctor,,)

#endif
