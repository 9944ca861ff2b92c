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
 * Every driver entry point the module and its tests use: table member,
 * cuda.h name, and whether a driver must have it.
 *
 *  REQUIRED: the module calls it. A driver lacking one is not used: the
 *            module reports no device.
 *  OPTIONAL: only tests and tools call it. Resolved when present, NULL
 *            otherwise (with a debug line); a caller that needs a missing
 *            one gets a clear error (see the test helpers), and the device
 *            is still listed.
 *
 * UCT_CUDA_IPC_NS_CU_CALL accepts REQUIRED entries only, so module code that
 * starts calling an entry fails to build until that entry's word is flipped
 * to REQUIRED here. cuGetErrorName is optional: uct_cuda_ipc_ns_cu_error_name()
 * has its own table for a driver without it.
 *
 * The cuda.h name is a macro for the versioned symbol (cuMemAlloc ->
 * cuMemAlloc_v2), which gives both the prototype and the dlsym() fallback.
 */
#define UCT_CUDA_IPC_NS_DRIVER_FOREACH(_F) \
    _F(Init,                         cuInit,                         REQUIRED) \
    _F(DriverGetVersion,             cuDriverGetVersion,             OPTIONAL) \
    _F(GetErrorName,                 cuGetErrorName,                 OPTIONAL) \
    _F(GetErrorString,               cuGetErrorString,               OPTIONAL) \
    _F(DeviceGetCount,               cuDeviceGetCount,               REQUIRED) \
    _F(DeviceGet,                    cuDeviceGet,                    REQUIRED) \
    _F(DeviceGetName,                cuDeviceGetName,                OPTIONAL) \
    _F(DeviceGetUuid,                cuDeviceGetUuid,                REQUIRED) \
    _F(DeviceGetAttribute,           cuDeviceGetAttribute,           REQUIRED) \
    _F(DeviceGetPCIBusId,            cuDeviceGetPCIBusId,            OPTIONAL) \
    _F(DeviceCanAccessPeer,          cuDeviceCanAccessPeer,          OPTIONAL) \
    _F(DeviceGetP2PAttribute,        cuDeviceGetP2PAttribute,        OPTIONAL) \
    _F(DevicePrimaryCtxRetain,       cuDevicePrimaryCtxRetain,       REQUIRED) \
    _F(DevicePrimaryCtxRelease,      cuDevicePrimaryCtxRelease,      REQUIRED) \
    _F(CtxGetCurrent,                cuCtxGetCurrent,                REQUIRED) \
    _F(CtxSetCurrent,                cuCtxSetCurrent,                REQUIRED) \
    _F(CtxPushCurrent,               cuCtxPushCurrent,               REQUIRED) \
    _F(CtxPopCurrent,                cuCtxPopCurrent,                REQUIRED) \
    _F(CtxGetDevice,                 cuCtxGetDevice,                 REQUIRED) \
    _F(MemAlloc,                     cuMemAlloc,                     REQUIRED) \
    _F(MemFree,                      cuMemFree,                      REQUIRED) \
    _F(MemGetAddressRange,           cuMemGetAddressRange,           OPTIONAL) \
    _F(IpcGetMemHandle,              cuIpcGetMemHandle,              REQUIRED) \
    _F(IpcOpenMemHandle,             cuIpcOpenMemHandle,             REQUIRED) \
    _F(IpcCloseMemHandle,            cuIpcCloseMemHandle,            REQUIRED) \
    _F(MemCreate,                    cuMemCreate,                    REQUIRED) \
    _F(MemRelease,                   cuMemRelease,                   REQUIRED) \
    _F(MemGetAllocationGranularity,  cuMemGetAllocationGranularity,  REQUIRED) \
    _F(MemGetAllocationPropertiesFromHandle, \
       cuMemGetAllocationPropertiesFromHandle,                     REQUIRED) \
    _F(MemAddressReserve,            cuMemAddressReserve,            REQUIRED) \
    _F(MemAddressFree,               cuMemAddressFree,               REQUIRED) \
    _F(MemMap,                       cuMemMap,                       REQUIRED) \
    _F(MemUnmap,                     cuMemUnmap,                     REQUIRED) \
    _F(MemSetAccess,                 cuMemSetAccess,                 REQUIRED) \
    _F(MemRetainAllocationHandle,    cuMemRetainAllocationHandle,    REQUIRED) \
    _F(MemExportToShareableHandle,   cuMemExportToShareableHandle,   REQUIRED) \
    _F(MemImportFromShareableHandle, cuMemImportFromShareableHandle, REQUIRED) \
    _F(PointerGetAttribute,          cuPointerGetAttribute,          OPTIONAL) \
    _F(PointerGetAttributes,         cuPointerGetAttributes,         REQUIRED) \
    _F(StreamCreate,                 cuStreamCreate,                 REQUIRED) \
    _F(StreamDestroy,                cuStreamDestroy,                REQUIRED) \
    _F(StreamQuery,                  cuStreamQuery,                  OPTIONAL) \
    _F(StreamSynchronize,            cuStreamSynchronize,            REQUIRED) \
    _F(StreamWaitEvent,              cuStreamWaitEvent,              REQUIRED) \
    _F(StreamAddCallback,            cuStreamAddCallback,            OPTIONAL) \
    _F(LaunchHostFunc,               cuLaunchHostFunc,               REQUIRED) \
    _F(Memcpy,                       cuMemcpy,                       REQUIRED) \
    _F(MemcpyAsync,                  cuMemcpyAsync,                  REQUIRED) \
    _F(MemcpyDtoD,                   cuMemcpyDtoD,                   OPTIONAL) \
    _F(MemcpyDtoDAsync,              cuMemcpyDtoDAsync,              REQUIRED) \
    _F(MemcpyHtoD,                   cuMemcpyHtoD,                   REQUIRED) \
    _F(MemcpyHtoDAsync,              cuMemcpyHtoDAsync,              OPTIONAL) \
    _F(MemcpyDtoH,                   cuMemcpyDtoH,                   REQUIRED) \
    _F(MemcpyDtoHAsync,              cuMemcpyDtoHAsync,              OPTIONAL) \
    _F(MemsetD8,                     cuMemsetD8,                     REQUIRED) \
    _F(MemsetD8Async,                cuMemsetD8Async,                OPTIONAL) \
    _F(EventCreate,                  cuEventCreate,                  REQUIRED) \
    _F(EventRecord,                  cuEventRecord,                  REQUIRED) \
    _F(EventQuery,                   cuEventQuery,                   REQUIRED) \
    _F(EventSynchronize,             cuEventSynchronize,             OPTIONAL) \
    _F(EventDestroy,                 cuEventDestroy,                 REQUIRED)


#define UCT_CUDA_IPC_NS_DRIVER_REQUIRED 1
#define UCT_CUDA_IPC_NS_DRIVER_OPTIONAL 0

#define UCT_CUDA_IPC_NS_DRIVER_MEMBER(_member, _cu_name, _need) \
    __typeof__(_cu_name) *_member;

/* UCT_CUDA_IPC_NS_DRIVER_NEED_<member>: 1 for a REQUIRED entry, 0 otherwise */
#define UCT_CUDA_IPC_NS_DRIVER_NEED(_member, _cu_name, _need) \
    UCT_CUDA_IPC_NS_DRIVER_NEED_##_member = UCT_CUDA_IPC_NS_DRIVER_##_need,

enum {
    UCT_CUDA_IPC_NS_DRIVER_FOREACH(UCT_CUDA_IPC_NS_DRIVER_NEED)
};

/* Resolved driver entry points; valid after uct_cuda_ipc_ns_driver_load() */
typedef struct uct_cuda_ipc_ns_driver {
    UCT_CUDA_IPC_NS_DRIVER_FOREACH(UCT_CUDA_IPC_NS_DRIVER_MEMBER)
} uct_cuda_ipc_ns_driver_t;

extern uct_cuda_ipc_ns_driver_t uct_cuda_ipc_ns_drv;


/**
 * Load the driver library from @a path (once per process; later calls with
 * any path return the first outcome), resolve the table, and cuInit(0).
 *
 * @return UCS_OK, or UCS_ERR_NO_DEVICE when the library is missing, lacks a
 *         REQUIRED entry point or fails to initialize (logged at debug level:
 *         a host without a GPU is a normal configuration).
 */
ucs_status_t uct_cuda_ipc_ns_driver_load(const char *path);


/** @return the CUresult's name ("CUDA_ERROR_...") even without a driver */
const char *uct_cuda_ipc_ns_cu_error_name(CUresult result);


/** Map a CUresult to a ucs_status_t */
ucs_status_t uct_cuda_ipc_ns_cu_status(CUresult result);


/**
 * Call driver entry point @a _func (a REQUIRED one) with the rest of the
 * arguments; on failure, log at @a _level the call and its CUresult name.
 * Evaluates to a ucs_status_t.
 */
#define UCT_CUDA_IPC_NS_CU_CALL(_level, _func, ...) \
    ({ \
        _Static_assert(UCT_CUDA_IPC_NS_DRIVER_NEED_##_func, \
                       "cu" #_func " is an OPTIONAL driver entry: mark it " \
                       "REQUIRED in UCT_CUDA_IPC_NS_DRIVER_FOREACH"); \
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
