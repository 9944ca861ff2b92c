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
 * Every driver entry point the module and its tests use: its cuda.h name,
 * which is also the table member (uct_cuda_ipc_ns_drv.cuMemAlloc), and
 * whether a driver must have it.
 *
 *  REQUIRED: the module calls it (exactly those). A driver lacking one is
 *            not used: the module reports no device.
 *  OPTIONAL: only tests and tools call it, and cuGetErrorName, which
 *            uct_cuda_ipc_ns_driver_error_name() replaces with its own table.
 *            Resolved when present, NULL otherwise (with a debug line); a
 *            caller that needs a missing one gets a clear error (see the
 *            test helpers), and the device is still listed.
 *
 * UCT_CUDA_IPC_NS_CU_CALL accepts REQUIRED entries only, so module code that
 * starts calling an entry fails to build until that entry's word is flipped
 * to REQUIRED here.
 *
 * The cuda.h name is a macro for the versioned symbol (cuMemAlloc ->
 * cuMemAlloc_v2), which gives the prototype, the dlsym() fallback and the
 * member's name alike; call sites and grep use the cuda.h name.
 */
#define UCT_CUDA_IPC_NS_DRIVER_FOREACH(_F) \
    _F(cuInit,                                REQUIRED) \
    _F(cuDriverGetVersion,                    OPTIONAL) \
    _F(cuGetErrorName,                        OPTIONAL) \
    _F(cuGetErrorString,                      OPTIONAL) \
    _F(cuDeviceGetCount,                      REQUIRED) \
    _F(cuDeviceGet,                           REQUIRED) \
    _F(cuDeviceGetName,                       OPTIONAL) \
    _F(cuDeviceGetUuid,                       REQUIRED) \
    _F(cuDeviceGetAttribute,                  REQUIRED) \
    _F(cuDeviceGetPCIBusId,                   OPTIONAL) \
    _F(cuDeviceCanAccessPeer,                 OPTIONAL) \
    _F(cuDeviceGetP2PAttribute,               REQUIRED) \
    _F(cuDevicePrimaryCtxRetain,              REQUIRED) \
    _F(cuDevicePrimaryCtxRelease,             OPTIONAL) \
    _F(cuCtxGetCurrent,                       REQUIRED) \
    _F(cuCtxSetCurrent,                       REQUIRED) \
    _F(cuCtxPushCurrent,                      REQUIRED) \
    _F(cuCtxPopCurrent,                       REQUIRED) \
    _F(cuCtxGetDevice,                        REQUIRED) \
    _F(cuMemAlloc,                            REQUIRED) \
    _F(cuMemFree,                             REQUIRED) \
    _F(cuMemGetAddressRange,                  REQUIRED) \
    _F(cuIpcGetMemHandle,                     REQUIRED) \
    _F(cuIpcOpenMemHandle,                    REQUIRED) \
    _F(cuIpcCloseMemHandle,                   REQUIRED) \
    _F(cuMemCreate,                           REQUIRED) \
    _F(cuMemRelease,                          REQUIRED) \
    _F(cuMemGetAllocationGranularity,         REQUIRED) \
    _F(cuMemGetAllocationPropertiesFromHandle, REQUIRED) \
    _F(cuMemAddressReserve,                   REQUIRED) \
    _F(cuMemAddressFree,                      REQUIRED) \
    _F(cuMemMap,                              REQUIRED) \
    _F(cuMemUnmap,                            REQUIRED) \
    _F(cuMemSetAccess,                        REQUIRED) \
    _F(cuMemRetainAllocationHandle,           REQUIRED) \
    _F(cuMemExportToShareableHandle,          REQUIRED) \
    _F(cuMemImportFromShareableHandle,        REQUIRED) \
    _F(cuMemHostRegister,                     REQUIRED) \
    _F(cuMemHostUnregister,                   REQUIRED) \
    _F(cuPointerGetAttribute,                 OPTIONAL) \
    _F(cuPointerGetAttributes,                REQUIRED) \
    _F(cuStreamCreate,                        REQUIRED) \
    _F(cuStreamDestroy,                       REQUIRED) \
    _F(cuStreamQuery,                         OPTIONAL) \
    _F(cuStreamSynchronize,                   REQUIRED) \
    _F(cuCtxSynchronize,                      OPTIONAL) \
    _F(cuStreamWaitEvent,                     REQUIRED) \
    _F(cuStreamAddCallback,                   REQUIRED) \
    _F(cuMemPoolCreate,                       OPTIONAL) \
    _F(cuMemPoolDestroy,                      REQUIRED) \
    _F(cuDeviceGetDefaultMemPool,             OPTIONAL) \
    _F(cuMemAllocFromPoolAsync,               OPTIONAL) \
    _F(cuMemAllocAsync,                       REQUIRED) \
    _F(cuMemFreeAsync,                        REQUIRED) \
    _F(cuMemPoolSetAccess,                    REQUIRED) \
    _F(cuMemPoolExportToShareableHandle,      REQUIRED) \
    _F(cuMemPoolImportFromShareableHandle,    REQUIRED) \
    _F(cuMemPoolExportPointer,                REQUIRED) \
    _F(cuMemPoolImportPointer,                REQUIRED) \
    _F(cuLaunchHostFunc,                      OPTIONAL) \
    _F(cuMemcpy,                              REQUIRED) \
    _F(cuMemcpyAsync,                         REQUIRED) \
    _F(cuMemcpyDtoD,                          OPTIONAL) \
    _F(cuMemcpyDtoDAsync,                     REQUIRED) \
    _F(cuMemcpyHtoD,                          OPTIONAL) \
    _F(cuMemcpyHtoDAsync,                     OPTIONAL) \
    _F(cuMemcpyDtoH,                          OPTIONAL) \
    _F(cuMemcpyDtoHAsync,                     OPTIONAL) \
    _F(cuMemsetD8,                            REQUIRED) \
    _F(cuMemsetD8Async,                       OPTIONAL) \
    _F(cuEventCreate,                         REQUIRED) \
    _F(cuEventRecord,                         REQUIRED) \
    _F(cuEventQuery,                          REQUIRED) \
    _F(cuEventSynchronize,                    OPTIONAL) \
    _F(cuEventDestroy,                        REQUIRED)


#define UCT_CUDA_IPC_NS_DRIVER_REQUIRED 1
#define UCT_CUDA_IPC_NS_DRIVER_OPTIONAL 0

#define UCT_CUDA_IPC_NS_DRIVER_MEMBER(_cu_name, _need) \
    __typeof__(_cu_name) *_cu_name;

/*
 * UCT_CUDA_IPC_NS_DRIVER_NEED_<versioned name>: 1 for a REQUIRED entry, 0
 * otherwise. The extra level expands the cuda.h name first, so the table
 * and every call site agree on cuMemAlloc_v2.
 */
#define UCT_CUDA_IPC_NS_DRIVER_NEED_NAME(_cu_name) \
    UCT_CUDA_IPC_NS_DRIVER_NEED_PASTE(_cu_name)
#define UCT_CUDA_IPC_NS_DRIVER_NEED_PASTE(_symbol) \
    UCT_CUDA_IPC_NS_DRIVER_NEED_##_symbol
#define UCT_CUDA_IPC_NS_DRIVER_NEED(_cu_name, _need) \
    UCT_CUDA_IPC_NS_DRIVER_NEED_NAME(_cu_name) = UCT_CUDA_IPC_NS_DRIVER_##_need,

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
const char *uct_cuda_ipc_ns_driver_error_name(CUresult result);


/** Map a CUresult to a ucs_status_t */
ucs_status_t uct_cuda_ipc_ns_driver_status(CUresult result);


/**
 * Call driver entry point @a _func (its cuda.h name, a REQUIRED entry) with
 * the rest of the arguments; on failure, log at @a _level the call and its
 * CUresult name. Evaluates to a ucs_status_t.
 */
#define UCT_CUDA_IPC_NS_CU_CALL(_level, _func, ...) \
    UCT_CUDA_IPC_NS_CU_CALL_NAMED(_level, #_func, _func, __VA_ARGS__)

#define UCT_CUDA_IPC_NS_CU(_func, ...) \
    UCT_CUDA_IPC_NS_CU_CALL_NAMED(UCS_LOG_LEVEL_ERROR, #_func, _func, \
                                  __VA_ARGS__)

#define UCT_CUDA_IPC_NS_CU_CALL_NAMED(_level, _name, _func, ...) \
    ({ \
        _Static_assert(UCT_CUDA_IPC_NS_DRIVER_NEED_NAME(_func), \
                       _name " is an OPTIONAL driver entry: mark it " \
                       "REQUIRED in UCT_CUDA_IPC_NS_DRIVER_FOREACH"); \
        CUresult _cu_res = uct_cuda_ipc_ns_drv._func(__VA_ARGS__); \
        ucs_status_t _cu_status = UCS_OK; \
        if (ucs_unlikely(_cu_res != CUDA_SUCCESS)) { \
            _cu_status = uct_cuda_ipc_ns_driver_status(_cu_res); \
            ucs_log(_level, "%s() failed: %s", _name, \
                    uct_cuda_ipc_ns_driver_error_name(_cu_res)); \
        } \
        _cu_status; \
    })

#endif
