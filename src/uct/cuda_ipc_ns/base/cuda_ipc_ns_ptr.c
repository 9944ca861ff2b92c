/*
 * cuda_ipc_ns: pointer classification (see cuda_ipc_ns_ptr.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_driver.h"

#include <uct/base/uct_md.h>
#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <string.h>


void uct_cuda_ipc_ns_ptr_query(const void *address,
                               uct_cuda_ipc_ns_ptr_info_t *info)
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


/*
 * The end of the allocations mapped back to back from @a info's up to @a end
 * at most (a pool's chunks, docs/framework-memory.md): UCP registers what
 * mem_query reports, so a range over several allocations must be reported
 * whole. Only the queried range is walked.
 */
static uintptr_t uct_cuda_ipc_ns_ptr_extent_end(const uct_cuda_ipc_ns_ptr_info_t *info,
                                                uintptr_t end)
{
    uintptr_t next = info->base + info->size;
    uct_cuda_ipc_ns_ptr_info_t chunk;

    while (next < end) {
        uct_cuda_ipc_ns_ptr_query((void*)next, &chunk);
        if (!chunk.is_cuda || (chunk.base != next) || (chunk.size == 0) ||
            (chunk.device != info->device)) {
            break;
        }
        next += chunk.size;
    }
    return next;
}


ucs_status_t uct_cuda_ipc_ns_ptr_mem_query(uct_md_h md, const void *address,
                                           size_t length,
                                           uct_cuda_ipc_ns_mem_attr_t *mem_attr)
{
    uct_cuda_ipc_ns_ptr_info_t info;

    uct_cuda_ipc_ns_ptr_query(address, &info);
    if (!info.is_cuda) {
        return UCS_ERR_INVALID_ADDR;
    }

    ucs_trace("%s: %p..%p is CUDA memory of device %d, allocation 0x%llx/%zu",
              md->component->name, address,
              UCS_PTR_BYTE_OFFSET(address, length), info.device,
              (unsigned long long)info.base, info.size);

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
        mem_attr->alloc_length = uct_cuda_ipc_ns_ptr_extent_end(
                &info, (uintptr_t)address + length) - info.base;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_ptr_attr_get(const void *address,
                                          uct_cuda_ipc_ns_ptr_attr_t *attr)
{
    CUpointer_attribute names[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_CONTEXT,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
        CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
        CU_POINTER_ATTRIBUTE_BUFFER_ID
    };
    void *values[] = {
        &attr->memory_type, &attr->device, &attr->context, &attr->base,
        &attr->size, &attr->legacy_capable, &attr->handle_types,
        &attr->buffer_id
    };
    ucs_status_t status;

    memset(attr, 0, sizeof(*attr));
    /* unknown host memory is not an error: it answers memory type 0 */
    status = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes,
                                     ucs_static_array_size(names), names,
                                     values, (CUdeviceptr)address);
    if (status != UCS_OK) {
        return status;
    }

    return (attr->memory_type == CU_MEMORYTYPE_DEVICE) ? UCS_OK :
           UCS_ERR_INVALID_ADDR;
}


ucs_status_t uct_cuda_ipc_ns_ptr_export_fd(CUdeviceptr base,
                                           ucs_log_level_t log_level,
                                           int *fd_p)
{
    CUmemGenericAllocationHandle handle;
    ucs_status_t status;

    status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuMemRetainAllocationHandle,
                                     &handle, (void*)base);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuMemExportToShareableHandle,
                                     fd_p, handle,
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                     0);
    /* the exported fd keeps the allocation alive; drop our retain */
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
    return status;
}
