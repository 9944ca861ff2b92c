/*
 * cuda_ipc_ns: interface attributes both transports (cu_ipc_ns, cu_cpy_ns)
 * report alike: address sizes (both use cuda_ipc_ns_addr.h), zero-copy
 * limits and the performance figures.
 */
#ifndef UCT_CUDA_IPC_NS_IFACE_ATTR_H
#define UCT_CUDA_IPC_NS_IFACE_ATTR_H

#include "cuda_ipc_ns_addr.h"

#include <uct/base/uct_iface.h>
#include <stdint.h>


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


/* The base attributes, addresses, and bandwidth (bytes/s), latency and
 * overhead (seconds) */
static inline void
uct_cuda_ipc_ns_iface_attr_init(uct_base_iface_t *iface, uct_iface_attr_t *attr,
                                double bandwidth, double latency,
                                double overhead)
{
    uct_base_iface_query(iface, attr);
    attr->iface_addr_len      = UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE;
    attr->device_addr_len     = UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE;
    attr->ep_addr_len         = 0;
    attr->max_conn_priv       = 0;
    attr->latency             = ucs_linear_func_make(latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = bandwidth;
    attr->overhead            = overhead;
    attr->priority            = 0;
}


/* Define static <_name>_get_device_address() and <_name>_get_address() for
 * iface type @a _type, which holds its own addresses in members dev_addr and
 * iface_addr */
#define UCT_CUDA_IPC_NS_IFACE_ADDRESS_FUNCS(_name, _type) \
    static ucs_status_t _name##_get_device_address(uct_iface_h tl_iface, \
                                                   uct_device_addr_t *addr) \
    { \
        uct_cuda_ipc_ns_device_addr_pack( \
                &ucs_derived_of(tl_iface, _type)->dev_addr, addr); \
        return UCS_OK; \
    } \
    \
    static ucs_status_t _name##_get_address(uct_iface_h tl_iface, \
                                            uct_iface_addr_t *addr) \
    { \
        uct_cuda_ipc_ns_iface_addr_pack( \
                &ucs_derived_of(tl_iface, _type)->iface_addr, addr); \
        return UCS_OK; \
    }

#endif
