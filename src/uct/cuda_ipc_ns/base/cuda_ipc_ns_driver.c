/*
 * cuda_ipc_ns: run-time loading of the CUDA driver (see cuda_ipc_ns_driver.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/sys/string.h>
#include <ucs/type/spinlock.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>


uct_cuda_ipc_ns_driver_t uct_cuda_ipc_ns_drv;

static struct {
    pthread_mutex_t lock;
    int             attempted;
    ucs_status_t    status;
    void            *dl;
    char            path[1024];
} uct_cuda_ipc_ns_driver_ctx = {
    .lock      = PTHREAD_MUTEX_INITIALIZER,
    .attempted = 0,
    .status    = UCS_ERR_NO_DEVICE
};

#define UCT_CUDA_IPC_NS_QUOTE(_x) #_x
/* expands the cuda.h macro: "cuMemAlloc_v2" for cuMemAlloc */
#define UCT_CUDA_IPC_NS_VERSIONED_NAME(_cu_name) \
    UCT_CUDA_IPC_NS_QUOTE(_cu_name)

typedef __typeof__(cuGetProcAddress) uct_cuda_ipc_ns_get_proc_address_t;


static const struct {
    CUresult   result;
    const char *name;
} uct_cuda_ipc_ns_cu_errors[] = {
#define UCT_CUDA_IPC_NS_CU_ERR(_e) {_e, #_e}
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_SUCCESS),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_INVALID_VALUE),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_OUT_OF_MEMORY),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_NOT_INITIALIZED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_DEINITIALIZED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_NO_DEVICE),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_INVALID_DEVICE),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_INVALID_CONTEXT),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_MAP_FAILED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_ALREADY_MAPPED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_NOT_MAPPED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_INVALID_HANDLE),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_NOT_FOUND),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_NOT_READY),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_ILLEGAL_ADDRESS),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_NOT_SUPPORTED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_NOT_PERMITTED),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_OPERATING_SYSTEM),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_INVALID_IMAGE),
    UCT_CUDA_IPC_NS_CU_ERR(CUDA_ERROR_UNKNOWN)
#undef UCT_CUDA_IPC_NS_CU_ERR
};


const char *uct_cuda_ipc_ns_driver_error_name(CUresult result)
{
    const char *name = NULL;
    size_t i;

    /* the driver knows every name; our table covers a driver that failed */
    if ((uct_cuda_ipc_ns_drv.cuGetErrorName != NULL) &&
        (uct_cuda_ipc_ns_drv.cuGetErrorName(result, &name) == CUDA_SUCCESS) &&
        (name != NULL)) {
        return name;
    }

    for (i = 0; i < ucs_static_array_size(uct_cuda_ipc_ns_cu_errors); ++i) {
        if (uct_cuda_ipc_ns_cu_errors[i].result == result) {
            return uct_cuda_ipc_ns_cu_errors[i].name;
        }
    }
    return "CUDA_ERROR_<unknown>";
}


ucs_status_t uct_cuda_ipc_ns_driver_status(CUresult result)
{
    switch (result) {
    case CUDA_SUCCESS:
        return UCS_OK;
    case CUDA_ERROR_NOT_READY:
        return UCS_INPROGRESS;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return UCS_ERR_NO_MEMORY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
        return UCS_ERR_NO_DEVICE;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
        return UCS_ERR_INVALID_PARAM;
    case CUDA_ERROR_NOT_SUPPORTED:
        return UCS_ERR_UNSUPPORTED;
    case CUDA_ERROR_NOT_PERMITTED:
        return UCS_ERR_REJECTED;
    case CUDA_ERROR_NOT_FOUND:
        return UCS_ERR_NO_ELEM;
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
        return UCS_ERR_UNREACHABLE;
    case CUDA_ERROR_ALREADY_MAPPED:
        return UCS_ERR_ALREADY_EXISTS;
    default:
        return UCS_ERR_IO_ERROR;
    }
}


static void uct_cuda_ipc_ns_driver_reset(void)
{
    memset(&uct_cuda_ipc_ns_drv, 0, sizeof(uct_cuda_ipc_ns_drv));
    if (uct_cuda_ipc_ns_driver_ctx.dl != NULL) {
        dlclose(uct_cuda_ipc_ns_driver_ctx.dl);
        uct_cuda_ipc_ns_driver_ctx.dl = NULL;
    }
}


/*
 * The CUDA version whose entry points the table's prototypes are: the
 * newest version of an entry point at or below it. Not the CUDA_VERSION of
 * the cuda.h we build with: a request at 13000 returns cuCtxGetDevice_v2,
 * which takes a context too, for "cuCtxGetDevice" (a crash on driver 580,
 * docs/testing.md "What a GPU showed"). Raise it only with the prototypes.
 */
#define UCT_CUDA_IPC_NS_CU_API_VERSION 12000

/* Resolve one symbol: cuGetProcAddress at UCT_CUDA_IPC_NS_CU_API_VERSION,
 * then dlsym() of the versioned name for drivers whose cuGetProcAddress
 * lacks it */
static void *
uct_cuda_ipc_ns_driver_resolve(void *dl,
                               uct_cuda_ipc_ns_get_proc_address_t *get_proc,
                               const char *base_name,
                               const char *versioned_name)
{
    CUdriverProcAddressQueryResult query_result;
    void *func = NULL;
    CUresult res;

    if (get_proc != NULL) {
        res = get_proc(base_name, &func, UCT_CUDA_IPC_NS_CU_API_VERSION,
                       CU_GET_PROC_ADDRESS_DEFAULT, &query_result);
        if ((res == CUDA_SUCCESS) &&
            (query_result == CU_GET_PROC_ADDRESS_SUCCESS) && (func != NULL)) {
            return func;
        }
        ucs_debug("cuGetProcAddress(%s, %d) failed: %s (query result %d), "
                  "trying dlsym(%s)", base_name, UCT_CUDA_IPC_NS_CU_API_VERSION,
                  uct_cuda_ipc_ns_driver_error_name(res), (int)query_result,
                  versioned_name);
    }

    return dlsym(dl, versioned_name);
}


static ucs_status_t uct_cuda_ipc_ns_driver_do_load(const char *path)
{
    uct_cuda_ipc_ns_get_proc_address_t *get_proc;
    const char *missing = NULL;
    CUresult res;
    void *dl;

    dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        ucs_debug("cuda_ipc_ns: cannot load CUDA driver '%s': %s", path,
                  dlerror());
        return UCS_ERR_NO_DEVICE;
    }
    uct_cuda_ipc_ns_driver_ctx.dl = dl;

    get_proc = (uct_cuda_ipc_ns_get_proc_address_t*)dlsym(dl,
                                                          "cuGetProcAddress_v2");
    if (get_proc == NULL) {
        ucs_debug("cuda_ipc_ns: '%s' has no cuGetProcAddress_v2, resolving "
                  "entry points with dlsym", path);
    }

#define UCT_CUDA_IPC_NS_DRIVER_RESOLVE(_cu_name, _need) \
    uct_cuda_ipc_ns_drv._cu_name = (__typeof__(_cu_name)*) \
        uct_cuda_ipc_ns_driver_resolve(dl, get_proc, #_cu_name, \
                                       UCT_CUDA_IPC_NS_VERSIONED_NAME(_cu_name)); \
    if (uct_cuda_ipc_ns_drv._cu_name != NULL) { \
        /* resolved */ \
    } else if (UCT_CUDA_IPC_NS_DRIVER_##_need) { \
        missing = (missing != NULL) ? missing : #_cu_name; \
    } else { \
        ucs_debug("cuda_ipc_ns: CUDA driver '%s' lacks optional %s: it " \
                  "stays NULL, callers that need it fail", path, #_cu_name); \
    }

    UCT_CUDA_IPC_NS_DRIVER_FOREACH(UCT_CUDA_IPC_NS_DRIVER_RESOLVE)
#undef UCT_CUDA_IPC_NS_DRIVER_RESOLVE

    if (missing != NULL) {
        ucs_debug("cuda_ipc_ns: CUDA driver '%s' lacks required %s", path,
                  missing);
        goto err;
    }

    res = uct_cuda_ipc_ns_drv.cuInit(0);
    if (res != CUDA_SUCCESS) {
        ucs_debug("cuda_ipc_ns: cuInit(0) with driver '%s' failed: %s", path,
                  uct_cuda_ipc_ns_driver_error_name(res));
        goto err;
    }

    ucs_debug("cuda_ipc_ns: loaded CUDA driver '%s'", path);
    return UCS_OK;

err:
    uct_cuda_ipc_ns_driver_reset();
    return UCS_ERR_NO_DEVICE;
}


ucs_status_t uct_cuda_ipc_ns_driver_load(const char *path)
{
    ucs_status_t status;

    pthread_mutex_lock(&uct_cuda_ipc_ns_driver_ctx.lock);
    if (!uct_cuda_ipc_ns_driver_ctx.attempted) {
        uct_cuda_ipc_ns_driver_ctx.attempted = 1;
        ucs_strncpy_zero(uct_cuda_ipc_ns_driver_ctx.path, path,
                         sizeof(uct_cuda_ipc_ns_driver_ctx.path));
        uct_cuda_ipc_ns_driver_ctx.status = uct_cuda_ipc_ns_driver_do_load(path);
    } else if (strcmp(path, uct_cuda_ipc_ns_driver_ctx.path)) {
        ucs_debug("cuda_ipc_ns: driver already loaded from '%s', ignoring "
                  "'%s'", uct_cuda_ipc_ns_driver_ctx.path, path);
    }
    status = uct_cuda_ipc_ns_driver_ctx.status;
    pthread_mutex_unlock(&uct_cuda_ipc_ns_driver_ctx.lock);
    return status;
}

