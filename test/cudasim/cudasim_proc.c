/*
 * cudasim: cuGetProcAddress - entry points by base name and CUDA version.
 */
#include "cudasim_internal.h"

#include <string.h>

/* older ABI-compatible versions of entry points, not exported by name */
CUresult CUDAAPI cudasim_cuDeviceGetUuid_v1(CUuuid *uuid, CUdevice dev);
CUresult CUDAAPI cudasim_cuDevicePrimaryCtxRelease_v1(CUdevice dev);
CUresult CUDAAPI cudasim_cuCtxPushCurrent_v1(CUcontext ctx);
CUresult CUDAAPI cudasim_cuCtxPopCurrent_v1(CUcontext *pctx);
CUresult CUDAAPI cudasim_cuIpcOpenMemHandle_v1(CUdeviceptr *pdptr,
                                               CUipcMemHandle handle,
                                               unsigned int Flags);
CUresult CUDAAPI cudasim_cuMemHostRegister_v1(void *p, size_t bytesize,
                                              unsigned int Flags);
CUresult CUDAAPI cudasim_cuStreamDestroy_v1(CUstream hStream);
CUresult CUDAAPI cudasim_cuEventDestroy_v1(CUevent hEvent);
CUresult CUDAAPI cudasim_cuGetProcAddress_v1(const char *symbol, void **pfn,
                                             int cudaVersion,
                                             cuuint64_t flags);

typedef struct {
    const char *name;    /* base name */
    int        version;  /* first CUDA version with this ABI */
    void       *func;
} cudasim_proc_t;

#define CUDASIM_PROC(_name, _version, _func) {_name, _version, (void*)(_func)}

/* cuda.h macros give the versioned symbols (cuMemAlloc -> cuMemAlloc_v2) */
static const cudasim_proc_t cudasim_procs[] = {
    CUDASIM_PROC("cuInit", 2000, cuInit),
    CUDASIM_PROC("cuDriverGetVersion", 2020, cuDriverGetVersion),
    CUDASIM_PROC("cuGetErrorName", 6000, cuGetErrorName),
    CUDASIM_PROC("cuGetErrorString", 6000, cuGetErrorString),
    CUDASIM_PROC("cuGetProcAddress", 11030, cudasim_cuGetProcAddress_v1),
    CUDASIM_PROC("cuGetProcAddress", 12000, cuGetProcAddress),
    CUDASIM_PROC("cuDeviceGetCount", 2000, cuDeviceGetCount),
    CUDASIM_PROC("cuDeviceGet", 2000, cuDeviceGet),
    CUDASIM_PROC("cuDeviceGetName", 2000, cuDeviceGetName),
    CUDASIM_PROC("cuDeviceGetUuid", 9020, cudasim_cuDeviceGetUuid_v1),
    CUDASIM_PROC("cuDeviceGetUuid", 11040, cuDeviceGetUuid),
    CUDASIM_PROC("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    CUDASIM_PROC("cuDeviceTotalMem", 3020, cuDeviceTotalMem),
    CUDASIM_PROC("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    CUDASIM_PROC("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
    CUDASIM_PROC("cuDeviceGetP2PAttribute", 8000, cuDeviceGetP2PAttribute),
    CUDASIM_PROC("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    CUDASIM_PROC("cuDevicePrimaryCtxRelease", 7000,
                 cudasim_cuDevicePrimaryCtxRelease_v1),
    CUDASIM_PROC("cuDevicePrimaryCtxRelease", 11000,
                 cuDevicePrimaryCtxRelease),
    CUDASIM_PROC("cuDevicePrimaryCtxGetState", 7000,
                 cuDevicePrimaryCtxGetState),
    CUDASIM_PROC("cuCtxGetId", 12000, cuCtxGetId),
    CUDASIM_PROC("cuCtxGetFlags", 7000, cuCtxGetFlags),
    CUDASIM_PROC("cuCtxSetFlags", 12010, cuCtxSetFlags),
    CUDASIM_PROC("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    CUDASIM_PROC("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    CUDASIM_PROC("cuCtxPushCurrent", 2000, cudasim_cuCtxPushCurrent_v1),
    CUDASIM_PROC("cuCtxPushCurrent", 4000, cuCtxPushCurrent),
    CUDASIM_PROC("cuCtxPopCurrent", 2000, cudasim_cuCtxPopCurrent_v1),
    CUDASIM_PROC("cuCtxPopCurrent", 4000, cuCtxPopCurrent),
    CUDASIM_PROC("cuCtxGetDevice", 2000, cuCtxGetDevice),
    /* another signature under the same base name (CUDA 13.0) */
    CUDASIM_PROC("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    CUDASIM_PROC("cuMemAlloc", 3020, cuMemAlloc),
    CUDASIM_PROC("cuMemFree", 3020, cuMemFree),
    CUDASIM_PROC("cuMemAllocManaged", 6000, cuMemAllocManaged),
    CUDASIM_PROC("cuMemRangeGetAttribute", 8000, cuMemRangeGetAttribute),
    CUDASIM_PROC("cuMemGetAddressRange", 3020, cuMemGetAddressRange),
    CUDASIM_PROC("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    CUDASIM_PROC("cuIpcOpenMemHandle", 4010, cudasim_cuIpcOpenMemHandle_v1),
    CUDASIM_PROC("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle),
    CUDASIM_PROC("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    CUDASIM_PROC("cuMemCreate", 10020, cuMemCreate),
    CUDASIM_PROC("cuMemRelease", 10020, cuMemRelease),
    CUDASIM_PROC("cuMemGetAllocationGranularity", 10020,
                 cuMemGetAllocationGranularity),
    CUDASIM_PROC("cuMemGetAllocationPropertiesFromHandle", 10020,
                 cuMemGetAllocationPropertiesFromHandle),
    CUDASIM_PROC("cuMemAddressReserve", 10020, cuMemAddressReserve),
    CUDASIM_PROC("cuMemAddressFree", 10020, cuMemAddressFree),
    CUDASIM_PROC("cuMemMap", 10020, cuMemMap),
    CUDASIM_PROC("cuMemUnmap", 10020, cuMemUnmap),
    CUDASIM_PROC("cuMemSetAccess", 10020, cuMemSetAccess),
    CUDASIM_PROC("cuMemRetainAllocationHandle", 11000,
                 cuMemRetainAllocationHandle),
    CUDASIM_PROC("cuMemExportToShareableHandle", 10020,
                 cuMemExportToShareableHandle),
    CUDASIM_PROC("cuMemImportFromShareableHandle", 10020,
                 cuMemImportFromShareableHandle),
    CUDASIM_PROC("cuMemPoolCreate", 11020, cuMemPoolCreate),
    CUDASIM_PROC("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    CUDASIM_PROC("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    CUDASIM_PROC("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    CUDASIM_PROC("cuMemAllocAsync", 11020, cuMemAllocAsync),
    CUDASIM_PROC("cuMemFreeAsync", 11020, cuMemFreeAsync),
    CUDASIM_PROC("cuMemPoolSetAccess", 11020, cuMemPoolSetAccess),
    CUDASIM_PROC("cuMemPoolExportToShareableHandle", 11020,
                 cuMemPoolExportToShareableHandle),
    CUDASIM_PROC("cuMemPoolImportFromShareableHandle", 11020,
                 cuMemPoolImportFromShareableHandle),
    CUDASIM_PROC("cuMemPoolExportPointer", 11020, cuMemPoolExportPointer),
    CUDASIM_PROC("cuMemPoolImportPointer", 11020, cuMemPoolImportPointer),
    CUDASIM_PROC("cuMemHostRegister", 4000, cudasim_cuMemHostRegister_v1),
    CUDASIM_PROC("cuMemHostRegister", 6050, cuMemHostRegister),
    CUDASIM_PROC("cuMemHostUnregister", 4000, cuMemHostUnregister),
    CUDASIM_PROC("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer),
    CUDASIM_PROC("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    CUDASIM_PROC("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    CUDASIM_PROC("cuPointerSetAttribute", 6000, cuPointerSetAttribute),
    CUDASIM_PROC("cuStreamCreate", 2000, cuStreamCreate),
    CUDASIM_PROC("cuStreamDestroy", 2000, cudasim_cuStreamDestroy_v1),
    CUDASIM_PROC("cuStreamDestroy", 4000, cuStreamDestroy),
    CUDASIM_PROC("cuStreamQuery", 2000, cuStreamQuery),
    CUDASIM_PROC("cuStreamSynchronize", 2000, cuStreamSynchronize),
    CUDASIM_PROC("cuCtxSynchronize", 2000, cuCtxSynchronize),
    CUDASIM_PROC("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
    CUDASIM_PROC("cuStreamAddCallback", 5000, cuStreamAddCallback),
    CUDASIM_PROC("cuLaunchHostFunc", 10000, cuLaunchHostFunc),
    CUDASIM_PROC("cuMemcpy", 4000, cuMemcpy),
    CUDASIM_PROC("cuMemcpyAsync", 4000, cuMemcpyAsync),
    CUDASIM_PROC("cuMemcpyDtoD", 3020, cuMemcpyDtoD),
    CUDASIM_PROC("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync),
    CUDASIM_PROC("cuMemcpyHtoD", 3020, cuMemcpyHtoD),
    CUDASIM_PROC("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync),
    CUDASIM_PROC("cuMemcpyDtoH", 3020, cuMemcpyDtoH),
    CUDASIM_PROC("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync),
    CUDASIM_PROC("cuMemsetD8", 3020, cuMemsetD8),
    CUDASIM_PROC("cuMemsetD8Async", 3020, cuMemsetD8Async),
    CUDASIM_PROC("cuEventCreate", 2000, cuEventCreate),
    CUDASIM_PROC("cuEventRecord", 2000, cuEventRecord),
    CUDASIM_PROC("cuEventQuery", 2000, cuEventQuery),
    CUDASIM_PROC("cuEventSynchronize", 2000, cuEventSynchronize),
    CUDASIM_PROC("cuEventDestroy", 2000, cudasim_cuEventDestroy_v1),
    CUDASIM_PROC("cuEventDestroy", 4000, cuEventDestroy),
};


/*
 * The newest entry of symbol with version <= cudaVersion. The per-thread
 * default stream variants (_ptds/_ptsz) are the same functions here: the
 * emulator runs default-stream work synchronously either way.
 */
static CUresult cudasim_get_proc(const char *symbol, void **pfn,
                                 int cudaVersion, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    const cudasim_proc_t *best = NULL;
    int found = 0;
    size_t i;

    if ((symbol == NULL) || (pfn == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
        return CUDA_ERROR_INVALID_VALUE;
    }

    for (i = 0; i < sizeof(cudasim_procs) / sizeof(cudasim_procs[0]); ++i) {
        if (strcmp(cudasim_procs[i].name, symbol)) {
            continue;
        }
        found = 1;
        if ((cudasim_procs[i].version <= cudaVersion) &&
            ((best == NULL) || (cudasim_procs[i].version > best->version))) {
            best = &cudasim_procs[i];
        }
    }

    if (best == NULL) {
        *pfn = NULL;
        if (status != NULL) {
            *status = found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT :
                              CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        }
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->func;
    if (status != NULL) {
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    }
    return CUDA_SUCCESS;
}


/* Works before cuInit, like the real driver */
CUDASIM_API CUresult CUDAAPI
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                 cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    return cudasim_get_proc(symbol, pfn, cudaVersion, flags, symbolStatus);
}


CUresult CUDAAPI cudasim_cuGetProcAddress_v1(const char *symbol, void **pfn,
                                             int cudaVersion,
                                             cuuint64_t flags)
{
    return cudasim_get_proc(symbol, pfn, cudaVersion, flags, NULL);
}


/* The unversioned symbol (CUDA 11.3 ABI, no symbolStatus) */
#undef cuGetProcAddress
CUDASIM_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                              int cudaVersion,
                                              cuuint64_t flags);

CUDASIM_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                              int cudaVersion,
                                              cuuint64_t flags)
{
    return cudasim_get_proc(symbol, pfn, cudaVersion, flags, NULL);
}
