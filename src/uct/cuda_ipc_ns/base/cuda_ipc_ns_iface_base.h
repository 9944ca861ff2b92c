/*
 * cuda_ipc_ns: base class of both transports' interfaces (cu_ipc_ns and the
 * loopback copy transport cu_cpy_ns): the device it opens on, its own
 * addresses (cuda_ipc_ns_addr.h), its reachability rule, the performance
 * figures it reports, and the attributes and the address operations both
 * report alike (docs/architecture.md). Each transport writes its own ops
 * table and lists these operations there.
 */
#ifndef UCT_CUDA_IPC_NS_IFACE_BASE_H
#define UCT_CUDA_IPC_NS_IFACE_BASE_H

#include "cuda_ipc_ns_addr.h"

#include <uct/base/uct_iface.h>


typedef struct uct_cuda_ipc_ns_iface_base {
    uct_base_iface_t                  super;
    uct_cuda_ipc_ns_addr_device_t     dev_addr;   /* ours */
    uct_cuda_ipc_ns_addr_iface_t      iface_addr; /* ours */
    uct_cuda_ipc_ns_addr_reach_func_t reachable;  /* the transport's rule */
    struct {
        double bandwidth; /* bytes/s */
        double latency;   /* seconds */
        double overhead;  /* seconds */
    } perf;               /* reported to UCP; set by the derived class */
} uct_cuda_ipc_ns_iface_base_t;


/*
 * Base class of both transports' endpoints: the peer's addresses, parsed
 * once when the endpoint is created (the iface address is required, the
 * device address defaults to our own system's).
 */
typedef struct uct_cuda_ipc_ns_iface_base_ep {
    uct_base_ep_t                 super;
    uct_cuda_ipc_ns_addr_device_t remote_dev;
    uct_cuda_ipc_ns_addr_iface_t  remote_iface;
} uct_cuda_ipc_ns_iface_base_ep_t;

UCS_CLASS_DECLARE(uct_cuda_ipc_ns_iface_base_ep_t, const uct_ep_params_t*);


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

/** Whether @a ep is connected to the process at these packed addresses
 *  (the same system, PID namespace, pid and start time) */
int uct_cuda_ipc_ns_iface_base_ep_is_connected(const uct_cuda_ipc_ns_iface_base_ep_t *ep,
                                               const uct_device_addr_t *dev_addr,
                                               const uct_iface_addr_t *iface_addr);

/** Parse the peer's addresses and apply the transport's rule. */
int uct_cuda_ipc_ns_iface_base_is_reachable(const uct_iface_h tl_iface,
                                            const uct_device_addr_t *dev_addr,
                                            const uct_iface_addr_t *iface_addr);

#endif
