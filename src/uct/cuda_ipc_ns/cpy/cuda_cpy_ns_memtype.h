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


/** The copy MD's detect_memory_type: CUDA or host */
ucs_status_t uct_cuda_cpy_ns_memtype_detect(uct_md_h md,
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
