/*
 * cudasim: devices, primary contexts and the per-thread context stack.
 */
#include "cudasim_internal.h"

#include <stdio.h>
#include <string.h>

#define CUDASIM_DEVICE_NAME    "CUDA Sim Device"
#define CUDASIM_CTX_STACK_MAX  32

typedef struct {
    CUuuid           uuid;
    size_t           mem_used;
    struct CUctx_st  ctx;
} cudasim_device_t;

static cudasim_device_t cudasim_devices[CUDASIM_MAX_DEVICES];
static pthread_mutex_t  cudasim_device_lock = PTHREAD_MUTEX_INITIALIZER;
/* the last context id given (cuCtxGetId), under cudasim_device_lock */
static unsigned long long cudasim_ctx_last_id;

static __thread CUcontext cudasim_ctx_stack[CUDASIM_CTX_STACK_MAX];
static __thread int       cudasim_ctx_depth;


static uint64_t cudasim_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}


void cudasim_devices_init(void)
{
    uint64_t state, w[2];
    int i;

    for (i = 0; i < CUDASIM_MAX_DEVICES; ++i) {
        /* same UUID for a GPU in every process: derived only from seed and
         * physical index, whichever ordinal the process sees it under */
        state = cudasim_cfg.uuid_seed ^ cudasim_fabric_node_id() ^
                ((uint64_t)(cudasim_cfg.physical[i] + 1) << 48);
        w[0]  = cudasim_splitmix64(&state);
        w[1]  = cudasim_splitmix64(&state);
        memcpy(cudasim_devices[i].uuid.bytes, w, sizeof(w));
        /* RFC 4122 version 4 / variant bits, like real GPU UUIDs look */
        cudasim_devices[i].uuid.bytes[6] = (cudasim_devices[i].uuid.bytes[6] &
                                            0x0f) | 0x40;
        cudasim_devices[i].uuid.bytes[8] = (cudasim_devices[i].uuid.bytes[8] &
                                            0x3f) | 0x80;
        cudasim_devices[i].mem_used      = 0;
        cudasim_devices[i].ctx.magic     = CUDASIM_CTX_MAGIC;
        cudasim_devices[i].ctx.device    = i;
        cudasim_devices[i].ctx.refcount  = 0;
    }
}


int cudasim_device_valid(int ordinal)
{
    return (ordinal >= 0) && (ordinal < cudasim_cfg.device_count);
}


int cudasim_device_physical(int ordinal)
{
    return cudasim_cfg.physical[ordinal];
}


int cudasim_device_ordinal(int physical)
{
    int i;

    for (i = 0; i < cudasim_cfg.device_count; ++i) {
        if (cudasim_cfg.physical[i] == physical) {
            return i;
        }
    }
    return -1;
}


CUcontext cudasim_primary_ctx(int ordinal)
{
    return &cudasim_devices[ordinal].ctx;
}


int cudasim_ctx_valid(CUcontext ctx)
{
    int i;

    for (i = 0; i < cudasim_cfg.device_count; ++i) {
        if (ctx == &cudasim_devices[i].ctx) {
            return 1;
        }
    }
    return 0;
}


static int cudasim_ctx_active(CUcontext ctx)
{
    return __atomic_load_n(&ctx->refcount, __ATOMIC_ACQUIRE) > 0;
}


/*
 * The driver's sticky errors (cuda.h, CUDA_ERROR_ILLEGAL_ADDRESS: "This
 * leaves the process in an inconsistent state and any further CUDA work will
 * return the same error"): the context is unusable until the process exits,
 * or its primary context is released and a new one made
 */
void cudasim_ctx_poison(CUcontext ctx, CUresult error)
{
    CUresult none = CUDA_SUCCESS;

    if (__atomic_compare_exchange_n(&ctx->sticky, &none, error, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        cudasim_log("context of device %d poisoned: error %d", ctx->device,
                    (int)error);
    }
}


CUresult cudasim_current_ctx(CUcontext *ctx_p)
{
    CUresult sticky;
    CUcontext ctx;

    if (cudasim_ctx_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    ctx = cudasim_ctx_stack[cudasim_ctx_depth - 1];
    if ((ctx == NULL) || !cudasim_ctx_active(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    sticky = __atomic_load_n(&ctx->sticky, __ATOMIC_ACQUIRE);
    if (sticky != CUDA_SUCCESS) {
        return sticky;
    }
    if (ctx_p != NULL) {
        *ctx_p = ctx;
    }
    return CUDA_SUCCESS;
}


CUresult cudasim_mem_reserve(int device, size_t size)
{
    CUresult res = CUDA_SUCCESS;

    pthread_mutex_lock(&cudasim_device_lock);
    if ((size > cudasim_cfg.device_mem) ||
        (cudasim_devices[device].mem_used > cudasim_cfg.device_mem - size)) {
        res = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        cudasim_devices[device].mem_used += size;
    }
    pthread_mutex_unlock(&cudasim_device_lock);
    return res;
}


void cudasim_mem_unreserve(int device, size_t size)
{
    pthread_mutex_lock(&cudasim_device_lock);
    cudasim_devices[device].mem_used -= size;
    pthread_mutex_unlock(&cudasim_device_lock);
}


/* ------------------------------------------------------------------ */
/* Devices                                                            */
/* ------------------------------------------------------------------ */

CUDASIM_API CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    CUDASIM_ENTER("cuDeviceGetCount");
    if (count == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *count = cudasim_cfg.device_count;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    CUDASIM_ENTER("cuDeviceGet");
    if (device == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(ordinal)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = ordinal;
    return CUDA_SUCCESS;
}


/* cuda.h 13.0 line 5412: "Returns in *bytes the total amount of memory
 * available on the device dev in bytes": CUDASIM_DEVICE_MEM, the bound of
 * cuMemAlloc/cuMemCreate (cuDeviceTotalMem_v2 by cuda.h's macro) */
CUDASIM_API CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    CUDASIM_ENTER("cuDeviceTotalMem");
    if (bytes == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *bytes = cudasim_cfg.device_mem;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUDASIM_ENTER("cuDeviceGetName");
    if ((name == NULL) || (len <= 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    snprintf(name, len, "%s", CUDASIM_DEVICE_NAME);
    return CUDA_SUCCESS;
}


static CUresult cudasim_device_get_uuid(CUuuid *uuid, CUdevice dev)
{
    if (uuid == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *uuid = cudasim_devices[dev].uuid;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CUDASIM_ENTER("cuDeviceGetUuid");
    return cudasim_device_get_uuid(uuid, dev);
}


/* cuDeviceGetUuid before CUDA 11.4 (same ABI); reached by cuGetProcAddress */
CUresult CUDAAPI cudasim_cuDeviceGetUuid_v1(CUuuid *uuid, CUdevice dev)
{
    CUDASIM_ENTER("cuDeviceGetUuid");
    return cudasim_device_get_uuid(uuid, dev);
}


/* a GPU's bus id is the machine's, whatever ordinal a process gives it */
static int cudasim_pci_bus(CUdevice dev)
{
    return 0x1a + cudasim_device_physical(dev);
}


CUDASIM_API CUresult CUDAAPI cuDeviceGetAttribute(int *pi,
                                                  CUdevice_attribute attrib,
                                                  CUdevice dev)
{
    CUDASIM_ENTER("cuDeviceGetAttribute");
    if (pi == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if ((attrib < 1) || (attrib >= CU_DEVICE_ATTRIBUTE_MAX)) {
        return CUDA_ERROR_INVALID_VALUE;
    }

    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:            *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:                  *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:                  *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:                  *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:                   *pi = 0x7fffffff; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:                   *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:                   *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:      *pi = 49152; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:            *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:                        *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:                        *pi = 0x7fffffff; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:          *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:                       *pi = 1410000; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:                *pi = 512; break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:                      *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:             *pi = 108; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:                       *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:              *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:                     *pi = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:               *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:                      *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:                       *pi = cudasim_pci_bus(dev); break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:                    *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:                    *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:                       *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:                *pi = 1215000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:          *pi = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:                    *pi = 41943040; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:   *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:               *pi = 3; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:               *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:         *pi = 8; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:         *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:      *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:        *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:         *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *pi = 167936; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *pi = 65536; break;
    /* no managed memory: cuMemAllocManaged answers CUDA_ERROR_NOT_SUPPORTED
     * (cudasim_mem.c) */
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:                   *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:                  *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:        *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:          *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
        *pi = cudasim_fabric_supported(dev); /* CUDASIM_FABRIC */
        break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:        *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:           *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:              *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:    *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:     *pi = 31457280; break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:                *pi = 0; break;
    default:                                                   *pi = 0; break;
    }
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len,
                                                 CUdevice dev)
{
    CUDASIM_ENTER("cuDeviceGetPCIBusId");
    if ((pciBusId == NULL) || (len <= 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    snprintf(pciBusId, len, "%04X:%02X:%02X.0", 0, cudasim_pci_bus(dev), 0);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer,
                                                   CUdevice dev,
                                                   CUdevice peerDev)
{
    CUDASIM_ENTER("cuDeviceCanAccessPeer");
    if (canAccessPeer == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev) || !cudasim_device_valid(peerDev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *canAccessPeer = (dev != peerDev) && cudasim_cfg.peer_access;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value,
                                                     CUdevice_P2PAttribute attrib,
                                                     CUdevice srcDevice,
                                                     CUdevice dstDevice)
{
    CUDASIM_ENTER("cuDeviceGetP2PAttribute");
    if (value == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(srcDevice) || !cudasim_device_valid(dstDevice) ||
        (srcDevice == dstDevice)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
        *value = 0;
        return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
        *value = cudasim_cfg.peer_access;
        return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
        /* CUDASIM_NATIVE_ATOMICS: NVLink-like pairs; PCIe-like otherwise */
        *value = cudasim_cfg.peer_access &&
                 !!(cudasim_cfg.native_atomics[cudasim_device_physical(
                            srcDevice)] &
                    (1ull << cudasim_device_physical(dstDevice)));
        return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
        *value = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}


/* ------------------------------------------------------------------ */
/* Primary contexts                                                   */
/* ------------------------------------------------------------------ */

CUDASIM_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx,
                                                      CUdevice dev)
{
    CUDASIM_ENTER("cuDevicePrimaryCtxRetain");
    if (pctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&cudasim_device_lock);
    if (__atomic_add_fetch(&cudasim_devices[dev].ctx.refcount, 1,
                           __ATOMIC_ACQ_REL) == 1) {
        /* a new primary context: a new id (cuCtxGetId) */
        cudasim_devices[dev].ctx.id = ++cudasim_ctx_last_id;
    }
    pthread_mutex_unlock(&cudasim_device_lock);
    *pctx = &cudasim_devices[dev].ctx;
    return CUDA_SUCCESS;
}


/* cuda.h 13.0 line 6046: "Returns in *flags the flags for the primary
 * context of dev, and in *active whether it is active". The flags are those
 * cuCtxSetFlags set on it (0, CU_CTX_SCHED_AUTO, until then; the emulator
 * has no cuDevicePrimaryCtxSetFlags); active: retained and not released to
 * 0 since */
CUDASIM_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev,
                                                        unsigned int *flags,
                                                        int *active)
{
    CUDASIM_ENTER("cuDevicePrimaryCtxGetState");
    if ((flags == NULL) || (active == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *flags  = __atomic_load_n(&cudasim_devices[dev].ctx.flags,
                              __ATOMIC_ACQUIRE);
    *active = cudasim_ctx_active(&cudasim_devices[dev].ctx);
    return CUDA_SUCCESS;
}


static CUresult cudasim_primary_ctx_release(CUdevice dev)
{
    CUresult res = CUDA_SUCCESS;
    CUcontext ctx;

    if (!cudasim_device_valid(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    ctx = &cudasim_devices[dev].ctx;
    pthread_mutex_lock(&cudasim_device_lock);
    if (ctx->refcount <= 0) {
        res = CUDA_ERROR_INVALID_CONTEXT;
    } else if (__atomic_sub_fetch(&ctx->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
        /* the last release destroys the primary context: the next retain
         * makes a new one, without the old one's sticky error */
        __atomic_store_n(&ctx->sticky, CUDA_SUCCESS, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&cudasim_device_lock);
    return res;
}


CUDASIM_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUDASIM_ENTER("cuDevicePrimaryCtxRelease");
    return cudasim_primary_ctx_release(dev);
}


CUresult CUDAAPI cudasim_cuDevicePrimaryCtxRelease_v1(CUdevice dev)
{
    CUDASIM_ENTER("cuDevicePrimaryCtxRelease");
    return cudasim_primary_ctx_release(dev);
}


/* ------------------------------------------------------------------ */
/* Per-thread context stack                                           */
/* ------------------------------------------------------------------ */

CUDASIM_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    CUDASIM_ENTER("cuCtxGetCurrent");
    if (pctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pctx = (cudasim_ctx_depth > 0) ?
            cudasim_ctx_stack[cudasim_ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    CUDASIM_ENTER("cuCtxSetCurrent");
    if (ctx == NULL) {
        /* like popping the top of the stack (no-op when empty) */
        if (cudasim_ctx_depth > 0) {
            --cudasim_ctx_depth;
        }
        return CUDA_SUCCESS;
    }
    if (!cudasim_ctx_valid(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (cudasim_ctx_depth == 0) {
        cudasim_ctx_depth = 1;
    }
    cudasim_ctx_stack[cudasim_ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}


static CUresult cudasim_ctx_push(CUcontext ctx)
{
    if ((ctx == NULL) || !cudasim_ctx_valid(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (cudasim_ctx_depth >= CUDASIM_CTX_STACK_MAX) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cudasim_ctx_stack[cudasim_ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}


static CUresult cudasim_ctx_pop(CUcontext *pctx)
{
    if (cudasim_ctx_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    --cudasim_ctx_depth;
    if (pctx != NULL) {
        *pctx = cudasim_ctx_stack[cudasim_ctx_depth];
    }
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
    CUDASIM_ENTER("cuCtxPushCurrent");
    return cudasim_ctx_push(ctx);
}


CUresult CUDAAPI cudasim_cuCtxPushCurrent_v1(CUcontext ctx)
{
    CUDASIM_ENTER("cuCtxPushCurrent");
    return cudasim_ctx_push(ctx);
}


CUDASIM_API CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
    CUDASIM_ENTER("cuCtxPopCurrent");
    return cudasim_ctx_pop(pctx);
}


CUresult CUDAAPI cudasim_cuCtxPopCurrent_v1(CUcontext *pctx)
{
    CUDASIM_ENTER("cuCtxPopCurrent");
    return cudasim_ctx_pop(pctx);
}


/* cuda.h 13.0 line 6562: "Returns in ctxId the unique Id which is
 * associated with a given context. The Id is unique for the life of the
 * program for this instance of CUDA. If context is supplied as NULL and
 * there is one current, the Id of the current context is returned." A
 * primary context released to 0 is destroyed (CUDA_ERROR_CONTEXT_IS_DESTROYED,
 * in the list of cuda.h); the next retain makes one with a new id */
CUDASIM_API CUresult CUDAAPI cuCtxGetId(CUcontext ctx,
                                        unsigned long long *ctxId)
{
    CUresult res;

    CUDASIM_ENTER("cuCtxGetId");
    if (ctxId == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (ctx == NULL) {
        res = cudasim_current_ctx(&ctx);
        if (res != CUDA_SUCCESS) {
            return res;
        }
    } else if (!cudasim_ctx_valid(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&cudasim_device_lock);
    res = cudasim_ctx_active(ctx) ? CUDA_SUCCESS :
                                    CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *ctxId = ctx->id;
    pthread_mutex_unlock(&cudasim_device_lock);
    return res;
}


/* cuda.h 13.0 line 6528: "Returns in *flags the flags of the current
 * context" */
CUDASIM_API CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    CUcontext ctx;
    CUresult res;

    CUDASIM_ENTER("cuCtxGetFlags");
    if (flags == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    *flags = __atomic_load_n(&ctx->flags, __ATOMIC_ACQUIRE);
    return CUDA_SUCCESS;
}


/* cuda.h 13.0 line 6536: "Sets the flags for the current context overwriting
 * previously set ones. See cuDevicePrimaryCtxSetFlags for flag values"
 * (CUctx_flags, at most one scheduling flag). The one that changes what the
 * emulator does: CU_CTX_SYNC_MEMOPS (line 6226: "Ensures that synchronous
 * memory operations initiated on this context will always synchronize";
 * cudasim_stream.c) */
CUDASIM_API CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    CUcontext ctx;
    CUresult res;

    CUDASIM_ENTER("cuCtxSetFlags");
    if ((flags & ~(unsigned)CU_CTX_FLAGS_MASK) ||
        ((sched != CU_CTX_SCHED_AUTO) && (sched != CU_CTX_SCHED_SPIN) &&
         (sched != CU_CTX_SCHED_YIELD) &&
         (sched != CU_CTX_SCHED_BLOCKING_SYNC))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    __atomic_store_n(&ctx->flags, flags, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}


/* The device of @a ctx, or of the current context when @a ctx is NULL */
static CUresult cudasim_ctx_device(CUdevice *device, CUcontext ctx)
{
    CUresult res;

    if (device == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (ctx == NULL) {
        res = cudasim_current_ctx(&ctx);
        if (res != CUDA_SUCCESS) {
            return res;
        }
    } else if (!cudasim_ctx_valid(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *device = ctx->device;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    CUDASIM_ENTER("cuCtxGetDevice");
    return cudasim_ctx_device(device, NULL);
}


/* CUDA 13.0's version: the device of @a ctx (NULL: the current one). A
 * request for "cuCtxGetDevice" at cudaVersion 13000 or later returns it, as
 * the driver does (cudasim_proc.c) */
CUDASIM_API CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    CUDASIM_ENTER("cuCtxGetDevice_v2");
    return cudasim_ctx_device(device, ctx);
}
