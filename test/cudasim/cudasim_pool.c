/*
 * cudasim: stream-ordered memory pools (cuMemPoolCreate, cuMemAllocAsync,
 * cudaMallocAsync underneath), as the module meets them: memory of a pool,
 * whose pointer attributes name the pool (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)
 * and whose allocation handle cuMemRetainAllocationHandle refuses: it is not
 * a cuMemCreate allocation of the application's (cuda.h).
 *
 * Each allocation is a VMM allocation of its own of the pool's handle types,
 * mapped in a reservation of its own with access for the pool's device; a
 * free waits for the work queued on its stream before it (stream order).
 * Not modelled: a pool's export (cuMemPoolExportToShareableHandle,
 * cuMemPoolExportPointer), its attributes and trimming, suballocation.
 */
#include "cudasim_internal.h"

#include <stdlib.h>

#define CUDASIM_POOL_MAGIC 0x504f4f4cu /* "POOL" */

struct CUmemPoolHandle_st {
    uint32_t magic;
    int      device;
    unsigned handle_types;
};

static struct CUmemPoolHandle_st cudasim_default_pools[CUDASIM_MAX_DEVICES];


static int cudasim_pool_valid(CUmemoryPool pool)
{
    return (pool != NULL) && (pool->magic == CUDASIM_POOL_MAGIC);
}


CUDASIM_API CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool,
                                             const CUmemPoolProps *props)
{
    const unsigned supported = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    struct CUmemPoolHandle_st *p;
    int count;

    CUDASIM_ENTER("cuMemPoolCreate");
    if ((pool == NULL) || (props == NULL) ||
        (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) ||
        (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) ||
        (cuDeviceGetCount(&count) != CUDA_SUCCESS) ||
        (props->location.id < 0) || (props->location.id >= count)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (props->handleTypes & ~supported) {
        /* as cuMemCreate: fabric needs IMEX, Win32 needs Windows */
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->magic        = CUDASIM_POOL_MAGIC;
    p->device       = props->location.id;
    p->handle_types = props->handleTypes;
    *pool           = p;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    CUDASIM_ENTER("cuMemPoolDestroy");
    if (!cudasim_pool_valid(pool) ||
        ((pool >= cudasim_default_pools) &&
         (pool < cudasim_default_pools + CUDASIM_MAX_DEVICES))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* allocations still out keep the pool's fields they copied */
    pool->magic = 0;
    free(pool);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool,
                                                       CUdevice dev)
{
    int count;

    CUDASIM_ENTER("cuDeviceGetDefaultMemPool");
    if ((pool == NULL) || (cuDeviceGetCount(&count) != CUDA_SUCCESS) ||
        ((int)dev < 0) || ((int)dev >= count) ||
        ((int)dev >= CUDASIM_MAX_DEVICES)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    /* the default pool exports nothing (cuda.h: handle type none) */
    cudasim_default_pools[dev].magic  = CUDASIM_POOL_MAGIC;
    cudasim_default_pools[dev].device = (int)dev;
    *pool = &cudasim_default_pools[dev];
    return CUDA_SUCCESS;
}


/* One allocation of @a pool: its own VMM allocation, reservation and
 * mapping, read-write for the pool's device, marked as the pool's */
static CUresult cudasim_pool_alloc(CUmemoryPool pool, size_t size,
                                   CUdeviceptr *dptr)
{
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    CUmemGenericAllocationHandle handle;
    cudasim_region_t *region;
    size_t gran = cudasim_cfg.vmm_granularity;
    CUdeviceptr ptr;
    CUresult res;

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = pool->device;
    prop.requestedHandleTypes = (CUmemAllocationHandleType)pool->handle_types;
    access.location           = prop.location;
    access.flags              = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size                      = (size + gran - 1) / gran * gran;

    res = cuMemCreate(&handle, size, &prop, 0);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    res = cuMemAddressReserve(&ptr, size, 0, 0, 0);
    if (res != CUDA_SUCCESS) {
        goto out_release;
    }
    res = cuMemMap(ptr, size, 0, handle, 0);
    if (res != CUDA_SUCCESS) {
        goto err_free_va;
    }
    res = cuMemSetAccess(ptr, size, &access, 1);
    if (res != CUDA_SUCCESS) {
        (void)cuMemUnmap(ptr, size);
        goto err_free_va;
    }

    cudasim_registry_wrlock();
    region       = cudasim_region_find_kind(ptr, CUDASIM_REGION_VMM_MAP);
    region->pool = pool;
    cudasim_registry_unlock();
    *dptr = ptr;
    goto out_release; /* the mapping keeps the allocation */

err_free_va:
    (void)cuMemAddressFree(ptr, size);
out_release:
    (void)cuMemRelease(handle);
    return res;
}


CUDASIM_API CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr,
                                                     size_t bytesize,
                                                     CUmemoryPool pool,
                                                     CUstream hStream)
{
    CUDASIM_ENTER("cuMemAllocFromPoolAsync");
    if ((dptr == NULL) || (bytesize == 0) || !cudasim_pool_valid(pool)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* usable in stream order from here on; the emulator's is at once */
    (void)hStream;
    return cudasim_pool_alloc(pool, bytesize, dptr);
}


CUDASIM_API CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                             CUstream hStream)
{
    CUmemoryPool pool;
    CUcontext ctx;
    CUresult res;

    CUDASIM_ENTER("cuMemAllocAsync");
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    res = cuDeviceGetDefaultMemPool(&pool, ctx->device);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
}


CUDASIM_API CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    cudasim_region_t *region;
    size_t size;
    CUresult res;

    CUDASIM_ENTER("cuMemFreeAsync");
    cudasim_registry_rdlock();
    region = cudasim_region_find_kind(dptr, CUDASIM_REGION_VMM_MAP);
    if ((region == NULL) || (region->pool == NULL) || (region->base != dptr)) {
        cudasim_registry_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    size = region->size;
    cudasim_registry_unlock();

    /* freed in stream order: after the work queued on the stream before */
    res = cuStreamSynchronize(hStream);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    res = cuMemUnmap(dptr, size);
    return (res == CUDA_SUCCESS) ? cuMemAddressFree(dptr, size) : res;
}
