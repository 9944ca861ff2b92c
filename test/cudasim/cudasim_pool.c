/*
 * cudasim: stream-ordered memory pools (cuMemPoolCreate, cuMemAllocAsync,
 * cudaMallocAsync underneath) and their sharing between processes
 * (cuMemPoolExportToShareableHandle, cuMemPoolImportFromShareableHandle,
 * cuMemPoolExportPointer, cuMemPoolImportPointer), as cuda.h documents them:
 *  - the pointer attributes of pool memory name the pool
 *    (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), and cuMemRetainAllocationHandle
 *    refuses it: it is no cuMemCreate allocation of the application's;
 *  - a pool created with a handle type other than none is "IPC capable":
 *    its shareable handle imports as a pool that makes no allocations, from
 *    which the export data of one allocation imports that allocation;
 *  - "By default, the pool's memory will be accessible from the device it
 *    is allocated on"; cuMemPoolSetAccess grants other devices;
 *  - an imported pointer is freed with cuMemFree or cuMemFreeAsync.
 *
 * A pool's memory is one sparse memfd, its arena: a header (magic, pool id,
 * device, handle types, and a table of the live allocations), then the
 * allocations, each at an offset of its own that is never reused. Its
 * shareable handle is a descriptor of that memfd; the export data of an
 * allocation names its slot in the table, which an importer checks, so a
 * freed allocation no longer imports. A free returns the memory (a hole is
 * punched): a peer that kept a mapping past the owner's free reads zeros,
 * where the driver leaves the outcome undefined ("The imported memory must
 * be freed from all importing processes before being freed in the
 * exporting process").
 *
 * Each allocation is mapped in a reservation of its own, so MAPPING_* and
 * cuMemGetAddressRange answer the allocation. Not modelled: suballocation
 * of one mapping by several allocations, a pool's attributes and trimming,
 * fabric handles.
 */
#include "cudasim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CUDASIM_POOL_MAGIC     0x504f4f4cu /* "POOL" */
#define CUDASIM_POOL_PTR_MAGIC 0x52545050u /* "PPTR" */
#define CUDASIM_POOL_NAME      "cudasim-pool"
#define CUDASIM_POOL_HDR_MAGIC "cudasim-pool-v1"
/* live allocations of one pool; the emulator's limit, not the driver's */
#define CUDASIM_POOL_SLOTS     4096
#define CUDASIM_POOL_HDR_SIZE  (128 * 1024)
/* a pool's address space in its arena (sparse: only allocations hold
 * memory); offsets are never reused */
#define CUDASIM_POOL_ARENA     (1ull << 40)

typedef struct {
    uint64_t offset;    /* in the arena, past the header; 0: free slot */
    uint64_t size;
    uint64_t buffer_id;
} cudasim_pool_slot_t;

typedef struct {
    char                magic[16];
    uint64_t            id;
    uint64_t            arena_size;
    int32_t             device;      /* the GPU, not an ordinal */
    uint32_t            handle_types;
    uint8_t             reserved[24];
    cudasim_pool_slot_t slots[CUDASIM_POOL_SLOTS];
} cudasim_pool_hdr_t;

/* What cuMemPoolExportPointer writes (64 bytes, opaque to the caller) */
typedef struct {
    uint32_t magic;
    uint32_t slot;
    uint64_t pool_id;
    cudasim_pool_slot_t alloc;
    uint8_t  zero[24];
} cudasim_pool_ptr_data_t;

_Static_assert(sizeof(cudasim_pool_ptr_data_t) == sizeof(CUmemPoolPtrExportData),
               "export data is the driver's 64 bytes");

struct CUmemPoolHandle_st {
    uint32_t            magic;
    int                 device;         /* ordinal in this process */
    unsigned            handle_types;
    int                 imported;       /* makes no allocations */
    int                 destroyed;      /* freed when allocs drops to 0 */
    int                 fd;             /* the arena; -1 until first use */
    uint64_t            id;
    uint64_t            next_offset;    /* created pools */
    uint64_t            access_devices; /* granted by cuMemPoolSetAccess */
    unsigned            allocs;         /* live allocations (or imports) */
    cudasim_pool_slot_t *slots;         /* created pools: the table */
};

/* guards every pool's fields; taken before the VMM and registry locks */
static pthread_mutex_t cudasim_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUmemPoolHandle_st cudasim_default_pools[CUDASIM_MAX_DEVICES];


static int cudasim_pool_valid(CUmemoryPool pool)
{
    return (pool != NULL) && (pool->magic == CUDASIM_POOL_MAGIC) &&
           !pool->destroyed;
}


static int cudasim_pool_is_default(CUmemoryPool pool)
{
    return (pool >= cudasim_default_pools) &&
           (pool < cudasim_default_pools + CUDASIM_MAX_DEVICES);
}


/* With the pool lock held: the pool's arena, created on first use */
static CUresult cudasim_pool_arena(CUmemoryPool pool)
{
    cudasim_pool_hdr_t hdr;
    char name[64];
    int fd;

    if (pool->fd >= 0) {
        return CUDA_SUCCESS;
    }
    pool->slots = calloc(CUDASIM_POOL_SLOTS, sizeof(*pool->slots));
    if (pool->slots == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pool->id = cudasim_new_buffer_id();
    snprintf(name, sizeof(name), CUDASIM_POOL_NAME "-%llx",
             (unsigned long long)pool->id);
    fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        cudasim_log("memfd_create(%s) failed: %m", name);
        goto err_free;
    }
    fd = cudasim_fd_out_of_range(fd);
    memset(&hdr, 0, sizeof(hdr));
    strncpy(hdr.magic, CUDASIM_POOL_HDR_MAGIC, sizeof(hdr.magic));
    hdr.id           = pool->id;
    hdr.arena_size   = CUDASIM_POOL_ARENA;
    hdr.device       = cudasim_device_physical(pool->device);
    hdr.handle_types = pool->handle_types;
    if ((ftruncate(fd, CUDASIM_POOL_HDR_SIZE + CUDASIM_POOL_ARENA) != 0) ||
        (pwrite(fd, &hdr, sizeof(hdr), 0) != sizeof(hdr))) {
        cudasim_log("creating the arena of pool %#llx failed: %m",
                    (unsigned long long)pool->id);
        close(fd);
        goto err_free;
    }
    pool->fd          = fd;
    pool->next_offset = 0;
    return CUDA_SUCCESS;

err_free:
    free(pool->slots);
    pool->slots = NULL;
    return CUDA_ERROR_OUT_OF_MEMORY;
}


/* With the pool lock held: release a destroyed pool with nothing left */
static void cudasim_pool_release(CUmemoryPool pool)
{
    if (!pool->destroyed || (pool->allocs > 0) || cudasim_pool_is_default(pool)) {
        return;
    }
    if (pool->fd >= 0) {
        close(pool->fd);
    }
    free(pool->slots);
    pool->magic = 0;
    free(pool);
}


static CUresult cudasim_pool_new(int device, unsigned handle_types,
                                 CUmemoryPool *pool_p)
{
    struct CUmemPoolHandle_st *p;

    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->magic        = CUDASIM_POOL_MAGIC;
    p->device       = device;
    p->handle_types = handle_types;
    p->fd           = -1;
    *pool_p         = p;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool,
                                             const CUmemPoolProps *props)
{
    const unsigned supported = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
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
    return cudasim_pool_new(props->location.id, props->handleTypes, pool);
}


CUDASIM_API CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    CUDASIM_ENTER("cuMemPoolDestroy");
    pthread_mutex_lock(&cudasim_pool_lock);
    if (!cudasim_pool_valid(pool) || cudasim_pool_is_default(pool)) {
        pthread_mutex_unlock(&cudasim_pool_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* cuda.h: with allocations out "the function will return immediately
     * and the resources associated with the pool will be released
     * automatically once there are no more outstanding allocations" */
    pool->destroyed = 1;
    cudasim_pool_release(pool);
    pthread_mutex_unlock(&cudasim_pool_lock);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool,
                                                       CUdevice dev)
{
    struct CUmemPoolHandle_st *p;
    int count;

    CUDASIM_ENTER("cuDeviceGetDefaultMemPool");
    if ((pool == NULL) || (cuDeviceGetCount(&count) != CUDA_SUCCESS) ||
        ((int)dev < 0) || ((int)dev >= count) ||
        ((int)dev >= CUDASIM_MAX_DEVICES)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    /* the default pool exports nothing (cuda.h: handle type none) */
    pthread_mutex_lock(&cudasim_pool_lock);
    p = &cudasim_default_pools[dev];
    if (p->magic != CUDASIM_POOL_MAGIC) {
        p->magic  = CUDASIM_POOL_MAGIC;
        p->device = (int)dev;
        p->fd     = -1;
    }
    pthread_mutex_unlock(&cudasim_pool_lock);
    *pool = p;
    return CUDA_SUCCESS;
}


/*
 * Map @a size bytes of the arena @a fd at @a offset (past its header) as an
 * allocation of @a pool: a reservation and mapping of its own, read-write
 * for the pool's device and the devices granted access to the pool.
 */
static CUresult cudasim_pool_map(CUmemoryPool pool, int fd,
                                 const cudasim_pool_slot_t *alloc,
                                 CUdeviceptr *dptr)
{
    CUmemAccessDesc access[CUDASIM_MAX_DEVICES] = {};
    CUmemGenericAllocationHandle handle;
    cudasim_region_t *region;
    size_t count = 0;
    CUdeviceptr ptr;
    CUresult res;
    int d;

    for (d = 0; d < CUDASIM_MAX_DEVICES; ++d) {
        if ((d == pool->device) || (pool->access_devices & (1ull << d))) {
            access[count].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            access[count].location.id   = d;
            access[count].flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            ++count;
        }
    }

    res = cudasim_vmm_wrap(fd, CUDASIM_POOL_HDR_SIZE + alloc->offset,
                           alloc->size, pool->device, pool->handle_types,
                           alloc->buffer_id, &handle);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    res = cuMemAddressReserve(&ptr, alloc->size, 0, 0, 0);
    if (res != CUDA_SUCCESS) {
        goto out_release;
    }
    res = cuMemMap(ptr, alloc->size, 0, handle, 0);
    if (res != CUDA_SUCCESS) {
        goto err_free_va;
    }
    res = cuMemSetAccess(ptr, alloc->size, access, count);
    if (res != CUDA_SUCCESS) {
        (void)cuMemUnmap(ptr, alloc->size);
        goto err_free_va;
    }

    cudasim_registry_wrlock();
    region       = cudasim_region_find_kind(ptr, CUDASIM_REGION_VMM_MAP);
    region->pool = pool;
    cudasim_registry_unlock();
    ++pool->allocs;
    *dptr = ptr;
    goto out_release; /* the mapping keeps the memory */

err_free_va:
    (void)cuMemAddressFree(ptr, alloc->size);
out_release:
    (void)cuMemRelease(handle);
    return res;
}


/* With the pool lock held: record or clear slot @a index in the arena's
 * table, which importers read */
static int cudasim_pool_slot_write(CUmemoryPool pool, unsigned index)
{
    off_t off = offsetof(cudasim_pool_hdr_t, slots) +
                index * sizeof(cudasim_pool_slot_t);

    return pwrite(pool->fd, &pool->slots[index], sizeof(pool->slots[index]),
                  off) == sizeof(pool->slots[index]);
}


/* One allocation of @a pool */
static CUresult cudasim_pool_alloc(CUmemoryPool pool, size_t size,
                                   CUdeviceptr *dptr)
{
    size_t gran = cudasim_cfg.vmm_granularity;
    cudasim_pool_slot_t *slot = NULL;
    CUresult res;
    unsigned i;

    size = (size + gran - 1) / gran * gran;
    pthread_mutex_lock(&cudasim_pool_lock);
    if (pool->imported) {
        /* cuda.h: "Imported memory pools do not support creating new
         * allocations" */
        res = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    res = cudasim_pool_arena(pool);
    if (res != CUDA_SUCCESS) {
        goto out;
    }
    for (i = 0; i < CUDASIM_POOL_SLOTS; ++i) {
        if (pool->slots[i].size == 0) {
            slot = &pool->slots[i];
            break;
        }
    }
    if ((slot == NULL) || (size > CUDASIM_POOL_ARENA - pool->next_offset)) {
        cudasim_log("pool %#llx: no slot or arena space for %zu bytes",
                    (unsigned long long)pool->id, size);
        res = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    res = cudasim_mem_reserve(pool->device, size);
    if (res != CUDA_SUCCESS) {
        goto out;
    }
    slot->offset    = pool->next_offset;
    slot->size      = size;
    slot->buffer_id = cudasim_new_buffer_id();
    if (cudasim_mem_commit(pool->fd, CUDASIM_POOL_HDR_SIZE + slot->offset,
                           size) != 0) {
        res = CUDA_ERROR_OUT_OF_MEMORY;
        goto err_unreserve;
    }
    res = cudasim_pool_map(pool, pool->fd, slot, dptr);
    if (res != CUDA_SUCCESS) {
        goto err_unreserve;
    }
    pool->next_offset += size;
    if (!cudasim_pool_slot_write(pool, i)) {
        cudasim_log("pool %#llx: writing slot %u failed: %m",
                    (unsigned long long)pool->id, i);
    }
    goto out;

err_unreserve:
    cudasim_mem_unreserve(pool->device, size);
    memset(slot, 0, sizeof(*slot));
out:
    pthread_mutex_unlock(&cudasim_pool_lock);
    return res;
}


CUresult cudasim_pool_free(CUdeviceptr dptr)
{
    cudasim_pool_slot_t *slot;
    cudasim_region_t *region;
    uint64_t buffer_id;
    CUmemoryPool pool;
    size_t size;
    unsigned i;
    CUresult res;

    pthread_mutex_lock(&cudasim_pool_lock);
    cudasim_registry_rdlock();
    region = cudasim_region_find_kind(dptr, CUDASIM_REGION_VMM_MAP);
    if ((region == NULL) || (region->pool == NULL) || (region->base != dptr)) {
        cudasim_registry_unlock();
        pthread_mutex_unlock(&cudasim_pool_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pool      = region->pool;
    size      = region->size;
    buffer_id = region->buffer_id;
    cudasim_registry_unlock();

    res = cuMemUnmap(dptr, size);
    if (res == CUDA_SUCCESS) {
        res = cuMemAddressFree(dptr, size);
    }
    if (res != CUDA_SUCCESS) {
        pthread_mutex_unlock(&cudasim_pool_lock);
        return res;
    }

    /* the owner's free returns the memory: the slot no longer imports */
    for (i = 0; !pool->imported && (i < CUDASIM_POOL_SLOTS); ++i) {
        slot = &pool->slots[i];
        if ((slot->size != 0) && (slot->buffer_id == buffer_id)) {
            (void)fallocate(pool->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            CUDASIM_POOL_HDR_SIZE + slot->offset, slot->size);
            cudasim_mem_unreserve(pool->device, slot->size);
            memset(slot, 0, sizeof(*slot));
            (void)cudasim_pool_slot_write(pool, i);
            break;
        }
    }
    --pool->allocs;
    cudasim_pool_release(pool);
    pthread_mutex_unlock(&cudasim_pool_lock);
    return CUDA_SUCCESS;
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
    CUresult res;

    CUDASIM_ENTER("cuMemFreeAsync");
    /* freed in stream order: after the work queued on the stream before */
    res = cuStreamSynchronize(hStream);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    return cudasim_pool_free(dptr);
}


CUDASIM_API CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool,
                                                const CUmemAccessDesc *map,
                                                size_t count)
{
    uint64_t grant = 0, revoke = 0;
    CUdeviceptr *bases = NULL;
    size_t *sizes      = NULL;
    cudasim_region_t *r;
    CUresult res = CUDA_SUCCESS;
    size_t k, n = 0, max;

    CUDASIM_ENTER("cuMemPoolSetAccess");
    if ((map == NULL) || (count == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&cudasim_pool_lock);
    if (!cudasim_pool_valid(pool)) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (k = 0; k < count; ++k) {
        if ((map[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE) ||
            !cudasim_device_valid(map[k].location.id) ||
            ((map[k].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE) &&
             (map[k].location.id == pool->device))) {
            /* the pool's own device keeps its access */
            res = CUDA_ERROR_INVALID_VALUE;
            goto out;
        }
        if (map[k].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE) {
            revoke |= 1ull << map[k].location.id;
        } else {
            grant  |= 1ull << map[k].location.id;
        }
    }

    /* the pool's allocations now, then those to come */
    max   = pool->allocs;
    bases = calloc(max + 1, sizeof(*bases));
    sizes = calloc(max + 1, sizeof(*sizes));
    if ((bases == NULL) || (sizes == NULL)) {
        res = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    cudasim_registry_rdlock();
    for (r = cudasim_region_first(); (r != NULL) && (n < max); r = r->next) {
        if ((r->kind == CUDASIM_REGION_VMM_MAP) && (r->pool == pool)) {
            bases[n]   = r->base;
            sizes[n++] = r->size;
        }
    }
    cudasim_registry_unlock();
    for (k = 0; (k < n) && (res == CUDA_SUCCESS); ++k) {
        res = cuMemSetAccess(bases[k], sizes[k], map, count);
    }
    if (res == CUDA_SUCCESS) {
        pool->access_devices = (pool->access_devices | grant) & ~revoke;
    }

out:
    pthread_mutex_unlock(&cudasim_pool_lock);
    free(bases);
    free(sizes);
    return res;
}


CUDASIM_API CUresult CUDAAPI
cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                 CUmemAllocationHandleType handleType,
                                 unsigned long long flags)
{
    CUresult res;
    int fd;

    CUDASIM_ENTER("cuMemPoolExportToShareableHandle");
    if ((handle_out == NULL) || (flags != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&cudasim_pool_lock);
    /* cuda.h: only an "IPC capable mempool", created with this handle
     * type; an imported pool is shared already */
    if (!cudasim_pool_valid(pool) || pool->imported ||
        (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        !(pool->handle_types & handleType)) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    res = cudasim_pool_arena(pool);
    if (res != CUDA_SUCCESS) {
        goto out;
    }
    /* as cuMemExportToShareableHandle: a new descriptor, which an exec'd
     * child inherits (close-on-exec is not documented) */
    fd = fcntl(pool->fd, F_DUPFD, 0);
    if (fd < 0) {
        res = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    *(int*)handle_out = fd;
out:
    pthread_mutex_unlock(&cudasim_pool_lock);
    return res;
}


CUDASIM_API CUresult CUDAAPI
cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                   CUmemAllocationHandleType handleType,
                                   unsigned long long flags)
{
    int fd = (int)(intptr_t)handle;
    cudasim_pool_hdr_t hdr;
    CUmemoryPool pool;
    struct stat st;
    int device, own;
    CUresult res;

    CUDASIM_ENTER("cuMemPoolImportFromShareableHandle");
    if ((pool_out == NULL) || (flags != 0) ||
        (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((fd < 0) || (fstat(fd, &st) != 0) || !S_ISREG(st.st_mode) ||
        !cudasim_memfd_name_ok(fd, CUDASIM_POOL_NAME) ||
        (pread(fd, &hdr, offsetof(cudasim_pool_hdr_t, slots), 0) !=
         offsetof(cudasim_pool_hdr_t, slots)) ||
        strncmp(hdr.magic, CUDASIM_POOL_HDR_MAGIC, sizeof(hdr.magic)) ||
        ((uint64_t)st.st_size != CUDASIM_POOL_HDR_SIZE + hdr.arena_size)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* memory of a GPU this process cannot see (CUDASIM_VISIBLE_DEVICES):
     * refused; cuda.h lists CUDA_ERROR_INVALID_VALUE for a bad handle */
    device = cudasim_device_ordinal(hdr.device);
    if (device < 0) {
        cudasim_log("cuMemPoolImportFromShareableHandle(fd %d): pool of GPU "
                    "%d, not visible to this process", fd, (int)hdr.device);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the caller keeps its descriptor; the pool holds one of its own */
    own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    res = cudasim_pool_new(device, hdr.handle_types, &pool);
    if (res != CUDA_SUCCESS) {
        close(own);
        return res;
    }
    pool->imported = 1;
    pool->fd       = cudasim_fd_out_of_range(own);
    pool->id       = hdr.id;
    *pool_out      = pool;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI
cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
    cudasim_pool_ptr_data_t data;
    cudasim_region_t *region;
    CUresult res = CUDA_ERROR_INVALID_VALUE;
    CUmemoryPool pool;
    unsigned i;

    CUDASIM_ENTER("cuMemPoolExportPointer");
    if (shareData_out == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&cudasim_pool_lock);
    cudasim_registry_rdlock();
    region = cudasim_region_find_kind(ptr, CUDASIM_REGION_VMM_MAP);
    pool   = (region != NULL) ? region->pool : NULL;
    /* an allocation, from its start, of a pool that is shared ("an already
     * shared memory pool"); an imported pointer is not exported again */
    if ((pool == NULL) || (region->base != ptr) || pool->imported ||
        (pool->handle_types == 0) || (pool->slots == NULL)) {
        goto out;
    }
    for (i = 0; i < CUDASIM_POOL_SLOTS; ++i) {
        if ((pool->slots[i].size != 0) &&
            (pool->slots[i].buffer_id == region->buffer_id)) {
            memset(&data, 0, sizeof(data));
            data.magic   = CUDASIM_POOL_PTR_MAGIC;
            data.slot    = i;
            data.pool_id = pool->id;
            data.alloc   = pool->slots[i];
            memcpy(shareData_out, &data, sizeof(data));
            res = CUDA_SUCCESS;
            break;
        }
    }
out:
    cudasim_registry_unlock();
    pthread_mutex_unlock(&cudasim_pool_lock);
    return res;
}


CUDASIM_API CUresult CUDAAPI
cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                       CUmemPoolPtrExportData *shareData)
{
    cudasim_pool_ptr_data_t data;
    cudasim_pool_slot_t live;
    CUresult res;

    CUDASIM_ENTER("cuMemPoolImportPointer");
    if ((ptr_out == NULL) || (shareData == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&data, shareData, sizeof(data));
    pthread_mutex_lock(&cudasim_pool_lock);
    /* the data of an allocation of this pool that its owner has not freed:
     * the arena's table still holds it */
    if (!cudasim_pool_valid(pool) || !pool->imported ||
        (data.magic != CUDASIM_POOL_PTR_MAGIC) || (data.pool_id != pool->id) ||
        (data.slot >= CUDASIM_POOL_SLOTS) ||
        (pread(pool->fd, &live, sizeof(live),
               offsetof(cudasim_pool_hdr_t, slots) +
               data.slot * sizeof(live)) != sizeof(live)) ||
        (live.size == 0) || memcmp(&live, &data.alloc, sizeof(live))) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else {
        res = cudasim_pool_map(pool, pool->fd, &live, ptr_out);
    }
    pthread_mutex_unlock(&cudasim_pool_lock);
    return res;
}
