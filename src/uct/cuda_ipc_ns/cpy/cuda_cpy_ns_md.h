/*
 * cuda_cpy_ns: memory domain of the loopback copy transport — CUDA memory
 * allocation for UCP, memory-type detection, trivial registration (no remote
 * keys: the transport reaches only its own process). See docs/ucp.md.
 */
#ifndef UCT_CUDA_CPY_NS_MD_H
#define UCT_CUDA_CPY_NS_MD_H

#include "cuda_cpy_ns_alloc.h"

#include <uct/base/uct_md.h>


#define UCT_CUDA_CPY_NS_NAME       "cuda_cpy_ns" /* component and MD */
/* not "cuda": UCP drops an iface when another one on the same device name
 * has its capabilities and better performance (ucp_worker.c) */
#define UCT_CUDA_CPY_NS_DEV_NAME   "cuda_cpy"
#define UCT_CUDA_CPY_NS_CFG_PREFIX "CUDA_CPY_NS_"


/* Whether the copy transport offers itself (UCX_CUDA_CPY_NS_ENABLE) */
typedef enum {
    UCT_CUDA_CPY_NS_ENABLE_NO,
    UCT_CUDA_CPY_NS_ENABLE_YES,
    UCT_CUDA_CPY_NS_ENABLE_AUTO  /* unless UCX has its own CUDA copy */
} uct_cuda_cpy_ns_md_enable_t;


/* The component of UCX's own CUDA copy transport (UCX built with CUDA) */
#define UCT_CUDA_CPY_NS_STOCK_COMPONENT "cuda_cpy"


typedef struct uct_cuda_cpy_ns_md_config {
    uct_md_config_t super;
    int             enable;    /* uct_cuda_cpy_ns_md_enable_t */
    int             mem_alloc; /* uct_cuda_cpy_ns_alloc_mode_t */
} uct_cuda_cpy_ns_md_config_t;


typedef struct uct_cuda_cpy_ns_md {
    uct_md_t                     super;
    uct_cuda_cpy_ns_alloc_mode_t alloc_mode;
} uct_cuda_cpy_ns_md_t;


extern uct_component_t uct_cuda_cpy_ns_component;
extern ucs_config_field_t uct_cuda_cpy_ns_md_config_table[];

/**
 * The allocation mode configured by UCX_CUDA_CPY_NS_MEM_ALLOC, for
 * allocations made outside an MD (the ucx_perftest allocator).
 */
ucs_status_t uct_cuda_cpy_ns_md_configured_alloc_mode(uct_cuda_cpy_ns_alloc_mode_t *mode_p);

#endif
