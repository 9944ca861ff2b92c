/*
 * cuda_ipc_ns: CUDA contexts for driver calls (see cuda_ipc_ns_ctx.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <pthread.h>


/* More devices than a node has; ordinals beyond it are refused */
#define UCT_CUDA_IPC_NS_MAX_DEVICES  64

static pthread_mutex_t uct_cuda_ipc_ns_primary_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext uct_cuda_ipc_ns_primary[UCT_CUDA_IPC_NS_MAX_DEVICES];


ucs_status_t uct_cuda_ipc_ns_ctx_primary(int device, CUcontext *ctx_p)
{
    ucs_status_t status = UCS_OK;
    CUdevice cu_device;
    CUcontext ctx;

    if ((device < 0) || (device >= UCT_CUDA_IPC_NS_MAX_DEVICES)) {
        ucs_error("cuda_ipc_ns: device ordinal %d out of range [0, %d)",
                  device, UCT_CUDA_IPC_NS_MAX_DEVICES);
        return UCS_ERR_NO_DEVICE;
    }

    /* read without the lock: set once, never changed */
    ctx = __atomic_load_n(&uct_cuda_ipc_ns_primary[device], __ATOMIC_ACQUIRE);
    if (ucs_likely(ctx != NULL)) {
        *ctx_p = ctx;
        return UCS_OK;
    }

    pthread_mutex_lock(&uct_cuda_ipc_ns_primary_lock);
    ctx = uct_cuda_ipc_ns_primary[device];
    if (ctx == NULL) {
        status = UCT_CUDA_IPC_NS_CU(cuDeviceGet, &cu_device, device);
        if (status == UCS_OK) {
            status = UCT_CUDA_IPC_NS_CU(cuDevicePrimaryCtxRetain, &ctx,
                                        cu_device);
        }
        if (status == UCS_OK) {
            __atomic_store_n(&uct_cuda_ipc_ns_primary[device], ctx,
                             __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_primary_lock);

    *ctx_p = ctx;
    return status;
}


ucs_status_t uct_cuda_ipc_ns_ctx_push(CUcontext ctx, int device,
                                      int *pushed_p)
{
    CUcontext current = NULL;
    ucs_status_t status;

    *pushed_p = 0;
    if (ctx == NULL) {
        status = uct_cuda_ipc_ns_ctx_primary(device, &ctx);
        if (status != UCS_OK) {
            return status;
        }
    }

    status = UCT_CUDA_IPC_NS_CU(cuCtxGetCurrent, &current);
    if ((status != UCS_OK) || (current == ctx)) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(cuCtxPushCurrent, ctx);
    if (status == UCS_OK) {
        *pushed_p = 1;
    }
    return status;
}


void uct_cuda_ipc_ns_ctx_pop(int pushed)
{
    CUcontext ctx;

    if (pushed) {
        (void)UCT_CUDA_IPC_NS_CU(cuCtxPopCurrent, &ctx);
    }
}
