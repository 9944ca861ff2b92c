/*
 * cuda_ipc_ns: pointer classification (see cuda_ipc_ns_ptr.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_ctx.h"

#include <uct/base/uct_md.h>
#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>


/*
 * The mapping holding a VMM address, and the physical allocation mapped
 * there, as cuda.h defines the attributes (docs/driver-contract.md):
 * RANGE_* of VMM memory is the whole cuMemAddressReserve range, which a pool
 * (PyTorch's expandable segments) fills with many allocations; MAPPING_* is
 * the one mapping; BUFFER_ID inside a reservation is not documented,
 * MEMORY_BLOCK_ID is the physical allocation. A call of its own, made for
 * memory that is not a cuMemAlloc allocation only: whether the driver
 * answers these attributes for legacy memory is not documented.
 */
static ucs_status_t uct_cuda_ipc_ns_ptr_mapping(const void *address,
                                                CUdeviceptr *base_p,
                                                size_t *size_p,
                                                uint64_t *block_id_p)
{
    CUpointer_attribute names[] = {
        CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
        CU_POINTER_ATTRIBUTE_MAPPING_SIZE,
        CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID
    };
    unsigned long long block_id = 0;
    void *values[]              = {base_p, size_p, &block_id};
    ucs_status_t status;

    *base_p = 0;
    *size_p = 0;
    status  = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes,
                                      ucs_static_array_size(names), names,
                                      values, (CUdeviceptr)address);
    if (block_id_p != NULL) {
        *block_id_p = block_id;
    }
    return status;
}


void uct_cuda_ipc_ns_ptr_query(const void *address,
                               uct_cuda_ipc_ns_ptr_info_t *info)
{
    CUpointer_attribute names[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE
    };
    CUmemorytype memory_type = (CUmemorytype)0;
    unsigned legacy_capable  = 0;
    void *values[]           = {
        &memory_type, &info->device, &legacy_capable, &info->base,
        &info->size
    };
    ucs_status_t status;

    memset(info, 0, sizeof(*info));
    /* unknown host memory is not an error: it answers memory type 0 */
    status = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes,
                                     ucs_static_array_size(names), names,
                                     values, (CUdeviceptr)address);
    if ((status == UCS_OK) && (memory_type == CU_MEMORYTYPE_DEVICE) &&
        !legacy_capable) {
        status = uct_cuda_ipc_ns_ptr_mapping(address, &info->base, &info->size,
                                             NULL);
    }
    /* reserved but unmapped VA is no memory to move */
    info->is_cuda = (status == UCS_OK) &&
                    (memory_type == CU_MEMORYTYPE_DEVICE) && (info->size != 0);
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
                                           uct_cuda_ipc_ns_compat_mem_attr_t *mem_attr)
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
        CU_POINTER_ATTRIBUTE_BUFFER_ID,
        CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
    };
    void *values[] = {
        &attr->memory_type, &attr->device, &attr->context, &attr->base,
        &attr->size, &attr->legacy_capable, &attr->handle_types,
        &attr->alloc_id, &attr->pool
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

    if (attr->memory_type != CU_MEMORYTYPE_DEVICE) {
        return UCS_ERR_INVALID_ADDR;
    }
    if (attr->pool != NULL) {
        /* exported through its pool (cuMemPoolExportPointer), never as an
         * allocation: cuMemRetainAllocationHandle refuses it (cuda.h) */
        attr->handle_types = 0;
    }
    /* a cuMemAlloc allocation is its range and BUFFER_ID; anything else is
     * taken by its mapping */
    if (!attr->legacy_capable) {
        status = uct_cuda_ipc_ns_ptr_mapping(address, &attr->base, &attr->size,
                                             &attr->alloc_id);
        if (status != UCS_OK) {
            return status;
        }
    }
    /* reserved but unmapped VA is no memory to move */
    return (attr->size != 0) ? UCS_OK : UCS_ERR_INVALID_ADDR;
}


/*
 * cuda.h does not say whether an exported fd is close-on-exec; we keep it
 * for the registration's life, and an exec'd child must not inherit the
 * memory (docs/driver-contract.md). On failure *fd_p is closed and -1.
 */
static ucs_status_t uct_cuda_ipc_ns_ptr_cloexec(int *fd_p, const char *what,
                                                ucs_log_level_t log_level)
{
    if (fcntl(*fd_p, F_SETFD, FD_CLOEXEC) < 0) {
        ucs_log(log_level, "cuda_ipc_ns: fcntl(fd %d, F_SETFD, FD_CLOEXEC) "
                "of %s failed: %m", *fd_p, what);
        close(*fd_p);
        *fd_p = -1;
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_ptr_export_handle(CUmemGenericAllocationHandle handle,
                                               ucs_log_level_t log_level,
                                               int *fd_p)
{
    ucs_status_t status;

    status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuMemExportToShareableHandle,
                                     fd_p, handle,
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                     0);
    if (status != UCS_OK) {
        return status;
    }

    return uct_cuda_ipc_ns_ptr_cloexec(fd_p, "an exported allocation",
                                       log_level);
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

    status = uct_cuda_ipc_ns_ptr_export_handle(handle, log_level, fd_p);
    /* the exported fd keeps the allocation alive; drop our retain */
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_ptr_export_pool(const void *address,
                                             const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                             ucs_log_level_t log_level,
                                             uct_cuda_ipc_ns_ptr_pool_export_t *exp)
{
    ucs_status_t status;
    int pushed;

    /* a pool of no shareable handle type is not "IPC capable" (cuda.h): its
     * refusal is the answer, not a failure */
    exp->fd = -1;
    status  = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG,
                                      cuMemPoolExportToShareableHandle,
                                      &exp->fd, attr->pool,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                      0);
    if (status != UCS_OK) {
        return UCS_ERR_UNSUPPORTED;
    }
    status = uct_cuda_ipc_ns_ptr_cloexec(&exp->fd, "a pool", log_level);
    if (status != UCS_OK) {
        return status;
    }

    /* the allocation, not the pool's mapping that holds it: what
     * cuMemPoolExportPointer exports (UCX's cuda_ipc does the same) */
    status = uct_cuda_ipc_ns_ctx_push(attr->context, attr->device, &pushed);
    if (status != UCS_OK) {
        goto err_close;
    }
    status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuMemGetAddressRange,
                                     &exp->base, &exp->size,
                                     (CUdeviceptr)address);
    if (status == UCS_OK) {
        status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuMemPoolExportPointer,
                                         &exp->data, exp->base);
    }
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status == UCS_OK) {
        return UCS_OK;
    }

err_close:
    close(exp->fd);
    exp->fd = -1;
    return status;
}
