/*
 * cuda_ipc_ns: CUDA driver table.
 *
 * The module never links libcuda. It dlopen()s the driver from a configurable
 * path (the real libcuda.so.1 or the CPU emulator test/cudasim) and resolves
 * every entry point through cuGetProcAddress for the CUDA version we compiled
 * against, so the ABI of each call matches the cuda.h prototypes below.
 */
#ifndef UCT_CUDA_IPC_NS_DRIVER_H
#define UCT_CUDA_IPC_NS_DRIVER_H

#include <ucs/type/status.h>
#include <ucs/debug/log_def.h>
#include <cuda.h>


/*
 * Every driver function the module uses: table member, cuda.h name.
 * The cuda.h name is a macro for the versioned symbol (cuMemAlloc ->
 * cuMemAlloc_v2), which gives both the prototype and the dlsym() fallback.
 */
#define UCT_CUDA_IPC_NS_DRIVER_FOREACH(_F) \
    _F(Init,                            cuInit) \
    _F(DriverGetVersion,                cuDriverGetVersion) \
    _F(GetErrorName,                    cuGetErrorName) \
    _F(GetErrorString,                  cuGetErrorString) \
    _F(DeviceGetCount,                  cuDeviceGetCount) \
    _F(DeviceGet,                       cuDeviceGet) \
    _F(DeviceGetName,                   cuDeviceGetName) \
    _F(DeviceGetUuid,                   cuDeviceGetUuid) \
    _F(DeviceGetAttribute,              cuDeviceGetAttribute) \
    _F(DeviceGetPCIBusId,               cuDeviceGetPCIBusId) \
    _F(DeviceCanAccessPeer,             cuDeviceCanAccessPeer) \
    _F(DeviceGetP2PAttribute,           cuDeviceGetP2PAttribute) \
    _F(DevicePrimaryCtxRetain,          cuDevicePrimaryCtxRetain) \
    _F(DevicePrimaryCtxRelease,         cuDevicePrimaryCtxRelease) \
    _F(CtxGetCurrent,                   cuCtxGetCurrent) \
    _F(CtxSetCurrent,                   cuCtxSetCurrent) \
    _F(CtxPushCurrent,                  cuCtxPushCurrent) \
    _F(CtxPopCurrent,                   cuCtxPopCurrent) \
    _F(CtxGetDevice,                    cuCtxGetDevice) \
    _F(MemAlloc,                        cuMemAlloc) \
    _F(MemFree,                         cuMemFree) \
    _F(MemGetAddressRange,              cuMemGetAddressRange) \
    _F(IpcGetMemHandle,                 cuIpcGetMemHandle) \
    _F(IpcOpenMemHandle,                cuIpcOpenMemHandle) \
    _F(IpcCloseMemHandle,               cuIpcCloseMemHandle) \
    _F(MemCreate,                       cuMemCreate) \
    _F(MemRelease,                      cuMemRelease) \
    _F(MemGetAllocationGranularity,     cuMemGetAllocationGranularity) \
    _F(MemGetAllocationPropertiesFromHandle, \
                                        cuMemGetAllocationPropertiesFromHandle) \
    _F(MemAddressReserve,               cuMemAddressReserve) \
    _F(MemAddressFree,                  cuMemAddressFree) \
    _F(MemMap,                          cuMemMap) \
    _F(MemUnmap,                        cuMemUnmap) \
    _F(MemSetAccess,                    cuMemSetAccess) \
    _F(MemRetainAllocationHandle,       cuMemRetainAllocationHandle) \
    _F(MemExportToShareableHandle,      cuMemExportToShareableHandle) \
    _F(MemImportFromShareableHandle,    cuMemImportFromShareableHandle) \
    _F(PointerGetAttribute,             cuPointerGetAttribute) \
    _F(PointerGetAttributes,            cuPointerGetAttributes) \
    _F(StreamCreate,                    cuStreamCreate) \
    _F(StreamDestroy,                   cuStreamDestroy) \
    _F(StreamQuery,                     cuStreamQuery) \
    _F(StreamSynchronize,               cuStreamSynchronize) \
    _F(StreamWaitEvent,                 cuStreamWaitEvent) \
    _F(StreamAddCallback,               cuStreamAddCallback) \
    _F(LaunchHostFunc,                  cuLaunchHostFunc) \
    _F(Memcpy,                          cuMemcpy) \
    _F(MemcpyAsync,                     cuMemcpyAsync) \
    _F(MemcpyDtoD,                      cuMemcpyDtoD) \
    _F(MemcpyDtoDAsync,                 cuMemcpyDtoDAsync) \
    _F(MemcpyHtoD,                      cuMemcpyHtoD) \
    _F(MemcpyHtoDAsync,                 cuMemcpyHtoDAsync) \
    _F(MemcpyDtoH,                      cuMemcpyDtoH) \
    _F(MemcpyDtoHAsync,                 cuMemcpyDtoHAsync) \
    _F(MemsetD8,                        cuMemsetD8) \
    _F(MemsetD8Async,                   cuMemsetD8Async) \
    _F(EventCreate,                     cuEventCreate) \
    _F(EventRecord,                     cuEventRecord) \
    _F(EventQuery,                      cuEventQuery) \
    _F(EventSynchronize,                cuEventSynchronize) \
    _F(EventDestroy,                    cuEventDestroy)


#define UCT_CUDA_IPC_NS_DRIVER_MEMBER(_member, _cu_name) \
    __typeof__(_cu_name) *_member;

/* Resolved driver entry points; valid after uct_cuda_ipc_ns_driver_load() */
typedef struct uct_cuda_ipc_ns_driver {
    UCT_CUDA_IPC_NS_DRIVER_FOREACH(UCT_CUDA_IPC_NS_DRIVER_MEMBER)
} uct_cuda_ipc_ns_driver_t;

extern uct_cuda_ipc_ns_driver_t uct_cuda_ipc_ns_drv;


/**
 * Load the driver library from @a path (once per process; later calls with
 * any path return the first outcome), resolve the table, and cuInit(0).
 *
 * @return UCS_OK, or UCS_ERR_NO_DEVICE when the library is missing, lacks an
 *         entry point or fails to initialize (logged at debug level: a host
 *         without a GPU is a normal configuration).
 */
ucs_status_t uct_cuda_ipc_ns_driver_load(const char *path);


/** @return the path the driver was loaded from, or NULL */
const char *uct_cuda_ipc_ns_driver_path(void);


/** @return the CUresult's name ("CUDA_ERROR_...") even without a driver */
const char *uct_cuda_ipc_ns_cu_error_name(CUresult result);


/** Map a CUresult to a ucs_status_t */
ucs_status_t uct_cuda_ipc_ns_cu_status(CUresult result);


/**
 * Call driver entry point @a _func with the rest of the arguments; on
 * failure, log at @a _level the call and its CUresult name.
 * Evaluates to a ucs_status_t.
 */
#define UCT_CUDA_IPC_NS_CU_CALL(_level, _func, ...) \
    ({ \
        CUresult _cu_res = uct_cuda_ipc_ns_drv._func(__VA_ARGS__); \
        ucs_status_t _cu_status = UCS_OK; \
        if (ucs_unlikely(_cu_res != CUDA_SUCCESS)) { \
            _cu_status = uct_cuda_ipc_ns_cu_status(_cu_res); \
            ucs_log(_level, "cu%s() failed: %s", #_func, \
                    uct_cuda_ipc_ns_cu_error_name(_cu_res)); \
        } \
        _cu_status; \
    })

#define UCT_CUDA_IPC_NS_CU(_func, ...) \
    UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_ERROR, _func, __VA_ARGS__)

#endif
