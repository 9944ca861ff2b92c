/*
 * cuda_ipc_ns: interface — addresses, reachability, capabilities, progress,
 * wakeup and pending requests (docs/architecture.md).
 */
#ifndef UCT_CUDA_IPC_NS_IFACE_H
#define UCT_CUDA_IPC_NS_IFACE_H

#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_stream.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/queue_types.h>


/* Copies one put/get may gather (one per iov entry, one event) */
#define UCT_CUDA_IPC_NS_MAX_IOV  16


typedef struct uct_cuda_ipc_ns_iface_config {
    uct_iface_config_t super;
    unsigned           max_poll;     /* completions handled per progress */
    unsigned           max_streams;  /* streams per context */
    unsigned           max_events;   /* ops in flight, UINT_MAX: no limit */
    double             bandwidth;    /* bytes/s, or UCS_CONFIG_BW_AUTO */
    ucs_time_t         latency;      /* or UCS_TIME_AUTO */
    ucs_time_t         overhead;     /* or UCS_TIME_AUTO */
} uct_cuda_ipc_ns_iface_config_t;


typedef struct uct_cuda_ipc_ns_iface {
    uct_base_iface_t              super;
    uct_cuda_ipc_ns_device_addr_t dev_addr;   /* ours */
    uct_cuda_ipc_ns_iface_addr_t  iface_addr; /* ours */
    uct_cuda_ipc_ns_cq_t          cq;         /* copies in flight */
    ucs_queue_head_t              pending_q;  /* waiting for an event */
    int                           fence;      /* next op waits for all */
    struct {
        double   bandwidth;  /* bytes/s */
        double   latency;    /* seconds */
        double   overhead;   /* seconds */
    } config;
} uct_cuda_ipc_ns_iface_t;


extern ucs_config_field_t uct_cuda_ipc_ns_iface_config_table[];

ucs_status_t uct_cuda_ipc_ns_query_devices(uct_md_h md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p);

UCS_CLASS_DECLARE_NEW_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t, uct_md_h,
                           uct_worker_h, const uct_iface_params_t*,
                           const uct_iface_config_t*);

/* Start pending requests while events are available */
void uct_cuda_ipc_ns_iface_dispatch_pending(uct_cuda_ipc_ns_iface_t *iface);

#endif
