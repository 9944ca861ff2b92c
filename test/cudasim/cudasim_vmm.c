/*
 * cudasim: virtual memory management (cuMemCreate/Map/...): physical
 * allocations are memfds, exported as POSIX file descriptors.
 *
 * A memfd starts with one header page describing the allocation (so that an
 * importer recognizes our fds and learns size, device and buffer id); the
 * allocation's bytes follow at offset CUDASIM_VMM_HDR_SIZE.
 *
 * A driver holds no descriptor per allocation: the application's fd range
 * and RLIMIT_NOFILE are its own. So the memfd that an allocation keeps is
 * moved out of that range (cudasim_fd_out_of_range()), and an imported
 * allocation keeps none: a shared mapping of the memfd holds its memory.
 */
#include "cudasim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CUDASIM_VMM_HDR_SIZE   4096
#define CUDASIM_VMM_MAGIC      "cudasim-vmm-v1"
#define CUDASIM_VMM_NAME       "cudasim-vmm"
#define CUDASIM_VMM_ALLOC_MAGIC 0x564d4d41u /* "VMMA" */
/* The lowest descriptor the emulator keeps for itself: FD_SETSIZE, the
 * range that select() sees and that a process lowering its soft
 * RLIMIT_NOFILE to the usual default of 1024 keeps (README.md,
 * "Descriptors") */
#define CUDASIM_VMM_FD_FLOOR   1024

typedef struct {
    char     magic[16];
    uint64_t size;
    uint64_t buffer_id;
    int32_t  device;
    uint32_t handle_types;
    uint32_t creator_pid;
} cudasim_vmm_hdr_t;

typedef struct cudasim_vmm_alloc {
    uint32_t                 magic;
    int                      fd;      /* created: the memfd; imported: -1,
                                       * or a descriptor of the memfd with
                                       * CUDASIM_IMPORT_KEEPS_FD */
    off_t                    fd_offset; /* where the bytes start in fd */
    void                     *backing; /* imported: a PROT_NONE shared
                                        * mapping of the bytes, which keeps
                                        * them alive; cuMemMap duplicates it */
    size_t                   size;
    int                      device;
    unsigned                 handle_types;
    uint64_t                 buffer_id;
    int                      imported;
    int                      handle_refs; /* cuMemCreate/Import/Retain */
    cudasim_fabric_t         *fabric;     /* FABRIC memory: this handle's
                                           * hold on it (cudasim_fabric.c) */
    int                      map_refs;    /* cuMemMap */
    struct cudasim_vmm_alloc *next;
} cudasim_vmm_alloc_t;

/* guards the allocation list and refcounts; nests inside nothing, the
 * registry lock may be taken while holding it */
static pthread_mutex_t      cudasim_vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static cudasim_vmm_alloc_t *cudasim_vmm_allocs;


/* with cudasim_vmm_lock held; NULL if not a live handle */
static cudasim_vmm_alloc_t *
cudasim_vmm_lookup(CUmemGenericAllocationHandle handle)
{
    cudasim_vmm_alloc_t *a;

    for (a = cudasim_vmm_allocs; a != NULL; a = a->next) {
        if (((uintptr_t)a == (uintptr_t)handle) && (a->handle_refs > 0)) {
            return a;
        }
    }
    return NULL;
}


/* with cudasim_vmm_lock held: destroy when unreferenced */
static void cudasim_vmm_put(cudasim_vmm_alloc_t *alloc)
{
    cudasim_vmm_alloc_t **p;

    if ((alloc->handle_refs > 0) || (alloc->map_refs > 0)) {
        return;
    }
    for (p = &cudasim_vmm_allocs; *p != NULL; p = &(*p)->next) {
        if (*p == alloc) {
            *p = alloc->next;
            break;
        }
    }
    cudasim_log("VMM allocation %#llx destroyed",
                (unsigned long long)alloc->buffer_id);
    if (alloc->fd >= 0) {
        close(alloc->fd);
    }
    if (alloc->backing != NULL) {
        munmap(alloc->backing, alloc->size);
    }
    if (alloc->fabric != NULL) {
        cudasim_fabric_put(alloc->fabric);
    }
    if (!alloc->imported) {
        cudasim_mem_unreserve(alloc->device, alloc->size);
    }
    alloc->magic = 0;
    free(alloc);
}


/*
 * The descriptor of a new allocation, moved to the lowest free one at or
 * above CUDASIM_VMM_FD_FLOOR when the soft RLIMIT_NOFILE leaves one free
 * there, as a driver takes none of the application's; else it stays where
 * it is, counting against the limit like the application's own (stricter
 * than the driver, never more lenient). Returns the descriptor to keep.
 */
int cudasim_fd_out_of_range(int fd)
{
    struct rlimit lim;
    int high;

    if ((fd >= CUDASIM_VMM_FD_FLOOR) ||
        (getrlimit(RLIMIT_NOFILE, &lim) != 0) ||
        (lim.rlim_cur <= CUDASIM_VMM_FD_FLOOR)) {
        return fd;
    }
    high = fcntl(fd, F_DUPFD_CLOEXEC, CUDASIM_VMM_FD_FLOOR);
    if (high < 0) {
        /* EMFILE: every descriptor from the floor to the limit is in use */
        return fd;
    }
    close(fd);
    return high;
}


static CUresult cudasim_vmm_check_location(const CUmemLocation *loc)
{
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(loc->id)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI
cuMemGetAllocationGranularity(size_t *granularity,
                              const CUmemAllocationProp *prop,
                              CUmemAllocationGranularity_flags option)
{
    CUresult res;

    CUDASIM_ENTER("cuMemGetAllocationGranularity");
    if ((granularity == NULL) || (prop == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((option != CU_MEM_ALLOC_GRANULARITY_MINIMUM) &&
        (option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_vmm_check_location(&prop->location);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    *granularity = cudasim_cfg.vmm_granularity;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle,
                                         size_t size,
                                         const CUmemAllocationProp *prop,
                                         unsigned long long flags)
{
    const unsigned supported = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR |
                               CU_MEM_HANDLE_TYPE_FABRIC;
    cudasim_vmm_alloc_t *alloc;
    cudasim_vmm_hdr_t hdr;
    char name[64];
    CUresult res;
    int fd;

    CUDASIM_ENTER("cuMemCreate");
    if ((handle == NULL) || (prop == NULL) || (flags != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_vmm_check_location(&prop->location);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (prop->requestedHandleTypes & ~supported) {
        /* Win32 handles need Windows */
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if ((size == 0) || (size % cudasim_cfg.vmm_granularity)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) {
        res = cudasim_fabric_create_check(prop->location.id);
        if (res != CUDA_SUCCESS) {
            return res;
        }
    }
    res = cudasim_mem_reserve(prop->location.id, size);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    alloc = calloc(1, sizeof(*alloc));
    if (alloc == NULL) {
        goto err_unreserve;
    }
    alloc->magic        = CUDASIM_VMM_ALLOC_MAGIC;
    alloc->size         = size;
    alloc->device       = prop->location.id;
    alloc->handle_types = prop->requestedHandleTypes;
    alloc->buffer_id    = cudasim_new_buffer_id();
    alloc->handle_refs  = 1;

    if (alloc->handle_types & CU_MEM_HANDLE_TYPE_FABRIC) {
        /* a file of the IMEX domain, which any of its processes opens */
        fd = cudasim_fabric_create_file(CUDASIM_VMM_HDR_SIZE + size,
                                        &alloc->fabric);
    } else {
        snprintf(name, sizeof(name), CUDASIM_VMM_NAME "-%llx",
                 (unsigned long long)alloc->buffer_id);
        fd = memfd_create(name, MFD_CLOEXEC);
    }
    if (fd < 0) {
        cudasim_log("creating the memory's file failed: %m");
        goto err_free;
    }
    fd = cudasim_fd_out_of_range(fd);
    /* the driver allocates the memory here, not at first use */
    if ((ftruncate(fd, CUDASIM_VMM_HDR_SIZE + size) != 0) ||
        (cudasim_mem_commit(fd, 0, CUDASIM_VMM_HDR_SIZE + size) != 0)) {
        cudasim_log("ftruncate/fallocate(memfd, %zu) failed: %m", size);
        goto err_close;
    }
    memset(&hdr, 0, sizeof(hdr));
    strncpy(hdr.magic, CUDASIM_VMM_MAGIC, sizeof(hdr.magic));
    hdr.size         = size;
    hdr.buffer_id    = alloc->buffer_id;
    /* the GPU, not this process's ordinal of it (an importer may see it
     * under another one) */
    hdr.device       = cudasim_device_physical(alloc->device);
    hdr.handle_types = alloc->handle_types;
    hdr.creator_pid  = (uint32_t)getpid();
    if (pwrite(fd, &hdr, sizeof(hdr), 0) != sizeof(hdr)) {
        goto err_close;
    }
    alloc->fd        = fd;
    alloc->fd_offset = CUDASIM_VMM_HDR_SIZE;
    if (alloc->fabric != NULL) {
        cudasim_fabric_publish(alloc->fabric, size, alloc->buffer_id,
                               hdr.device, alloc->handle_types);
    }

    pthread_mutex_lock(&cudasim_vmm_lock);
    alloc->next        = cudasim_vmm_allocs;
    cudasim_vmm_allocs = alloc;
    pthread_mutex_unlock(&cudasim_vmm_lock);

    cudasim_log("cuMemCreate(%zu) = %#llx", size,
                (unsigned long long)alloc->buffer_id);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)alloc;
    return CUDA_SUCCESS;

err_close:
    close(fd);
    if (alloc->fabric != NULL) {
        cudasim_fabric_discard(alloc->fabric);
    }
err_free:
    free(alloc);
err_unreserve:
    cudasim_mem_unreserve(prop->location.id, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
}


CUDASIM_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    cudasim_vmm_alloc_t *alloc;

    CUDASIM_ENTER("cuMemRelease");
    pthread_mutex_lock(&cudasim_vmm_lock);
    alloc = cudasim_vmm_lookup(handle);
    if (alloc == NULL) {
        pthread_mutex_unlock(&cudasim_vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    --alloc->handle_refs;
    cudasim_vmm_put(alloc); /* memory lives on while mapped */
    pthread_mutex_unlock(&cudasim_vmm_lock);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI
cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                       CUmemGenericAllocationHandle handle)
{
    cudasim_vmm_alloc_t *alloc;

    CUDASIM_ENTER("cuMemGetAllocationPropertiesFromHandle");
    if (prop == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&cudasim_vmm_lock);
    alloc = cudasim_vmm_lookup(handle);
    if (alloc == NULL) {
        pthread_mutex_unlock(&cudasim_vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(prop, 0, sizeof(*prop));
    prop->type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id          = alloc->device;
    /* the driver reports no handle types for an imported allocation */
    prop->requestedHandleTypes = (CUmemAllocationHandleType)
                                 (alloc->imported ? 0 : alloc->handle_types);
    pthread_mutex_unlock(&cudasim_vmm_lock);
    return CUDA_SUCCESS;
}


/* ------------------------------------------------------------------ */
/* Address reservations and mappings                                  */
/* ------------------------------------------------------------------ */

CUDASIM_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
                                                 size_t alignment,
                                                 CUdeviceptr addr,
                                                 unsigned long long flags)
{
    const int mflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    size_t gran      = cudasim_cfg.vmm_granularity;
    cudasim_region_t *region;
    uintptr_t base, aligned;
    size_t total;
    void *p;

    CUDASIM_ENTER("cuMemAddressReserve");
    if ((ptr == NULL) || (flags != 0) || (size == 0) || (size % gran)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((alignment != 0) && (alignment & (alignment - 1))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (alignment < gran) {
        alignment = gran;
    }

    region = calloc(1, sizeof(*region));
    if (region == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }

    base = 0;
    if ((addr != 0) && !(addr % alignment)) {
        /* honour the hint when that range is free */
        p = mmap((void*)addr, size, PROT_NONE, mflags | MAP_FIXED_NOREPLACE,
                 -1, 0);
        if (p != MAP_FAILED) {
            if ((uintptr_t)p == addr) {
                base = addr;
            } else {
                munmap(p, size);
            }
        }
    }
    if (base == 0) {
        total = size + alignment;
        p     = mmap(NULL, total, PROT_NONE, mflags, -1, 0);
        if (p == MAP_FAILED) {
            free(region);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        aligned = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
        if (aligned > (uintptr_t)p) {
            munmap(p, aligned - (uintptr_t)p);
        }
        if ((uintptr_t)p + total > aligned + size) {
            munmap((void*)(aligned + size), (uintptr_t)p + total -
                                            (aligned + size));
        }
        base = aligned;
    }

    region->base      = base;
    region->size      = size;
    region->map_size  = size;
    region->kind      = CUDASIM_REGION_VMM_RESERVE;
    region->device    = -1;
    /* the BUFFER_ID of the mappings inside it (cudasim_ptr_attr) */
    region->buffer_id = cudasim_new_buffer_id();

    cudasim_registry_wrlock();
    cudasim_region_insert(region);
    cudasim_registry_unlock();

    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    cudasim_region_t *region, *r;

    CUDASIM_ENTER("cuMemAddressFree");
    cudasim_registry_wrlock();
    region = cudasim_region_find_kind((uintptr_t)ptr,
                                      CUDASIM_REGION_VMM_RESERVE);
    if ((region == NULL) || (region->base != (uintptr_t)ptr) ||
        (region->size != size)) {
        cudasim_registry_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (r = cudasim_region_first(); r != NULL; r = r->next) {
        if ((r->kind == CUDASIM_REGION_VMM_MAP) && (r->base >= region->base) &&
            (r->base - region->base < region->size)) {
            /* still mapped */
            cudasim_registry_unlock();
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    cudasim_region_remove(region);
    cudasim_registry_unlock();

    munmap((void*)region->base, region->size);
    free(region);
    return CUDA_SUCCESS;
}


/* with the registry lock held: does [base, base+size) overlap a mapping? */
static int cudasim_vmm_overlaps(uintptr_t base, size_t size)
{
    cudasim_region_t *r;

    for (r = cudasim_region_first(); r != NULL; r = r->next) {
        if ((r->kind == CUDASIM_REGION_VMM_MAP) && (r->base < base + size) &&
            (base < r->base + r->size)) {
            return 1;
        }
    }
    return 0;
}


CUDASIM_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size,
                                      size_t offset,
                                      CUmemGenericAllocationHandle handle,
                                      unsigned long long flags)
{
    size_t gran = cudasim_cfg.vmm_granularity;
    cudasim_region_t *region, *resv;
    cudasim_vmm_alloc_t *alloc;
    CUresult res = CUDA_SUCCESS;
    void *p;

    CUDASIM_ENTER("cuMemMap");
    if ((flags != 0) || (offset != 0) || (size == 0) || (size % gran) ||
        ((uintptr_t)ptr % gran)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    region = calloc(1, sizeof(*region));
    if (region == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }

    pthread_mutex_lock(&cudasim_vmm_lock);
    alloc = cudasim_vmm_lookup(handle);
    if (alloc == NULL) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out_unlock_vmm;
    }
    if (size > alloc->size) {
        /* what driver 580 answers for a mapping past the allocation's end
         * (docs/testing.md, "What a GPU showed") */
        res = CUDA_ERROR_NOT_SUPPORTED;
        goto out_unlock_vmm;
    }

    cudasim_registry_wrlock();
    resv = cudasim_region_find_kind((uintptr_t)ptr, CUDASIM_REGION_VMM_RESERVE);
    if ((resv == NULL) || (size > resv->size - ((uintptr_t)ptr - resv->base)) ||
        cudasim_vmm_overlaps((uintptr_t)ptr, size)) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out_unlock;
    }
    /* no access until cuMemSetAccess (an imported allocation's backing is
     * PROT_NONE: mremap of 0 bytes of a shared mapping maps the same pages
     * again, with its protection) */
    if (alloc->fd >= 0) {
        p = mmap((void*)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 alloc->fd, alloc->fd_offset + offset);
    } else {
        /* the system call, not mremap(): UCX's memory hooks (UCM) replace
         * mremap() and dropped the new address of MREMAP_FIXED (seen with
         * UCX 1.13.1) */
        p = (void*)syscall(SYS_mremap, (char*)alloc->backing + offset,
                           (size_t)0, size, MREMAP_MAYMOVE | MREMAP_FIXED,
                           (void*)ptr);
    }
    if (p == MAP_FAILED) {
        cudasim_log("mapping VMM allocation %#llx failed: %m",
                    (unsigned long long)alloc->buffer_id);
        res = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    /* the emulator's copies use an alias of the same bytes; the mapping at
     * ptr stays PROT_NONE whatever access cuMemSetAccess grants: device
     * memory is not CPU memory (docs/driver-contract.md) */
    region->alias = (alloc->fd >= 0) ?
                    mmap(NULL, size, PROT_NONE, MAP_SHARED, alloc->fd,
                         alloc->fd_offset + offset) :
                    (void*)syscall(SYS_mremap, p, (size_t)0, size,
                                   MREMAP_MAYMOVE);
    if ((region->alias == MAP_FAILED) ||
        (mprotect(region->alias, size, PROT_READ | PROT_WRITE) != 0)) {
        cudasim_log("aliasing VMM allocation %#llx failed: %m",
                    (unsigned long long)alloc->buffer_id);
        if (region->alias != MAP_FAILED) {
            munmap(region->alias, size);
        }
        mmap(p, size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        res = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }

    region->base         = (uintptr_t)ptr;
    region->size         = size;
    region->map_size     = size;
    region->kind         = CUDASIM_REGION_VMM_MAP;
    region->device       = alloc->device;
    region->ctx          = NULL;
    region->buffer_id    = alloc->buffer_id;
    region->handle_types = alloc->handle_types;
    region->access       = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    region->access_devices = 0;
    region->owner        = alloc;
    cudasim_region_insert(region);
    ++alloc->map_refs;
    region = NULL;

out_unlock:
    cudasim_registry_unlock();
out_unlock_vmm:
    pthread_mutex_unlock(&cudasim_vmm_lock);
    free(region);
    return res;
}


/*
 * With the registry lock held: collect the mappings that exactly tile
 * [ptr, ptr+size) into maps[]; returns their number, or -1 if the range is
 * not a union of whole, contiguous mappings.
 */
static int cudasim_vmm_tile(uintptr_t ptr, size_t size,
                            cudasim_region_t ***maps_p)
{
    cudasim_region_t **maps = NULL, **tmp, *r;
    uintptr_t addr = ptr, end = ptr + size;
    int n = 0;

    if ((size == 0) || (end < ptr)) {
        return -1;
    }
    while (addr < end) {
        r = cudasim_region_find_kind(addr, CUDASIM_REGION_VMM_MAP);
        if ((r == NULL) || (r->base != addr) || (r->base + r->size > end)) {
            free(maps);
            return -1;
        }
        tmp = realloc(maps, (n + 1) * sizeof(*maps));
        if (tmp == NULL) {
            free(maps);
            return -1;
        }
        maps      = tmp;
        maps[n++] = r;
        addr     += r->size;
    }
    *maps_p = maps;
    return n;
}


CUDASIM_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    cudasim_region_t **maps;
    cudasim_vmm_alloc_t *alloc;
    int i, n;

    CUDASIM_ENTER("cuMemUnmap");
    pthread_mutex_lock(&cudasim_vmm_lock);
    cudasim_registry_wrlock();
    n = cudasim_vmm_tile((uintptr_t)ptr, size, &maps);
    if (n < 0) {
        cudasim_registry_unlock();
        pthread_mutex_unlock(&cudasim_vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (i = 0; i < n; ++i) {
        /* back to a bare reservation */
        mmap((void*)maps[i]->base, maps[i]->size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        munmap(maps[i]->alias, maps[i]->size);
        cudasim_region_remove(maps[i]);
    }
    cudasim_registry_unlock();

    for (i = 0; i < n; ++i) {
        alloc = maps[i]->owner;
        --alloc->map_refs;
        cudasim_vmm_put(alloc);
        free(maps[i]);
    }
    pthread_mutex_unlock(&cudasim_vmm_lock);
    free(maps);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                            const CUmemAccessDesc *desc,
                                            size_t count)
{
    cudasim_region_t **maps;
    int access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    uint64_t grant = 0, revoke = 0;
    int prot, i, n;
    CUresult res;
    size_t k;

    CUDASIM_ENTER("cuMemSetAccess");
    if ((desc == NULL) || (count == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (k = 0; k < count; ++k) {
        res = cudasim_vmm_check_location(&desc[k].location);
        if (res != CUDA_SUCCESS) {
            return res;
        }
        switch (desc[k].flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE:
        case CU_MEM_ACCESS_FLAGS_PROT_READ:
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
            /* every device shares one (host) address space here: the
             * widest access granted to any device applies */
            access |= desc[k].flags;
            if (desc[k].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE) {
                revoke |= 1ull << desc[k].location.id;
            } else {
                grant |= 1ull << desc[k].location.id;
            }
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    prot = (access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) ?
           (PROT_READ | PROT_WRITE) :
           (access == CU_MEM_ACCESS_FLAGS_PROT_READ) ? PROT_READ : PROT_NONE;

    cudasim_registry_wrlock();
    n = cudasim_vmm_tile((uintptr_t)ptr, size, &maps);
    if (n < 0) {
        cudasim_registry_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (i = 0; i < n; ++i) {
        /* another device reaches the memory only over peer access */
        for (k = 0; k < count; ++k) {
            if ((desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) &&
                (desc[k].location.id != maps[i]->device) &&
                !cudasim_cfg.peer_access) {
                cudasim_registry_unlock();
                free(maps);
                return CUDA_ERROR_INVALID_DEVICE;
            }
        }
    }
    for (i = 0; i < n; ++i) {
        /* the access is the devices', checked by the copies; the CPU has
         * none (the mapping at base stays PROT_NONE) */
        if (maps[i]->access == CU_MEM_ACCESS_FLAGS_PROT_NONE) {
            cudasim_mem_populate(maps[i]->alias, maps[i]->size, prot);
        }
        maps[i]->access          = access;
        maps[i]->access_devices  = (maps[i]->access_devices | grant) & ~revoke;
    }
    cudasim_registry_unlock();
    free(maps);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI
cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    cudasim_vmm_alloc_t *alloc = NULL;
    cudasim_region_t *region;

    CUDASIM_ENTER("cuMemRetainAllocationHandle");
    if (handle == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&cudasim_vmm_lock);
    cudasim_registry_rdlock();
    region = cudasim_region_find_kind((uintptr_t)addr, CUDASIM_REGION_VMM_MAP);
    /* memory of a stream-ordered pool is no allocation of the caller's:
     * refused, as the driver refuses it */
    if ((region != NULL) && (region->pool == NULL)) {
        alloc = region->owner;
        ++alloc->handle_refs;
    }
    cudasim_registry_unlock();
    pthread_mutex_unlock(&cudasim_vmm_lock);

    if (alloc == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)alloc;
    return CUDA_SUCCESS;
}


/* ------------------------------------------------------------------ */
/* Shareable handles                                                  */
/* ------------------------------------------------------------------ */

/* a CUmemFabricHandle of an allocation that requested FABRIC */
static CUresult cudasim_vmm_export_fabric(void *out,
                                          CUmemGenericAllocationHandle handle)
{
    cudasim_vmm_alloc_t *alloc;
    CUresult res;

    pthread_mutex_lock(&cudasim_vmm_lock);
    alloc = cudasim_vmm_lookup(handle);
    if (alloc == NULL) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else if (!cudasim_fabric_supported(alloc->device)) {
        /* a device without fabric handles (the attribute 0) */
        res = CUDA_ERROR_NOT_SUPPORTED;
    } else if (!(alloc->handle_types & CU_MEM_HANDLE_TYPE_FABRIC)) {
        /* not requested at creation, as for a POSIX fd */
        res = CUDA_ERROR_INVALID_VALUE;
    } else if (alloc->imported) {
        /* as a POSIX-fd import: the module never exports what it imported */
        res = CUDA_ERROR_NOT_SUPPORTED;
    } else {
        res = cudasim_fabric_export(alloc->fabric, out);
    }
    pthread_mutex_unlock(&cudasim_vmm_lock);
    return res;
}


CUDASIM_API CUresult CUDAAPI
cuMemExportToShareableHandle(void *shareableHandle,
                             CUmemGenericAllocationHandle handle,
                             CUmemAllocationHandleType handleType,
                             unsigned long long flags)
{
    cudasim_vmm_alloc_t *alloc;
    int fd;

    CUDASIM_ENTER("cuMemExportToShareableHandle");
    if ((shareableHandle == NULL) || (flags != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (handleType == CU_MEM_HANDLE_TYPE_FABRIC) {
        return cudasim_vmm_export_fabric(shareableHandle, handle);
    }
    if ((handleType == CU_MEM_HANDLE_TYPE_WIN32) ||
        (handleType == CU_MEM_HANDLE_TYPE_WIN32_KMT)) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        return CUDA_ERROR_INVALID_VALUE;
    }

    pthread_mutex_lock(&cudasim_vmm_lock);
    alloc = cudasim_vmm_lookup(handle);
    if ((alloc == NULL) || !(alloc->handle_types & handleType)) {
        /* not created with this handle type requested */
        pthread_mutex_unlock(&cudasim_vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (alloc->imported) {
        /* imported: the emulator keeps no descriptor to export it again */
        pthread_mutex_unlock(&cudasim_vmm_lock);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* whether the driver's fd is close-on-exec is not documented (cuda.h):
     * the emulator answers the case a caller must handle, an fd that an
     * exec'd child inherits */
    fd = fcntl(alloc->fd, F_DUPFD, 0);
    pthread_mutex_unlock(&cudasim_vmm_lock);
    if (fd < 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* a new descriptor; the caller owns it */
    *(int*)shareableHandle = fd;
    return CUDA_SUCCESS;
}


int cudasim_memfd_name_ok(int fd, const char *name)
{
    char path[64], target[256], prefix[64];
    ssize_t len;

    snprintf(prefix, sizeof(prefix), "/memfd:%s", name);

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    len = readlink(path, target, sizeof(target) - 1);
    if (len < 0) {
        return 1;
    }
    target[len] = '\0';
    return !strncmp(target, prefix, strlen(prefix));
}


/*
 * Test hook: the next @a n calls of cuMemImportFromShareableHandle wait for
 * each other, so that @a n threads are importing at once (a test of racing
 * first uses syncs on it). A guard of 60 s lets them go if fewer come (the
 * test then fails on cudasim_import_barrier_met() instead of hanging).
 */
static pthread_mutex_t cudasim_import_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  cudasim_import_cond = PTHREAD_COND_INITIALIZER;
static int cudasim_import_want, cudasim_import_arrived, cudasim_import_met;

CUDASIM_API int cudasim_import_barrier(int n)
{
    if (n < 0) {
        return -1;
    }
    pthread_mutex_lock(&cudasim_import_lock);
    cudasim_import_want    = n;
    cudasim_import_arrived = 0;
    cudasim_import_met     = 0;
    pthread_mutex_unlock(&cudasim_import_lock);
    return 0;
}

CUDASIM_API int cudasim_import_barrier_met(void)
{
    int met;

    pthread_mutex_lock(&cudasim_import_lock);
    met = cudasim_import_met;
    pthread_mutex_unlock(&cudasim_import_lock);
    return met;
}

static void cudasim_import_barrier_wait(void)
{
    struct timespec guard;

    pthread_mutex_lock(&cudasim_import_lock);
    if (cudasim_import_arrived < cudasim_import_want) {
        if (++cudasim_import_arrived == cudasim_import_want) {
            cudasim_import_met = 1;
            pthread_cond_broadcast(&cudasim_import_cond);
        } else {
            clock_gettime(CLOCK_REALTIME, &guard);
            guard.tv_sec += 60;
            while (!cudasim_import_met &&
                   (pthread_cond_timedwait(&cudasim_import_cond,
                                           &cudasim_import_lock,
                                           &guard) == 0)) {
            }
        }
    }
    pthread_mutex_unlock(&cudasim_import_lock);
}


CUresult cudasim_vmm_wrap(int fd, off_t offset, size_t size, int device,
                          unsigned handle_types, uint64_t buffer_id,
                          CUmemGenericAllocationHandle *handle)
{
    cudasim_vmm_alloc_t *alloc;
    void *backing;

    alloc = calloc(1, sizeof(*alloc));
    if (alloc == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* the caller keeps ownership of fd; we keep a mapping, no descriptor,
     * unless told to: a tool that runs the process (valgrind) cannot map a
     * mapping again (mremap of 0 bytes), a descriptor it can */
    alloc->fd = -1;
    backing   = NULL;
    if (cudasim_env_u64("CUDASIM_IMPORT_KEEPS_FD", 0)) {
        alloc->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (alloc->fd >= 0) {
            alloc->fd = cudasim_fd_out_of_range(alloc->fd);
        }
    } else {
        backing = mmap(NULL, size, PROT_NONE, MAP_SHARED, fd, offset);
    }
    if ((backing == MAP_FAILED) || ((backing == NULL) && (alloc->fd < 0))) {
        cudasim_log("keeping %zu bytes of fd %d at %lld failed: %m", size, fd,
                    (long long)offset);
        free(alloc);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    alloc->magic        = CUDASIM_VMM_ALLOC_MAGIC;
    alloc->fd_offset    = offset;
    alloc->backing      = backing;
    alloc->size         = size;
    alloc->device       = device;
    alloc->handle_types = handle_types;
    alloc->buffer_id    = buffer_id;
    alloc->imported     = 1;
    alloc->handle_refs  = 1;

    pthread_mutex_lock(&cudasim_vmm_lock);
    alloc->next        = cudasim_vmm_allocs;
    cudasim_vmm_allocs = alloc;
    pthread_mutex_unlock(&cudasim_vmm_lock);

    *handle = (CUmemGenericAllocationHandle)(uintptr_t)alloc;
    return CUDA_SUCCESS;
}


/* the imported allocation @a handle holds fabric memory through @a fabric */
static void cudasim_vmm_hold_fabric(CUmemGenericAllocationHandle handle,
                                    cudasim_fabric_t *fabric)
{
    pthread_mutex_lock(&cudasim_vmm_lock);
    ((cudasim_vmm_alloc_t*)(uintptr_t)handle)->fabric = fabric;
    pthread_mutex_unlock(&cudasim_vmm_lock);
}


/* the memory a CUmemFabricHandle names, in any process of its IMEX domain
 * (cudasim_fabric.c) */
static CUresult cudasim_vmm_import_fabric(CUmemGenericAllocationHandle *handle,
                                          const void *fabric_handle)
{
    cudasim_fabric_info_t info;
    cudasim_fabric_t *fabric;
    CUresult res;
    int fd;

    res = cudasim_fabric_open(fabric_handle, &fd, &fabric, &info);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    res = cudasim_vmm_wrap(fd, info.offset, info.size, info.device,
                           info.handle_types, info.buffer_id, handle);
    close(fd);
    if (res != CUDA_SUCCESS) {
        cudasim_fabric_put(fabric);
        return res;
    }
    cudasim_vmm_hold_fabric(*handle, fabric);
    cudasim_log("imported fabric allocation %#llx (%llu bytes)",
                (unsigned long long)info.buffer_id,
                (unsigned long long)info.size);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI
cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                               void *osHandle,
                               CUmemAllocationHandleType shHandleType)
{
    int fd = (int)(intptr_t)osHandle;
    cudasim_fabric_t *fabric = NULL;
    cudasim_vmm_hdr_t hdr;
    struct stat st;
    CUresult res;
    int device;

    CUDASIM_ENTER("cuMemImportFromShareableHandle");
    if (handle == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    cudasim_import_barrier_wait();
    if (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC) {
        return cudasim_vmm_import_fabric(handle, osHandle);
    }
    if ((shHandleType == CU_MEM_HANDLE_TYPE_WIN32) ||
        (shHandleType == CU_MEM_HANDLE_TYPE_WIN32_KMT)) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((fd < 0) || (fstat(fd, &st) != 0) || !S_ISREG(st.st_mode) ||
        !(cudasim_memfd_name_ok(fd, CUDASIM_VMM_NAME) ||
          cudasim_fabric_fd_ok(fd)) ||
        (pread(fd, &hdr, sizeof(hdr), 0) != sizeof(hdr)) ||
        strncmp(hdr.magic, CUDASIM_VMM_MAGIC, sizeof(hdr.magic)) ||
        ((uint64_t)st.st_size != CUDASIM_VMM_HDR_SIZE + hdr.size)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* a process cannot import memory of a GPU it cannot see
     * (CUDASIM_VISIBLE_DEVICES): CUDA_ERROR_NOT_SUPPORTED, as the driver */
    device = cudasim_device_ordinal(hdr.device);
    if (device < 0) {
        cudasim_log("cuMemImportFromShareableHandle(fd %d): memory of GPU %d, "
                    "not visible to this process", fd, (int)hdr.device);
        return CUDA_ERROR_NOT_SUPPORTED;
    }

    /* the fd of memory that requested FABRIC too: one more handle on it,
     * as a fabric import (the memory lives while any holds it) */
    if ((hdr.handle_types & CU_MEM_HANDLE_TYPE_FABRIC) &&
        (cudasim_fabric_attach_fd(fd, &fabric) < 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_vmm_wrap(fd, CUDASIM_VMM_HDR_SIZE, hdr.size, device,
                           hdr.handle_types, hdr.buffer_id, handle);
    if (res != CUDA_SUCCESS) {
        if (fabric != NULL) {
            cudasim_fabric_put(fabric);
        }
        return res;
    }
    if (fabric != NULL) {
        cudasim_vmm_hold_fabric(*handle, fabric);
    }
    cudasim_log("imported VMM allocation %#llx (%llu bytes) from fd %d",
                (unsigned long long)hdr.buffer_id,
                (unsigned long long)hdr.size, fd);
    return CUDA_SUCCESS;
}
