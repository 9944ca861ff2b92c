/*
 * cuda_cpy_ns: memory-type detection for UCP (see cuda_cpy_ns_memtype.h and
 * docs/ucp.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_memtype.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/config/global_opts.h>
#include <ucs/debug/log.h>
#include <ucs/memory/memtype_cache.h>
#include <ucs/sys/compiler_def.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>


void uct_cuda_cpy_ns_ptr_query(const void *address,
                               uct_cuda_cpy_ns_ptr_info_t *info)
{
    CUpointer_attribute names[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE
    };
    CUmemorytype memory_type = (CUmemorytype)0;
    void *values[]           = {
        &memory_type, &info->device, &info->base, &info->size
    };
    ucs_status_t status;

    memset(info, 0, sizeof(*info));
    /* unknown host memory is not an error: it answers memory type 0 */
    status = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes,
                                     ucs_static_array_size(names), names,
                                     values, (CUdeviceptr)address);
    info->is_cuda = (status == UCS_OK) &&
                    (memory_type == CU_MEMORYTYPE_DEVICE);
}


ucs_status_t uct_cuda_cpy_ns_md_mem_query(uct_md_h md, const void *address,
                                          size_t length,
                                          uct_md_mem_attr_t *mem_attr)
{
    uct_cuda_cpy_ns_ptr_info_t info;

    uct_cuda_cpy_ns_ptr_query(address, &info);
    if (!info.is_cuda) {
        /* UCP asks the next detecting MD, then assumes host memory */
        return UCS_ERR_INVALID_ADDR;
    }

    ucs_trace("cuda_cpy_ns: %p..%p is CUDA memory of device %d, allocation "
              "0x%llx/%zu", address, UCS_PTR_BYTE_OFFSET(address, length),
              info.device, (unsigned long long)info.base, info.size);

    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_MEM_TYPE) {
        mem_attr->mem_type = UCS_MEMORY_TYPE_CUDA;
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_SYS_DEV) {
        mem_attr->sys_dev = UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS) {
        mem_attr->base_address = (void*)info.base;
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH) {
        mem_attr->alloc_length = info.size;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_cpy_ns_md_detect_memory_type(uct_md_h md,
                                                   const void *address,
                                                   size_t length,
                                                   ucs_memory_type_t *mem_type_p)
{
    uct_cuda_cpy_ns_ptr_info_t info;

    uct_cuda_cpy_ns_ptr_query(address, &info);
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
    ucs_memtype_cache_update(address, length, UCS_MEMORY_TYPE_CUDA,
                             UCS_SYS_DEVICE_ID_UNKNOWN);
}


void uct_cuda_cpy_ns_memtype_cache_remove(const void *address, size_t length)
{
    /* unlike update, remove needs the cache to exist */
    if (ucs_memtype_cache_global_instance != NULL) {
        ucs_memtype_cache_remove(address, length);
    }
}
