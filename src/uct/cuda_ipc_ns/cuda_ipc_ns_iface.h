/*
 * cuda_ipc_ns: interface — addresses, reachability, progress.
 */
#ifndef UCT_CUDA_IPC_NS_IFACE_H
#define UCT_CUDA_IPC_NS_IFACE_H

#include "cuda_ipc_ns_addr.h"

#include <uct/base/uct_iface.h>


typedef struct uct_cuda_ipc_ns_iface_config {
    uct_iface_config_t super;
    unsigned           max_poll;     /* completions handled per progress */
    unsigned           max_streams;  /* streams per device */
    unsigned           max_events;   /* events in the pool, UINT_MAX: no limit */
    double             bandwidth;    /* bytes/s reported to UCP */
    double             latency;      /* seconds reported to UCP */
    double             overhead;     /* seconds reported to UCP */
} uct_cuda_ipc_ns_iface_config_t;


typedef struct uct_cuda_ipc_ns_iface {
    uct_base_iface_t              super;
    uct_cuda_ipc_ns_device_addr_t dev_addr;   /* ours */
    uct_cuda_ipc_ns_iface_addr_t  iface_addr; /* ours */
    struct {
        unsigned max_poll;
        unsigned max_streams;
        unsigned max_events;
        double   bandwidth;
        double   latency;
        double   overhead;
    } config;
} uct_cuda_ipc_ns_iface_t;


typedef struct uct_cuda_ipc_ns_ep {
    uct_base_ep_t                super;
    uct_cuda_ipc_ns_iface_addr_t remote; /* peer's iface address */
} uct_cuda_ipc_ns_ep_t;


extern ucs_config_field_t uct_cuda_ipc_ns_iface_config_table[];

ucs_status_t uct_cuda_ipc_ns_query_devices(uct_md_h md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p);

UCS_CLASS_DECLARE_NEW_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t, uct_md_h,
                           uct_worker_h, const uct_iface_params_t*,
                           const uct_iface_config_t*);

#endif
