/*
 * cuda_ipc_ns: the interface — its configuration, the copies in flight
 * (streams, owners' copies), the endpoints waiting for an event and the
 * fence (docs/architecture.md). Below the lanes and the endpoint, which
 * read it; cuda_ipc_ns_iface.c implements it.
 */
#ifndef UCT_CUDA_IPC_NS_IFACE_H
#define UCT_CUDA_IPC_NS_IFACE_H

#include "cuda_ipc_ns_iface_base.h"
#include "cuda_ipc_ns_cq.h"
#include "cuda_ipc_ns_copy_op.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/arbiter.h>


/* Copies one put/get may gather (one per iov entry, one event) */
#define UCT_CUDA_IPC_NS_MAX_IOV    16

/*
 * Short and bcopy operations exist for UCP's RMA lanes (docs/ucp.md): they
 * copy synchronously through the driver, from the caller's memory (short)
 * or from a host staging buffer of this size (bcopy). Puts above max_short
 * go zero-copy under UCP's default thresholds.
 */
#define UCT_CUDA_IPC_NS_MAX_SHORT  16383
#define UCT_CUDA_IPC_NS_MAX_BCOPY  65536


typedef struct uct_cuda_ipc_ns_iface_config {
    uct_iface_config_t super;
    unsigned           max_poll;     /* completions handled per progress */
    unsigned           max_streams;  /* streams per context */
    unsigned           max_events;   /* ops in flight, UINT_MAX: no limit */
    double             bandwidth;    /* bytes/s, or UCS_CONFIG_BW_AUTO */
    ucs_time_t         latency;      /* or UCS_TIME_AUTO */
    ucs_time_t         overhead;     /* or UCS_TIME_AUTO */
    unsigned           owner_copy_max_requests; /* per owner session */
    unsigned           owner_copy_staging_slots; /* per owner session */
    size_t             owner_copy_staging_slot_size;
    int                owner_copy_staging; /* uct_cuda_ipc_ns_staging_kind_t */
} uct_cuda_ipc_ns_iface_config_t;


typedef struct uct_cuda_ipc_ns_iface {
    uct_cuda_ipc_ns_iface_base_t       super;
    uct_cuda_ipc_ns_cq_t               cq;       /* copies in flight */
    uct_cuda_ipc_ns_copy_op_sessions_t copies;   /* copies made by owners */
    ucs_arbiter_t                      arbiter;  /* endpoints waiting for an event */
    int                                fence;    /* the next op comes after all
                                                  * ops in flight (every lane) */
    void                               *bounce;  /* bcopy staging, MAX_BCOPY */
    uct_worker_cb_id_t                 cancel_prog_id; /* progress while a
                                                        * canceled ep's copies run */
} uct_cuda_ipc_ns_iface_t;


#endif
