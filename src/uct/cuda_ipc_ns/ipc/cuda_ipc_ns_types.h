/*
 * cuda_ipc_ns: the transport's objects — interface and endpoint — shared by
 * cuda_ipc_ns_iface.c, cuda_ipc_ns_ep.c and the lanes (cuda_ipc_ns_lane.h,
 * docs/architecture.md).
 */
#ifndef UCT_CUDA_IPC_NS_TYPES_H
#define UCT_CUDA_IPC_NS_TYPES_H

#include "cuda_ipc_ns_iface_base.h"
#include "cuda_ipc_ns_cache.h"
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
    uct_cuda_ipc_ns_iface_base_t super;
    uct_cuda_ipc_ns_cq_t         cq;       /* copies in flight */
    uct_cuda_ipc_ns_copies_t     copies;   /* copies made by owners */
    ucs_arbiter_t                arbiter;  /* endpoints waiting for an event */
    int                          fence;    /* the next op comes after all
                                            * ops in flight (every lane) */
    void                         *bounce;  /* bcopy staging, MAX_BCOPY */
    uct_worker_cb_id_t           cancel_prog_id; /* progress while a
                                                  * canceled ep's copies run */
} uct_cuda_ipc_ns_iface_t;


typedef struct uct_cuda_ipc_ns_ep {
    uct_cuda_ipc_ns_ep_base_t    super;       /* the peer's addresses */
    uct_cuda_ipc_ns_peer_t       *peer;       /* its cache entry */
    uct_cuda_ipc_ns_op_list_t    ops;         /* its ops in flight, every
                                               * lane, and its fence */
    ucs_arbiter_group_t          arb_group;   /* its pending requests */
    /* an op was refused until copies outstanding complete (fence, or an
     * owner's session full): pending requests wait for a completion */
    int                          must_wait;
    int                          failed;      /* peer failure reported */
    int                          canceled;    /* flushed with CANCEL */
} uct_cuda_ipc_ns_ep_t;


#endif
