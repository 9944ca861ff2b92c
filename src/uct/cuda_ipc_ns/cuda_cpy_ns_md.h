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
#define UCT_CUDA_CPY_NS_TL_NAME    "cu_cpy_ns"   /* transport */
/* not "cuda": UCP drops an iface when another one on the same device name
 * has its capabilities and better performance (ucp_worker.c) */
#define UCT_CUDA_CPY_NS_DEV_NAME   "cuda_cpy"
#define UCT_CUDA_CPY_NS_CFG_PREFIX "CUDA_CPY_NS_"


typedef struct uct_cuda_cpy_ns_md_config {
    uct_md_config_t super;
    int             mem_alloc; /* uct_cuda_cpy_ns_alloc_mode_t */
} uct_cuda_cpy_ns_md_config_t;


typedef struct uct_cuda_cpy_ns_md {
    uct_md_t                     super;
    uct_cuda_cpy_ns_alloc_mode_t alloc_mode;
} uct_cuda_cpy_ns_md_t;


extern uct_component_t uct_cuda_cpy_ns_component;
extern ucs_config_field_t uct_cuda_cpy_ns_md_config_table[];

ucs_status_t uct_cuda_cpy_ns_query_md_resources(uct_component_t *component,
                                                uct_md_resource_desc_t **resources_p,
                                                unsigned *num_resources_p);

ucs_status_t uct_cuda_cpy_ns_md_open(uct_component_t *component,
                                     const char *md_name,
                                     const uct_md_config_t *config,
                                     uct_md_h *md_p);

ucs_status_t uct_cuda_cpy_ns_rkey_unpack(uct_component_t *component,
                                         const void *rkey_buffer,
                                         uct_rkey_t *rkey_p, void **handle_p);

/**
 * The allocation mode configured by UCX_CUDA_CPY_NS_MEM_ALLOC, for
 * allocations made outside an MD (the ucx_perftest allocator).
 */
ucs_status_t uct_cuda_cpy_ns_config_alloc_mode(uct_cuda_cpy_ns_alloc_mode_t *mode_p);

#endif
