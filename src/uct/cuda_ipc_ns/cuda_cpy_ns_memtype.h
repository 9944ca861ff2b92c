/*
 * cuda_cpy_ns: memory-type detection for UCP (docs/ucp.md).
 *
 * UCP classifies a buffer through the memtype cache and, on a miss that the
 * cache cannot answer, through the detecting MD's mem_query. UCX 1.13.1 from
 * Debian has no UCM CUDA hooks, so the cache stays empty and would class
 * every CUDA pointer as host memory; unless the user configured the cache,
 * the copy MD turns it off so that every classification asks the driver.
 */
#ifndef UCT_CUDA_CPY_NS_MEMTYPE_H
#define UCT_CUDA_CPY_NS_MEMTYPE_H

#include <uct/api/uct.h>
#include <cuda.h>


/* What the driver says about one address */
typedef struct uct_cuda_cpy_ns_ptr_info {
    int         is_cuda; /* device memory known to the driver */
    int         device;  /* its device ordinal */
    CUdeviceptr base;    /* its allocation (range) */
    size_t      size;
} uct_cuda_cpy_ns_ptr_info_t;


/**
 * Classify @a address with one driver call (cuPointerGetAttributes). Host and
 * unknown memory give is_cuda == 0; a failing driver call is logged at debug
 * level and classifies the address as host memory.
 */
void uct_cuda_cpy_ns_ptr_query(const void *address,
                               uct_cuda_cpy_ns_ptr_info_t *info);


/** The copy MD's mem_query: UCS_ERR_INVALID_ADDR for non-CUDA memory */
ucs_status_t uct_cuda_cpy_ns_md_mem_query(uct_md_h md, const void *address,
                                          size_t length,
                                          uct_md_mem_attr_t *mem_attr);


/** The copy MD's detect_memory_type: CUDA or host */
ucs_status_t uct_cuda_cpy_ns_md_detect_memory_type(uct_md_h md,
                                                   const void *address,
                                                   size_t length,
                                                   ucs_memory_type_t *mem_type_p);


/**
 * Apply the memtype cache policy once per process: when UCX_MEMTYPE_CACHE is
 * not set in the environment and has its default value, turn the cache off;
 * when the cache stays on, create it now so that the allocations of
 * uct_cuda_cpy_ns_memtype_cache_add() are recorded.
 */
void uct_cuda_cpy_ns_memtype_cache_setup(void);


/** Record / forget a CUDA allocation in the memtype cache, if it exists */
void uct_cuda_cpy_ns_memtype_cache_add(const void *address, size_t length);

void uct_cuda_cpy_ns_memtype_cache_remove(const void *address, size_t length);

#endif
