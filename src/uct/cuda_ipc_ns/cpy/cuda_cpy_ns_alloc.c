/*
 * cuda_cpy_ns: allocation of CUDA device memory (see cuda_cpy_ns_alloc.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_alloc.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_vmm.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <string.h>


const char *uct_cuda_cpy_ns_alloc_mode_names[] = {
    [UCT_CUDA_CPY_NS_ALLOC_VMM]    = "vmm",
    [UCT_CUDA_CPY_NS_ALLOC_LEGACY] = "legacy",
    [UCT_CUDA_CPY_NS_ALLOC_CHUNKED] = "chunked",
    [UCT_CUDA_CPY_NS_ALLOC_POOL]   = "pool",
    [UCT_CUDA_CPY_NS_ALLOC_LAST]   = NULL
};


/* The device of the calling thread's context, or 0 */
static int uct_cuda_cpy_ns_alloc_device(void)
{
    CUcontext ctx = NULL;
    CUdevice device;

    if ((UCT_CUDA_IPC_NS_CU(cuCtxGetCurrent, &ctx) != UCS_OK) || (ctx == NULL) ||
        (UCT_CUDA_IPC_NS_CU(cuCtxGetDevice, &device) != UCS_OK)) {
        return 0;
    }
    return (int)device;
}


/*
 * cuMemAlloc (legacy), or cuMemAllocAsync from the device's current
 * stream-ordered pool (pool, as cudaMallocAsync, on the default stream and
 * ready when this returns), in the device's primary context, retained for
 * the life of the process: the memory does not depend on a context of the
 * caller's staying alive, and uct_cuda_cpy_ns_alloc_free() frees it in the
 * same context
 */
static ucs_status_t uct_cuda_cpy_ns_alloc_in_ctx(uct_cuda_cpy_ns_alloc_t *alloc)
{
    ucs_status_t status;
    int pushed;

    status = uct_cuda_ipc_ns_ctx_push(NULL, alloc->device, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    if (alloc->mode == UCT_CUDA_CPY_NS_ALLOC_LEGACY) {
        status = UCT_CUDA_IPC_NS_CU(cuMemAlloc, &alloc->ptr, alloc->size);
    } else {
        status = UCT_CUDA_IPC_NS_CU(cuMemAllocAsync, &alloc->ptr, alloc->size,
                                    NULL);
        if (status == UCS_OK) {
            status = UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, NULL);
        }
    }
    uct_cuda_ipc_ns_ctx_pop(pushed);
    return status;
}


/* one allocation of the POSIX-fd handle type (base/cuda_ipc_ns_vmm.h) */
static ucs_status_t uct_cuda_cpy_ns_alloc_vmm(uct_cuda_cpy_ns_alloc_t *alloc)
{
    uct_cuda_ipc_ns_vmm_t vmm;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_vmm_alloc(alloc->device, alloc->size, &vmm);
    if (status != UCS_OK) {
        return status;
    }

    alloc->ptr    = vmm.ptr;
    alloc->size   = vmm.size;
    alloc->handle = vmm.handle;
    return UCS_OK;
}


/* Unmap the first @a count chunks of @a alloc (each is its own mapping) */
static ucs_status_t uct_cuda_cpy_ns_unmap_chunks(const uct_cuda_cpy_ns_alloc_t *alloc,
                                                 size_t count)
{
    ucs_status_t status = UCS_OK;
    size_t i;

    for (i = 0; i < count; ++i) {
        if (UCT_CUDA_IPC_NS_CU(cuMemUnmap, alloc->ptr + i * alloc->chunk,
                               alloc->chunk) != UCS_OK) {
            status = UCS_ERR_IO_ERROR;
        }
    }
    return status;
}


/*
 * Allocations of the granularity each, created with the POSIX-fd handle
 * type and mapped back to back in one reservation; their handles are
 * released at once (the mappings keep the memory)
 */
static ucs_status_t uct_cuda_cpy_ns_alloc_chunked(uct_cuda_cpy_ns_alloc_t *alloc)
{
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    CUmemGenericAllocationHandle handle;
    ucs_status_t status;
    CUdeviceptr addr;
    size_t i;

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = alloc->device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    access.location           = prop.location;
    access.flags              = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

    status = UCT_CUDA_IPC_NS_CU(cuMemGetAllocationGranularity, &alloc->chunk,
                                &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (status != UCS_OK) {
        return status;
    }

    alloc->size = ((alloc->size + alloc->chunk - 1) / alloc->chunk) *
                  alloc->chunk;
    status      = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &alloc->ptr,
                                     alloc->size, alloc->chunk, 0, 0);
    if (status != UCS_OK) {
        return status;
    }

    for (i = 0; i < alloc->size / alloc->chunk; ++i) {
        addr   = alloc->ptr + i * alloc->chunk;
        status = UCT_CUDA_IPC_NS_CU(cuMemCreate, &handle, alloc->chunk, &prop,
                                    0);
        if (status != UCS_OK) {
            goto err_unmap;
        }
        status = UCT_CUDA_IPC_NS_CU(cuMemMap, addr, alloc->chunk, 0, handle, 0);
        (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
        if (status != UCS_OK) {
            goto err_unmap;
        }
        status = UCT_CUDA_IPC_NS_CU(cuMemSetAccess, addr, alloc->chunk,
                                    &access, 1);
        if (status != UCS_OK) {
            ++i; /* mapped */
            goto err_unmap;
        }
    }
    return UCS_OK;

err_unmap:
    if (uct_cuda_cpy_ns_unmap_chunks(alloc, i) == UCS_OK) {
        (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, alloc->ptr, alloc->size);
    }
    return status;
}


ucs_status_t uct_cuda_cpy_ns_alloc_mem(uct_cuda_cpy_ns_alloc_mode_t mode,
                                       size_t length,
                                       uct_cuda_cpy_ns_alloc_t *alloc)
{
    ucs_status_t status;

    memset(alloc, 0, sizeof(*alloc));
    alloc->mode   = mode;
    alloc->size   = ucs_max(length, 1);
    alloc->device = uct_cuda_cpy_ns_alloc_device();

    status = (mode == UCT_CUDA_CPY_NS_ALLOC_VMM) ?
             uct_cuda_cpy_ns_alloc_vmm(alloc) :
             (mode == UCT_CUDA_CPY_NS_ALLOC_CHUNKED) ?
             uct_cuda_cpy_ns_alloc_chunked(alloc) :
             uct_cuda_cpy_ns_alloc_in_ctx(alloc);
    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: failed to allocate %zu bytes of %s memory on "
                  "device %d: %s", length, uct_cuda_cpy_ns_alloc_mode_names[mode],
                  alloc->device, ucs_status_string(status));
        return status;
    }

    ucs_debug("cuda_cpy_ns: allocated %s memory 0x%llx/%zu on device %d",
              uct_cuda_cpy_ns_alloc_mode_names[mode],
              (unsigned long long)alloc->ptr, alloc->size, alloc->device);
    return UCS_OK;
}


ucs_status_t uct_cuda_cpy_ns_alloc_free(const uct_cuda_cpy_ns_alloc_t *alloc)
{
    uct_cuda_ipc_ns_vmm_t vmm;
    ucs_status_t status;
    int pushed;

    if ((alloc->mode == UCT_CUDA_CPY_NS_ALLOC_LEGACY) ||
        (alloc->mode == UCT_CUDA_CPY_NS_ALLOC_POOL)) {
        status = uct_cuda_ipc_ns_ctx_push(NULL, alloc->device, &pushed);
        if (status == UCS_OK) {
            if (alloc->mode == UCT_CUDA_CPY_NS_ALLOC_LEGACY) {
                status = UCT_CUDA_IPC_NS_CU(cuMemFree, alloc->ptr);
            } else {
                /* freed in stream order, after the work queued before */
                status = UCT_CUDA_IPC_NS_CU(cuMemFreeAsync, alloc->ptr, NULL);
                if (status == UCS_OK) {
                    status = UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, NULL);
                }
            }
            uct_cuda_ipc_ns_ctx_pop(pushed);
        }
    } else if (alloc->mode == UCT_CUDA_CPY_NS_ALLOC_CHUNKED) {
        /* each chunk is a mapping of its own; the address stays reserved
         * if one of them could not be unmapped */
        status = uct_cuda_cpy_ns_unmap_chunks(alloc, alloc->size / alloc->chunk);
        if (status == UCS_OK) {
            status = UCT_CUDA_IPC_NS_CU(cuMemAddressFree, alloc->ptr,
                                        alloc->size);
        }
    } else {
        vmm.handle = alloc->handle;
        vmm.ptr    = alloc->ptr;
        vmm.size   = alloc->size;
        status     = uct_cuda_ipc_ns_vmm_free(&vmm);
    }

    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: failed to free %s memory 0x%llx/%zu: %s",
                  uct_cuda_cpy_ns_alloc_mode_names[alloc->mode],
                  (unsigned long long)alloc->ptr, alloc->size,
                  ucs_status_string(status));
    }
    return status;
}
