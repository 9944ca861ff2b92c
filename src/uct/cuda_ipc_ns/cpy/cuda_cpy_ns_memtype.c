/*
 * cuda_cpy_ns: memory-type detection for UCP (see cuda_cpy_ns_memtype.h and
 * docs/ucp.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_memtype.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_compat.h"

#include <ucs/config/global_opts.h>
#include <ucs/debug/log.h>
#include <ucs/memory/memtype_cache.h>
#include <ucs/sys/compiler_def.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>


ucs_status_t uct_cuda_cpy_ns_memtype_detect(uct_md_h md,
                                            const void *address,
                                            size_t length,
                                            ucs_memory_type_t *mem_type_p)
{
    uct_cuda_ipc_ns_ptr_info_t info;

    uct_cuda_ipc_ns_ptr_query(address, &info);
    *mem_type_p = info.is_cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    return UCS_OK;
}


static void uct_cuda_cpy_ns_memtype_cache_do_setup(void)
{
    ucs_memory_info_t mem_info;
    char probe;

    if ((ucs_global_opts.enable_memtype_cache == UCS_TRY) &&
        (getenv("UCX_MEMTYPE_CACHE") == NULL)) {
        /* Nothing fills the cache in this UCX build (no UCM CUDA hooks), so
         * a miss would class an application's CUDA buffer as host memory */
        ucs_global_opts.enable_memtype_cache = UCS_NO;
        ucs_debug("cuda_cpy_ns: memtype cache turned off, buffers are "
                  "classified by the CUDA driver (set UCX_MEMTYPE_CACHE=y to "
                  "keep the cache: then only memory allocated through UCP is "
                  "known as CUDA memory)");
        return;
    }

    if (ucs_global_opts.enable_memtype_cache != UCS_NO) {
        /* a lookup creates the cache, so that our allocations are recorded */
        (void)ucs_memtype_cache_lookup(&probe, sizeof(probe), &mem_info);
        ucs_debug("cuda_cpy_ns: memtype cache kept as configured: %s",
                  (ucs_memtype_cache_global_instance != NULL) ? "in use" :
                  "unavailable");
    }
}


void uct_cuda_cpy_ns_memtype_cache_setup(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, uct_cuda_cpy_ns_memtype_cache_do_setup);
}


void uct_cuda_cpy_ns_memtype_cache_add(const void *address, size_t length)
{
    /* a no-op when the cache was never created */
    uct_cuda_ipc_ns_compat_memtype_cache_update(address, length);
}


void uct_cuda_cpy_ns_memtype_cache_remove(const void *address, size_t length)
{
    /* unlike update, remove needs the cache to exist */
    if (ucs_memtype_cache_global_instance != NULL) {
        ucs_memtype_cache_remove(address, length);
    }
}
