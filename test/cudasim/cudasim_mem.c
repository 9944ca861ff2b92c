/*
 * cudasim: legacy device memory (cuMemAlloc) backed by POSIX shared memory,
 * legacy IPC handles, address ranges and pointer attributes.
 */
#include "cudasim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define CUDASIM_IPC_MAGIC 0x43534950u /* "CSIP" */

/* Layout of the 64 bytes of a CUipcMemHandle made by the emulator */
typedef struct {
    uint32_t magic;
    uint32_t pid;       /* exporter pid, in the exporter's PID namespace */
    uint32_t pidns;     /* inode of the exporter's /proc/self/ns/pid */
    int32_t  device;
    uint64_t size;
    uint64_t buffer_id;
    char     name[32];  /* POSIX shm object name */
} cudasim_ipc_handle_t;

_Static_assert(sizeof(cudasim_ipc_handle_t) == CU_IPC_HANDLE_SIZE,
               "IPC handle layout");

/* owner of a legacy allocation or an imported mapping */
typedef struct {
    char     name[32];
    uint32_t pid;        /* creator (allocations) or exporter (imports) */
    uint32_t pidns;
    int      refcount;   /* imports */
} cudasim_legacy_t;

static uint64_t cudasim_shm_seq;


static uint32_t cudasim_pidns_inode(void)
{
    struct stat st;

    if (stat("/proc/self/ns/pid", &st) != 0) {
        return 0;
    }
    return (uint32_t)st.st_ino;
}


/*
 * A GPU's memory is resident from cuMemAlloc/cuMemCreate on: the first copy
 * to it pays no allocation. Files grown with ftruncate() have no pages yet,
 * and the first store to each page would allocate and zero it (on a VM also
 * a hypervisor trap, ~10 us a page): fallocate() allocates them now, and
 * fails (ENOSPC) where the memory is not there, as the driver reports
 * CUDA_ERROR_OUT_OF_MEMORY.
 */
int cudasim_mem_commit(int fd, off_t offset, size_t size)
{
    if (fallocate(fd, 0, offset, size) == 0) {
        return 0;
    }
    if ((errno == EOPNOTSUPP) || (errno == ENOSYS)) {
        return 0; /* no fallocate on this file system: pages on first use */
    }
    return -1;
}


/*
 * A GPU's page tables hold the whole mapping once it is accessible; a
 * process's page tables fill on first touch (a minor fault per 4 KiB page,
 * ~2 us). Populate them up front (Linux 5.14+; older kernels fault lazily).
 */
void cudasim_mem_populate(void *addr, size_t size, int prot)
{
#ifdef MADV_POPULATE_WRITE
    if (prot & PROT_WRITE) {
        (void)madvise(addr, size, MADV_POPULATE_WRITE);
    } else if (prot & PROT_READ) {
        (void)madvise(addr, size, MADV_POPULATE_READ);
    }
#endif
}


int cudasim_mem_map_device(int fd, off_t offset, size_t size, void **addr_p,
                           void **alias_p)
{
    void *addr, *alias;

    addr = mmap(NULL, size, PROT_NONE, MAP_SHARED, fd, offset);
    if (addr == MAP_FAILED) {
        return -1;
    }
    alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    if (alias == MAP_FAILED) {
        munmap(addr, size);
        return -1;
    }
    cudasim_mem_populate(alias, size, PROT_READ | PROT_WRITE);
    *addr_p  = addr;
    *alias_p = alias;
    return 0;
}


static size_t cudasim_page_align(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    return (size + page - 1) & ~(page - 1);
}


CUDASIM_API CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    cudasim_legacy_t *owner;
    cudasim_region_t *region;
    uint32_t rnd = 0;
    size_t map_size;
    CUcontext ctx;
    CUresult res;
    void *addr;
    int fd;

    CUDASIM_ENTER("cuMemAlloc");
    if (dptr == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (bytesize == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_mem_reserve(ctx->device, bytesize);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    owner  = calloc(1, sizeof(*owner));
    region = calloc(1, sizeof(*region));
    if ((owner == NULL) || (region == NULL)) {
        goto err_free;
    }

    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd)) {
        rnd = (uint32_t)random();
    }
    snprintf(owner->name, sizeof(owner->name), "/cudasim-%x-%x-%08x",
             (unsigned)getpid(),
             (unsigned)__atomic_add_fetch(&cudasim_shm_seq, 1,
                                          __ATOMIC_RELAXED),
             rnd);
    fd = shm_open(owner->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        cudasim_log("shm_open(%s) failed: %m", owner->name);
        goto err_free;
    }
    owner->pid = (uint32_t)getpid();
    /* the real driver lets any process (any uid) open an IPC handle */
    (void)fchmod(fd, 0666);
    map_size = cudasim_page_align(bytesize);
    if ((ftruncate(fd, map_size) != 0) ||
        (cudasim_mem_commit(fd, 0, map_size) != 0)) {
        cudasim_log("ftruncate/fallocate(%s, %zu) failed: %m", owner->name,
                    map_size);
        goto err_unlink;
    }
    if (cudasim_mem_map_device(fd, 0, map_size, &addr, &region->alias) != 0) {
        cudasim_log("mmap(%s, %zu) failed: %m", owner->name, map_size);
        goto err_unlink;
    }
    close(fd);

    region->base         = (uintptr_t)addr;
    region->size         = bytesize;
    region->map_size     = map_size;
    region->kind         = CUDASIM_REGION_LEGACY;
    region->device       = ctx->device;
    region->ctx          = ctx;
    region->buffer_id    = cudasim_new_buffer_id();
    region->handle_types = CU_MEM_HANDLE_TYPE_NONE;
    region->access       = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    region->owner        = owner;

    cudasim_registry_wrlock();
    cudasim_region_insert(region);
    cudasim_registry_unlock();

    cudasim_log("cuMemAlloc(%zu) = %p (%s)", bytesize, addr, owner->name);
    *dptr = (CUdeviceptr)addr;
    return CUDA_SUCCESS;

err_unlink:
    close(fd);
    shm_unlink(owner->name);
err_free:
    free(owner);
    free(region);
    cudasim_mem_unreserve(ctx->device, bytesize);
    return CUDA_ERROR_OUT_OF_MEMORY;
}


/*
 * Managed memory: the emulated device has none (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
 * and ..._CONCURRENT_MANAGED_ACCESS answer 0, cudasim_device.c), so
 * cuMemAllocManaged answers CUDA_ERROR_NOT_SUPPORTED (cuda.h 13.0 line 9080,
 * in its list of results) once its arguments and context are checked:
 * "flags - Must be one of CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST"
 * (line 9071).
 */
CUDASIM_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr,
                                               size_t bytesize,
                                               unsigned int flags)
{
    CUresult res;

    CUDASIM_ENTER("cuMemAllocManaged");
    if ((dptr == NULL) || (bytesize == 0) ||
        ((flags != CU_MEM_ATTACH_GLOBAL) && (flags != CU_MEM_ATTACH_HOST))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}


/*
 * cuda.h 13.0 line 14685: "The memory range must refer to managed memory
 * allocated via cuMemAllocManaged or declared via __managed__ variables".
 * There is none here (cuMemAllocManaged above), so every range is refused
 * with CUDA_ERROR_INVALID_VALUE, after the size checks of each attribute
 * (4 bytes, a non-zero multiple of 4 for ACCESSED_BY, sizeof(CUmemLocationType)
 * for the *_TYPE ones).
 */
CUDASIM_API CUresult CUDAAPI cuMemRangeGetAttribute(void *data,
                                                    size_t dataSize,
                                                    CUmem_range_attribute attribute,
                                                    CUdeviceptr devPtr,
                                                    size_t count)
{
    size_t need;

    CUDASIM_ENTER("cuMemRangeGetAttribute");
    switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
        need = ((dataSize != 0) && (dataSize % 4 == 0)) ? dataSize : 0;
        break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
        need = sizeof(CUmemLocationType);
        break;
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        need = 4;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((data == NULL) || (dataSize != need) || (devPtr == 0) ||
        (count == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* not managed memory */
    return CUDA_ERROR_INVALID_VALUE;
}


CUDASIM_API CUresult CUDAAPI cuMemFree(CUdeviceptr dptr)
{
    cudasim_legacy_t *owner;
    cudasim_region_t *region;
    CUresult res;

    CUDASIM_ENTER("cuMemFree");
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    /* like the real driver, freeing waits for work already submitted */
    cudasim_streams_sync_all();

    cudasim_registry_wrlock();
    region = cudasim_region_find_kind((uintptr_t)dptr, CUDASIM_REGION_LEGACY);
    if ((region == NULL) || (region->base != (uintptr_t)dptr)) {
        cudasim_registry_unlock();
        /* cuda.h (cuMemPoolImportPointer): "The pointer may be freed with
         * cuMemFree or cuMemFreeAsync"; so may a pool's own */
        return cudasim_pool_free(dptr);
    }
    cudasim_region_remove(region);
    cudasim_registry_unlock();

    owner = region->owner;
    /* mappings opened by other processes stay valid */
    shm_unlink(owner->name);
    munmap((void*)region->base, region->map_size);
    munmap(region->alias, region->map_size);
    cudasim_mem_unreserve(region->device, region->size);
    cudasim_log("cuMemFree(%p) (%s)", (void*)region->base, owner->name);
    free(owner);
    free(region);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase,
                                                  size_t *psize,
                                                  CUdeviceptr dptr)
{
    cudasim_region_t *region;
    CUresult res;

    CUDASIM_ENTER("cuMemGetAddressRange");
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    cudasim_registry_rdlock();
    region = cudasim_region_find((uintptr_t)dptr);
    if (region == NULL) {
        cudasim_registry_unlock();
        return CUDA_ERROR_NOT_FOUND;
    }
    if (pbase != NULL) {
        *pbase = (CUdeviceptr)region->base;
    }
    if (psize != NULL) {
        *psize = region->size;
    }
    cudasim_registry_unlock();
    return CUDA_SUCCESS;
}


/* At exit, like the real driver freeing a process's memory: no shm object
 * outlives its creator (a fork()ed child that exits leaves them alone) */
__attribute__((destructor)) static void cudasim_mem_cleanup(void)
{
    cudasim_legacy_t *owner;
    cudasim_region_t *r;

    cudasim_registry_wrlock();
    for (r = cudasim_region_first(); r != NULL; r = r->next) {
        owner = r->owner;
        if ((r->kind == CUDASIM_REGION_LEGACY) &&
            (owner->pid == (uint32_t)getpid())) {
            shm_unlink(owner->name);
        }
    }
    cudasim_registry_unlock();
}


/* ------------------------------------------------------------------ */
/* Legacy IPC                                                         */
/* ------------------------------------------------------------------ */

/*
 * Whether process @pid of our PID namespace has exited (gone, or a zombie
 * not reaped yet): the driver frees a process's memory when it exits, killed
 * or not, and its handles no longer open. 0 when /proc is not our PID
 * namespace's (it cannot tell).
 */
static int cudasim_process_exited(uint32_t pid)
{
    char path[64], buf[512], *p;
    ssize_t n;
    int fd;

    n = readlink("/proc/self", buf, sizeof(buf) - 1);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    if (strtoul(buf, NULL, 10) != (unsigned long)getpid()) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%u/stat", (unsigned)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    /* "pid (comm) S ...": the state follows the last ')' */
    p = strrchr(buf, ')');
    return (p != NULL) && (p[1] == ' ') && ((p[2] == 'Z') || (p[2] == 'X'));
}

CUDASIM_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle,
                                               CUdeviceptr dptr)
{
    cudasim_ipc_handle_t h;
    cudasim_legacy_t *owner;
    cudasim_region_t *region;
    CUresult res;

    CUDASIM_ENTER("cuIpcGetMemHandle");
    if (pHandle == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    memset(&h, 0, sizeof(h));
    cudasim_registry_rdlock();
    /* any address inside the allocation gives the handle of the whole
     * allocation; VMM and imported memory are not legacy-IPC capable */
    region = cudasim_region_find_kind((uintptr_t)dptr, CUDASIM_REGION_LEGACY);
    if (region == NULL) {
        cudasim_registry_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    owner       = region->owner;
    h.magic     = CUDASIM_IPC_MAGIC;
    h.pid       = (uint32_t)getpid();
    h.pidns     = cudasim_pidns_inode();
    /* the GPU, not this process's ordinal of it: the opener may see it
     * under another one */
    h.device    = cudasim_device_physical(region->device);
    h.size      = region->size;
    h.buffer_id = region->buffer_id;
    memcpy(h.name, owner->name, sizeof(h.name));
    cudasim_registry_unlock();

    memcpy(pHandle->reserved, &h, sizeof(h));
    return CUDA_SUCCESS;
}


/*
 * Whether legacy IPC handles of another PID namespace are refused, as older
 * drivers are reported to do: CUDASIM_LEGACY_IPC_PIDNS=refuse (default
 * open). Read at each open, so that a test sets it for one open.
 */
static int cudasim_legacy_pidns_refused(void)
{
    const char *value = getenv("CUDASIM_LEGACY_IPC_PIDNS");

    return (value != NULL) && !strcmp(value, "refuse");
}


static CUresult cudasim_ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                 unsigned int Flags)
{
    cudasim_legacy_t *owner, *other;
    cudasim_ipc_handle_t h;
    cudasim_region_t *region, *r;
    size_t map_size;
    CUcontext ctx;
    struct stat st;
    CUresult res;
    void *addr;
    int fd, device;

    if (pdptr == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (Flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    memcpy(&h, handle.reserved, sizeof(h));
    if ((h.magic != CUDASIM_IPC_MAGIC) || (h.name[0] != '/') ||
        (memchr(h.name, '\0', sizeof(h.name)) == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The exporting process cannot open its own handle (cuda.h:
     * CUDA_ERROR_INVALID_CONTEXT). The handle names its exporter by pid
     * number: an importer in another PID namespace whose pid number there
     * is the exporter's in its own is taken for the exporter too. vLLM
     * users report 201 (invalid device context) between prefill and decode
     * pods without hostPID (vllm#52607, #55906), where identical pods get
     * identical pids (docs/driver-contract.md: the one explanation
     * that fits every report, not yet verified on a GPU). */
    if (h.pid == (uint32_t)getpid()) {
        cudasim_log("cuIpcOpenMemHandle(%s): exporter pid %u is our pid "
                    "number (PID namespaces %u and %u)", h.name, h.pid,
                    h.pidns, cudasim_pidns_inode());
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    /* Another PID namespace: driver 580.159.04 on an H200 opened a handle
     * exported from the parent PID namespace in a process with its own
     * /proc (docs/testing.md, "What a GPU showed"), and LMCache opens them
     * between isolated pods (LMCache #4677, #4807). Older drivers are
     * reported to refuse it with "invalid device context" (stock UCX's
     * cuda_ipc never tries): CUDASIM_LEGACY_IPC_PIDNS=refuse. */
    if ((h.pidns != cudasim_pidns_inode()) && cudasim_legacy_pidns_refused()) {
        cudasim_log("cuIpcOpenMemHandle(%s): exporter in PID namespace %u, "
                    "we are in %u (CUDASIM_LEGACY_IPC_PIDNS=refuse)", h.name,
                    h.pidns, cudasim_pidns_inode());
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    /* memory of a GPU this process cannot see (CUDASIM_VISIBLE_DEVICES)
     * cannot be mapped here: users report "invalid argument" when the
     * exporter's GPU is not visible in the importing container
     * (docs/driver-contract.md), CUDA_ERROR_INVALID_VALUE's text */
    device = cudasim_device_ordinal(h.device);
    if (device < 0) {
        cudasim_log("cuIpcOpenMemHandle(%s): memory of GPU %d, not visible "
                    "to this process", h.name, h.device);
        return CUDA_ERROR_INVALID_VALUE;
    }

    /* memory of another device: the real driver maps it only over peer
     * access, which it enables itself with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
     * (the emulator has no cuCtxEnablePeerAccess: without the flag, access
     * is never enabled, and it refuses at once instead of faulting later) */
    if (device != ctx->device) {
        if (!cudasim_cfg.peer_access) {
            cudasim_log("cuIpcOpenMemHandle(%s): device %d has no peer access "
                        "to device %d", h.name, ctx->device, device);
            return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
        }
        if (!(Flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
            cudasim_log("cuIpcOpenMemHandle(%s): memory of device %d opened "
                        "on device %d without LAZY_ENABLE_PEER_ACCESS",
                        h.name, device, ctx->device);
            return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
        }
    }

    owner  = calloc(1, sizeof(*owner));
    region = calloc(1, sizeof(*region));
    if ((owner == NULL) || (region == NULL)) {
        free(owner);
        free(region);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }

    cudasim_registry_wrlock();
    for (r = cudasim_region_first(); r != NULL; r = r->next) {
        if (r->kind != CUDASIM_REGION_IPC_IMPORT) {
            continue;
        }
        other = r->owner;
        if ((other->pidns == h.pidns) && (other->pid == h.pid) &&
            !strcmp(other->name, h.name) &&
            (((CUcontext)r->ctx)->device == ctx->device)) {
            /* already open in this context: as the real driver does
             * (cuda.h), the reference count goes up by one and the same
             * pointer is returned; one mapping per allocation and device */
            ++other->refcount;
            *pdptr = (CUdeviceptr)r->base;
            cudasim_registry_unlock();
            free(owner);
            free(region);
            return CUDA_SUCCESS;
        }
    }

    /* our /proc tells only of our PID namespace's processes */
    if ((h.pidns == cudasim_pidns_inode()) && cudasim_process_exited(h.pid)) {
        /* a killed exporter's memory is gone with it, as on a GPU (one that
         * exited normally unlinked it at exit) */
        cudasim_log("cuIpcOpenMemHandle(%s): exporter pid %u exited", h.name,
                    h.pid);
        shm_unlink(h.name);
        res = CUDA_ERROR_INVALID_VALUE;
        goto err_unlock;
    }
    fd = shm_open(h.name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        /* the allocation was freed (or its exporter exited) */
        cudasim_log("cuIpcOpenMemHandle(%s): %m", h.name);
        res = CUDA_ERROR_INVALID_VALUE;
        goto err_unlock;
    }
    map_size = cudasim_page_align(h.size);
    if ((fstat(fd, &st) != 0) || ((size_t)st.st_size < map_size)) {
        close(fd);
        res = CUDA_ERROR_INVALID_VALUE;
        goto err_unlock;
    }
    if (cudasim_mem_map_device(fd, 0, map_size, &addr, &region->alias) != 0) {
        close(fd);
        res = CUDA_ERROR_MAP_FAILED;
        goto err_unlock;
    }
    close(fd);

    memcpy(owner->name, h.name, sizeof(owner->name));
    owner->pid      = h.pid;
    owner->pidns    = h.pidns;
    owner->refcount = 1;

    region->base         = (uintptr_t)addr;
    region->size         = h.size;
    region->map_size     = map_size;
    region->kind         = CUDASIM_REGION_IPC_IMPORT;
    region->device       = device;
    region->ctx          = ctx;
    region->buffer_id    = h.buffer_id;
    region->handle_types = CU_MEM_HANDLE_TYPE_NONE;
    region->access       = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    region->owner        = owner;
    cudasim_region_insert(region);
    cudasim_registry_unlock();

    cudasim_log("cuIpcOpenMemHandle(%s) = %p", h.name, addr);
    *pdptr = (CUdeviceptr)addr;
    return CUDA_SUCCESS;

err_unlock:
    cudasim_registry_unlock();
    free(owner);
    free(region);
    return res;
}


CUDASIM_API CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr,
                                                CUipcMemHandle handle,
                                                unsigned int Flags)
{
    CUDASIM_ENTER("cuIpcOpenMemHandle");
    return cudasim_ipc_open(pdptr, handle, Flags);
}


CUresult CUDAAPI cudasim_cuIpcOpenMemHandle_v1(CUdeviceptr *pdptr,
                                               CUipcMemHandle handle,
                                               unsigned int Flags)
{
    CUDASIM_ENTER("cuIpcOpenMemHandle");
    return cudasim_ipc_open(pdptr, handle, Flags);
}


CUDASIM_API CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    cudasim_region_t *region;
    CUresult res;

    CUDASIM_ENTER("cuIpcCloseMemHandle");
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    cudasim_registry_wrlock();
    region = cudasim_region_find_kind((uintptr_t)dptr,
                                      CUDASIM_REGION_IPC_IMPORT);
    if ((region == NULL) || (region->base != (uintptr_t)dptr)) {
        cudasim_registry_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* drops one reference; the memory is unmapped with the last one */
    if (--((cudasim_legacy_t*)region->owner)->refcount > 0) {
        cudasim_registry_unlock();
        return CUDA_SUCCESS;
    }
    cudasim_region_remove(region);
    cudasim_registry_unlock();

    munmap((void*)region->base, region->map_size);
    munmap(region->alias, region->map_size);
    free(region->owner);
    free(region);
    return CUDA_SUCCESS;
}


/* ------------------------------------------------------------------ */
/* Registered host memory                                             */
/* ------------------------------------------------------------------ */

#define CUDASIM_HOSTREG_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | \
                               CU_MEMHOSTREGISTER_DEVICEMAP | \
                               CU_MEMHOSTREGISTER_IOMEMORY | \
                               CU_MEMHOSTREGISTER_READ_ONLY)

/* A cuMemHostRegister range; region.kind is CUDASIM_REGION_HOST */
typedef struct {
    cudasim_region_t region;   /* base/size: the bytes registered */
    uintptr_t        page_lo;  /* the pages pinned: [page_lo, page_hi) */
    uintptr_t        page_hi;
    unsigned         flags;
} cudasim_hostreg_t;

/* Process-wide, like the driver's: a range is registered once, whatever the
 * context. Taken after the registry lock when both are held. */
static pthread_mutex_t   cudasim_hostreg_lock = PTHREAD_MUTEX_INITIALIZER;
static cudasim_region_t *cudasim_hostregs;


/* with cudasim_hostreg_lock held: the registration whose bytes hold addr */
static cudasim_hostreg_t *cudasim_hostreg_find(uintptr_t addr)
{
    cudasim_region_t *r;

    for (r = cudasim_hostregs; r != NULL; r = r->next) {
        if ((addr >= r->base) && (addr - r->base < r->size)) {
            return (cudasim_hostreg_t*)r;
        }
    }
    return NULL;
}


/*
 * Whether every page of [lo, hi) is mapped, readable, and writable when
 * need_write: the driver pins the pages (get_user_pages(), for writing
 * unless CU_MEMHOSTREGISTER_READ_ONLY), which fails on a hole, on PROT_NONE
 * and, for writing, on a read-only mapping. /proc/self/maps lists the
 * mappings in address order; without it, mincore() sees holes only.
 */
static int cudasim_host_pages_usable(uintptr_t lo, uintptr_t hi,
                                     int need_write)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned long start, end;
    unsigned char vec[256];
    uintptr_t cur = lo;
    char perms[8];
    size_t len;
    FILE *f;
    int c;

    f = fopen("/proc/self/maps", "re");
    if (f == NULL) {
        for (; cur < hi; cur += len) {
            len = hi - cur;
            if (len > sizeof(vec) * page) {
                len = sizeof(vec) * page;
            }
            if (mincore((void*)cur, len, vec) != 0) {
                return 0;
            }
        }
        return 1;
    }

    while ((cur < hi) &&
           (fscanf(f, "%lx-%lx %7s", &start, &end, perms) == 3)) {
        do {
            c = getc(f); /* rest of the line: offset, device, path */
        } while ((c != '\n') && (c != EOF));
        if (end <= cur) {
            continue;
        }
        if ((start > cur) || (perms[0] != 'r') ||
            (need_write && (perms[1] != 'w'))) {
            break; /* a hole, or pages the driver could not pin */
        }
        cur = end;
    }
    fclose(f);
    return cur >= hi;
}


static CUresult cudasim_host_register(void *p, size_t bytesize,
                                      unsigned int Flags, int v1)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)p, lo, hi;
    cudasim_hostreg_t *h;
    cudasim_region_t *r;
    CUcontext ctx;
    CUresult res;

    if ((p == NULL) || (bytesize == 0) || (Flags & ~CUDASIM_HOSTREG_FLAGS)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the range, rounded up to its last page, in the address space */
    if ((base > UINTPTR_MAX - page) || (bytesize > UINTPTR_MAX - page - base)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the ABI before CUDA 6.5, as CUDA 4.0 documented it: whole pages */
    if (v1 && (((base | bytesize) & (page - 1)) != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    /* cuda.h: without CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED
     * (0 on the emulated devices) */
    if (Flags & CU_MEMHOSTREGISTER_READ_ONLY) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* process memory is RAM, never a third-party device's I/O space */
    if (Flags & CU_MEMHOSTREGISTER_IOMEMORY) {
        return CUDA_ERROR_INVALID_VALUE;
    }

    lo = base & ~(uintptr_t)(page - 1);
    hi = (base + bytesize + page - 1) & ~(uintptr_t)(page - 1);
    if (!cudasim_host_pages_usable(lo, hi, 1)) {
        cudasim_log("cuMemHostRegister(%p, %zu): not mapped read-write", p,
                    bytesize);
        return CUDA_ERROR_INVALID_VALUE;
    }
#ifdef MADV_POPULATE_WRITE
    /* pinning faults every page in; a page past the end of its file
     * (SIGBUS on access) cannot be pinned (EINVAL: kernel without it) */
    if ((madvise((void*)lo, hi - lo, MADV_POPULATE_WRITE) != 0) &&
        (errno != EINVAL)) {
        cudasim_log("cuMemHostRegister(%p, %zu): cannot fault in: %m", p,
                    bytesize);
        return CUDA_ERROR_INVALID_VALUE;
    }
#endif

    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->region.base         = base;
    h->region.size         = bytesize;
    h->region.map_size     = hi - lo;
    h->region.kind         = CUDASIM_REGION_HOST;
    h->region.device       = ctx->device;
    h->region.ctx          = ctx;
    h->region.buffer_id    = cudasim_new_buffer_id();
    h->region.handle_types = CU_MEM_HANDLE_TYPE_NONE;
    h->region.access       = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    h->page_lo             = lo;
    h->page_hi             = hi;
    h->flags               = Flags;

    cudasim_registry_rdlock();
    /* the emulator's device memory is process memory too: not host memory
     * to register (a GPU's is not mapped for the CPU at all) */
    for (r = cudasim_region_first(); r != NULL; r = r->next) {
        if ((r->base < hi) && (r->base + r->size > lo)) {
            cudasim_registry_unlock();
            free(h);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_lock(&cudasim_hostreg_lock);
    /* the driver pins pages: a range sharing a page with a registered one
     * overlaps it */
    for (r = cudasim_hostregs; r != NULL; r = r->next) {
        if ((((cudasim_hostreg_t*)r)->page_lo < hi) &&
            (((cudasim_hostreg_t*)r)->page_hi > lo)) {
            pthread_mutex_unlock(&cudasim_hostreg_lock);
            cudasim_registry_unlock();
            free(h);
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    h->region.next   = cudasim_hostregs;
    cudasim_hostregs = &h->region;
    pthread_mutex_unlock(&cudasim_hostreg_lock);
    cudasim_registry_unlock();

    cudasim_log("cuMemHostRegister(%p, %zu, 0x%x)", p, bytesize, Flags);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize,
                                               unsigned int Flags)
{
    CUDASIM_ENTER("cuMemHostRegister");
    return cudasim_host_register(p, bytesize, Flags, 0);
}


CUresult CUDAAPI cudasim_cuMemHostRegister_v1(void *p, size_t bytesize,
                                              unsigned int Flags)
{
    CUDASIM_ENTER("cuMemHostRegister");
    return cudasim_host_register(p, bytesize, Flags, 1);
}


CUDASIM_API CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    cudasim_region_t **rp, *r;
    cudasim_hostreg_t *h;
    CUcontext ctx;
    CUresult res;
    int inside;

    CUDASIM_ENTER("cuMemHostUnregister");
    /* without a context, a portable registration only (driver 580) */
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        ctx = NULL;
    }

    pthread_mutex_lock(&cudasim_hostreg_lock);
    for (rp = &cudasim_hostregs; (r = *rp) != NULL; rp = &r->next) {
        /* the start of the range only; a registration without PORTABLE is
         * the registering context's */
        if ((r->base == (uintptr_t)p) &&
            ((((cudasim_hostreg_t*)r)->flags & CU_MEMHOSTREGISTER_PORTABLE) ||
             (r->ctx == ctx))) {
            *rp = r->next;
            pthread_mutex_unlock(&cudasim_hostreg_lock);
            cudasim_log("cuMemHostUnregister(%p)", p);
            free(r);
            return CUDA_SUCCESS;
        }
    }
    /* an address inside a registered range that is not its start is an
     * invalid value for the driver (driver 580), not an unregistered one
     * (registrations do not overlap: one range at most holds p) */
    h      = cudasim_hostreg_find((uintptr_t)p);
    inside = (h != NULL) && (h->region.base != (uintptr_t)p);
    pthread_mutex_unlock(&cudasim_hostreg_lock);
    if (inside) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return (ctx == NULL) ? res : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}


/* With unified addressing and CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM on
 * every device, the device pointer is the host pointer */
CUDASIM_API CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *pdptr,
                                                       void *p,
                                                       unsigned int Flags)
{
    cudasim_hostreg_t *h;
    CUresult res;

    CUDASIM_ENTER("cuMemHostGetDevicePointer");
    if ((pdptr == NULL) || (Flags != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    pthread_mutex_lock(&cudasim_hostreg_lock);
    h = cudasim_hostreg_find((uintptr_t)p);
    /* cuda.h: fails unless registered with CU_MEMHOSTREGISTER_DEVICEMAP */
    res = ((h != NULL) && (h->flags & CU_MEMHOSTREGISTER_DEVICEMAP)) ?
          CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&cudasim_hostreg_lock);
    if (res == CUDA_SUCCESS) {
        *pdptr = (CUdeviceptr)p;
    }
    return res;
}


/* ------------------------------------------------------------------ */
/* Pointer attributes                                                 */
/* ------------------------------------------------------------------ */

#define CUDASIM_PUT(_type, _val) \
    do { \
        *(_type*)data = (_type)(_val); \
    } while (0)

/*
 * Fill one attribute. region == NULL: pointer unknown to the driver, with
 * the cuPointerGetAttributes "default NULL values" (device ordinal -2).
 * A CUDASIM_REGION_HOST region is registered host memory: host memory of
 * the registering context, the same address on host and devices (UVA).
 */
static CUresult cudasim_ptr_attr(const cudasim_region_t *r,
                                 CUpointer_attribute attr, void *data,
                                 CUdeviceptr ptr)
{
    const cudasim_region_t *range = r;
    int legacy, host;

    if ((r != NULL) && (r->kind == CUDASIM_REGION_VMM_RESERVE)) {
        /* VA reserved but not mapped: cuda.h answers the reserved range
         * (RANGE_*) and MAPPED 0 ("CU_POINTER_ATTRIBUTE_MAPPED: Returns in
         * *data a boolean that indicates whether the pointer points to
         * memory that is capable to be used for hardware accelerated
         * operations"); what else the driver answers there is not
         * documented, so nothing else is answered */
        switch (attr) {
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            CUDASIM_PUT(CUdeviceptr, r->base);
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            CUDASIM_PUT(size_t, r->size);
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MAPPED:
            CUDASIM_PUT(unsigned int, 0);
            return CUDA_SUCCESS;
        default:
            r = NULL;
            break;
        }
    } else if ((r != NULL) && (r->kind == CUDASIM_REGION_VMM_MAP)) {
        /* cuda.h, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: "not necessarily
         * the address of the mapped region, but the address of the mappable
         * address range pointer belongs to (e.g. from
         * ::cuMemAddressReserve)"; the mapping itself is MAPPING_* */
        range = cudasim_region_find_kind(ptr, CUDASIM_REGION_VMM_RESERVE);
    }
    legacy = (r != NULL) && (r->kind != CUDASIM_REGION_VMM_MAP);
    host   = (r != NULL) && (r->kind == CUDASIM_REGION_HOST);

    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        /* VMM memory belongs to no context */
        CUDASIM_PUT(CUcontext, legacy ? r->ctx : NULL);
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        CUDASIM_PUT(unsigned int, host ? CU_MEMORYTYPE_HOST :
                                  (r != NULL) ? CU_MEMORYTYPE_DEVICE : 0);
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        CUDASIM_PUT(CUdeviceptr, (r != NULL) ? ptr : 0);
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (host) {
            CUDASIM_PUT(void*, (void*)(uintptr_t)ptr);
            break;
        }
        if (r != NULL) {
            /* device memory is not mapped in the host address space */
            return CUDA_ERROR_INVALID_VALUE;
        }
        CUDASIM_PUT(void*, NULL);
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        /* set by cuPointerSetAttribute, 0 until then */
        CUDASIM_PUT(unsigned int, (r != NULL) && r->sync_memops);
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        /* cuda.h: "A process-wide unique ID for an allocated memory
         * region"; which region a VMM mapping's is, the mapping or its
         * reservation, is not documented: the emulator answers the
         * reservation, which a caller taking it for the allocation gets
         * wrong (MEMORY_BLOCK_ID is the physical allocation) */
        CUDASIM_PUT(unsigned long long, (range != NULL) ? range->buffer_id : 0);
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        CUDASIM_PUT(unsigned int, 0);
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        CUDASIM_PUT(int, (r != NULL) ? r->device : -2);
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        CUDASIM_PUT(unsigned int,
                    (r != NULL) && (r->kind == CUDASIM_REGION_LEGACY));
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        CUDASIM_PUT(CUdeviceptr, (range != NULL) ? range->base : 0);
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        CUDASIM_PUT(size_t, (range != NULL) ? range->size : 0);
        break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        /* cuda.h: "The start address of the mapping that the pointer
         * belongs to" */
        CUDASIM_PUT(CUdeviceptr, (r != NULL) ? r->base : 0);
        break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        /* cuda.h: "Size of the actual underlying mapping that the pointer
         * belongs to" */
        CUDASIM_PUT(size_t, (r != NULL) ? r->size : 0);
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        CUDASIM_PUT(unsigned int, r != NULL);
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        CUDASIM_PUT(unsigned int, (r != NULL) ? r->handle_types : 0);
        break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        CUDASIM_PUT(unsigned int, 0);
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        CUDASIM_PUT(unsigned int,
                    (r == NULL) ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE :
                    (r->access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) ?
                    CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE :
                    (r->access == CU_MEM_ACCESS_FLAGS_PROT_READ) ?
                    CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ :
                    CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE);
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        /* cuda.h: "the mempool handle for the allocation if it was
         * allocated from a mempool. Otherwise returns NULL" */
        CUDASIM_PUT(CUmemoryPool, (r != NULL) ? r->pool : NULL);
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        /* cuda.h: "A process-wide unique id corresponding to the physical
         * allocation the pointer belongs to" */
        CUDASIM_PUT(unsigned long long, (r != NULL) ? r->buffer_id : 0);
        break;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        CUDASIM_PUT(unsigned int, 0);
        break;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}


/*
 * With the registry lock held: the device region holding addr, else the
 * registered host range (cudasim_hostreg_lock then stays held until
 * cudasim_ptr_region_done(), so it cannot be unregistered meanwhile).
 */
static cudasim_region_t *cudasim_ptr_region(uintptr_t addr)
{
    cudasim_hostreg_t *h;
    cudasim_region_t *r;

    r = cudasim_region_find(addr);
    if (r == NULL) {
        /* a hole of a reservation */
        r = cudasim_region_find_kind(addr, CUDASIM_REGION_VMM_RESERVE);
    }
    if (r != NULL) {
        return r;
    }
    pthread_mutex_lock(&cudasim_hostreg_lock);
    h = cudasim_hostreg_find(addr);
    if (h == NULL) {
        pthread_mutex_unlock(&cudasim_hostreg_lock);
        return NULL;
    }
    return &h->region;
}


static void cudasim_ptr_region_done(const cudasim_region_t *r)
{
    if ((r != NULL) && (r->kind == CUDASIM_REGION_HOST)) {
        pthread_mutex_unlock(&cudasim_hostreg_lock);
    }
}


CUDASIM_API CUresult CUDAAPI cuPointerGetAttribute(void *data,
                                                   CUpointer_attribute attribute,
                                                   CUdeviceptr ptr)
{
    cudasim_region_t *region;
    CUresult res;

    CUDASIM_ENTER("cuPointerGetAttribute");
    if (data == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }

    cudasim_registry_rdlock();
    region = cudasim_ptr_region((uintptr_t)ptr);
    if (region == NULL) {
        /* not a pointer the driver knows (unregistered host memory) */
        res = CUDA_ERROR_INVALID_VALUE;
    } else {
        res = cudasim_ptr_attr(region, attribute, data, ptr);
    }
    cudasim_ptr_region_done(region);
    cudasim_registry_unlock();
    return res;
}


/*
 * cuda.h 13.0 line 14803: the one attribute that can be set is
 * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: "When set, the region of memory that ptr
 * points to is guaranteed to always synchronize memory operations that are
 * synchronous. If there are some previously initiated synchronous memory
 * operations that are pending when this attribute is set, the function does
 * not return until those memory operations are complete." The region is an
 * allocation of cuMemAlloc or a mapping of cuIpcOpenMemHandle (a legacy
 * allocation: "ptr - Pointer to a memory region allocated using CUDA memory
 * allocation APIs"); the synchronous calls on it (cuMemcpyDtoD, cuMemsetD8,
 * cuMemcpyHtoD, cuMemcpy) then return once done (cudasim_stream.c). Other
 * memory (VMM mappings, registered host memory, unknown pointers): the
 * emulator answers CUDA_ERROR_INVALID_VALUE (undocumented).
 */
CUDASIM_API CUresult CUDAAPI cuPointerSetAttribute(const void *value,
                                                   CUpointer_attribute attribute,
                                                   CUdeviceptr ptr)
{
    cudasim_region_t *r;
    int set;

    CUDASIM_ENTER("cuPointerSetAttribute");
    if ((value == NULL) || (attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    set = (*(const unsigned int*)value != 0);
    cudasim_registry_wrlock();
    r = cudasim_region_find((uintptr_t)ptr);
    if ((r == NULL) || ((r->kind != CUDASIM_REGION_LEGACY) &&
                        (r->kind != CUDASIM_REGION_IPC_IMPORT))) {
        cudasim_registry_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    r->sync_memops = set;
    cudasim_registry_unlock();
    /* the synchronous operations already queued complete first */
    return set ? cudasim_default_stream_sync() : CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                                    CUpointer_attribute *attributes,
                                                    void **data,
                                                    CUdeviceptr ptr)
{
    cudasim_region_t *region;
    CUresult res = CUDA_SUCCESS;
    unsigned int i;

    CUDASIM_ENTER("cuPointerGetAttributes");
    if ((numAttributes == 0) || (attributes == NULL) || (data == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (i = 0; i < numAttributes; ++i) {
        if (data[i] == NULL) {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }

    cudasim_registry_rdlock();
    region = cudasim_ptr_region((uintptr_t)ptr);
    for (i = 0; (i < numAttributes) && (res == CUDA_SUCCESS); ++i) {
        if ((attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) &&
            (region != NULL) && (region->kind != CUDASIM_REGION_HOST)) {
            /* no error here, unlike cuPointerGetAttribute */
            *(void**)data[i] = NULL;
            continue;
        }
        res = cudasim_ptr_attr(region, attributes[i], data[i], ptr);
    }
    cudasim_ptr_region_done(region);
    cudasim_registry_unlock();
    return res;
}
