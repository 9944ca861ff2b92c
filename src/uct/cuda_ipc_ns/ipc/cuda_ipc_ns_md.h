/*
 * cuda_ipc_ns: memory domain — registration and export of CUDA memory.
 */
#ifndef UCT_CUDA_IPC_NS_MD_H
#define UCT_CUDA_IPC_NS_MD_H

#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_cache.h"

#include <uct/base/uct_md.h>


#define UCT_CUDA_IPC_NS_NAME      "cuda_ipc_ns" /* component and MD */
#define UCT_CUDA_IPC_NS_DEV_NAME  "cuda"   /* as UCX names CUDA devices */


typedef struct uct_cuda_ipc_ns_md_config {
    uct_md_config_t          super;
    int                      legacy;        /* export legacy IPC handles */
    int                      posix_fd;      /* export VMM POSIX fds */
    int                      owner_copy;    /* copy unshareable memory for peers */
    int                      legacy_direct; /* ucs_ternary_auto_value_t */
    int                      fdx_mode;      /* uct_cuda_ipc_ns_broker_proto_fdx_mode_t */
    char                     *sock_dir;     /* broker socket directory */
    double                   sock_timeout;  /* fd exchange timeout, seconds */
    double                   sock_req_timeout; /* broker's request deadline */
    int                      allowed_uid;   /* extra uid served by the broker */
    int                      userns_peers;  /* cuda_ipc_ns_userns.h */
    int                      cache_enable;  /* keep peer mappings */
    unsigned                 cache_max_regions;
    size_t                   cache_max_size;
} uct_cuda_ipc_ns_md_config_t;


typedef struct uct_cuda_ipc_ns_md {
    uct_md_t   super;
    int        legacy;    /* export legacy handles */
    int        posix_fd;  /* export VMM POSIX fds */
    /* register legacy memory and VMM memory without a shareable handle type
     * with our broker for copies by us (docs/owner-copies.md) */
    int        owner_copy;
    uint8_t    addr_flags; /* UCT_CUDA_IPC_NS_ADDR_FLAG_*: what we can do */
    uct_cuda_ipc_ns_broker_proto_fdx_config_t fdx;     /* importing peers' fds */
    char                         *sock_dir; /* owns fdx.sock_dir */
    uct_cuda_ipc_ns_broker_t     *broker; /* serves our fds, or NULL */
} uct_cuda_ipc_ns_md_t;


/* Registration of a CUDA allocation: what mkey_pack needs */
typedef struct uct_cuda_ipc_ns_md_memh {
    uct_cuda_ipc_ns_rkey_info_t info;
    int                         fd;       /* exported POSIX fd, or -1 */
    /* fd, chunks or range (owner copies) registered with the broker */
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    /* registrations of ranges a key was packed for past this one's end
     * (UCP packs for the buffer it sends): each covers one such range,
     * pushed once and kept until this one is deregistered */
    struct uct_cuda_ipc_ns_md_memh *wider;
} uct_cuda_ipc_ns_md_memh_t;


/**
 * Pack into @a rkey_buffer the key of @a memh for UCP's use of
 * @a address..+@a length (@a address NULL: the registration's own key).
 * A range past the end of the VMM memory @a memh registered (UCP's
 * registration cache registers the one chunk UCX's cuda_copy reports and
 * sends a buffer across the chunks after it) gets the key of a wider
 * registration that covers it, made once and kept with @a memh
 * (docs/framework-memory.md); UCS_ERR_INVALID_PARAM, logged, when the range
 * is not VMM memory mapped back to back. Keys of other memory describe
 * their allocation: a peer's access beyond it fails the range check against
 * the key (docs/architecture.md).
 */
ucs_status_t uct_cuda_ipc_ns_md_pack_range(uct_cuda_ipc_ns_md_t *md,
                                           uct_cuda_ipc_ns_md_memh_t *memh,
                                           void *address, size_t length,
                                           void *rkey_buffer);


/* Unpacked remote key */
typedef struct uct_cuda_ipc_ns_md_rkey {
    uct_cuda_ipc_ns_rkey_info_t          info;
    /* owner's cache entry when it is not the endpoint's peer, found on
     * first use; referenced until the key is released */
    uct_cuda_ipc_ns_cache_peer_t         *peer;
    /* a key of several allocations: their layout, asked of the owner on
     * first use (published once, atomically); NULL until then */
    uct_cuda_ipc_ns_broker_proto_chunk_t *chunks;
    /* memory we cannot map (legacy, of another PID namespace; a copy key):
     * puts and gets are copies its owner makes (docs/owner-copies.md) */
    int                                  owner_copy;
    /* owner_copy: the key's GPU is one we can use (else the copies stage
     * through pinned host memory), asked once here, not on each post */
    int                                  owner_gpu_usable;
    /* a legacy key of another PID namespace that we open ourselves, and
     * whose owner copies it for us if the open fails: owner_copy is set
     * then (cuda_ipc_ns_legacy_direct.h) */
    int                                  direct_fallback;
} uct_cuda_ipc_ns_md_rkey_t;


extern uct_component_t uct_cuda_ipc_ns_component;
extern ucs_config_field_t uct_cuda_ipc_ns_md_config_table[];

#endif
