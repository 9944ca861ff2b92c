/*
 * cuda_cpy_ns: synchronous copies through the CUDA driver in the right
 * context (see cuda_cpy_ns_copy.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_copy.h"
#include "cuda_cpy_ns_memtype.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <pthread.h>


/* More devices than a node has; device ordinals beyond it are refused */
#define UCT_CUDA_CPY_NS_MAX_DEVICES 64


/*
 * Primary contexts retained on first use. They are kept for the life of the
 * process: releasing them at exit could call into a driver that is already
 * unloaded, and a retained primary context is what cudaSetDevice() leaves
 * behind too.
 */
static struct {
    pthread_mutex_t lock;
    CUcontext       ctx[UCT_CUDA_CPY_NS_MAX_DEVICES];
} uct_cuda_cpy_ns_primary = {
    .lock = PTHREAD_MUTEX_INITIALIZER
};


static ucs_status_t uct_cuda_cpy_ns_primary_ctx(int device, CUcontext *ctx_p)
{
    ucs_status_t status = UCS_OK;
    CUdevice cu_device;

    if ((device < 0) || (device >= UCT_CUDA_CPY_NS_MAX_DEVICES)) {
        ucs_error("cuda_cpy_ns: device ordinal %d out of range [0, %d)",
                  device, UCT_CUDA_CPY_NS_MAX_DEVICES);
        return UCS_ERR_NO_DEVICE;
    }

    pthread_mutex_lock(&uct_cuda_cpy_ns_primary.lock);
    if (uct_cuda_cpy_ns_primary.ctx[device] == NULL) {
        status = UCT_CUDA_IPC_NS_CU(DeviceGet, &cu_device, device);
        if (status == UCS_OK) {
            status = UCT_CUDA_IPC_NS_CU(DevicePrimaryCtxRetain,
                                        &uct_cuda_cpy_ns_primary.ctx[device],
                                        cu_device);
        }
    }
    *ctx_p = uct_cuda_cpy_ns_primary.ctx[device];
    pthread_mutex_unlock(&uct_cuda_cpy_ns_primary.lock);
    return status;
}


/* Push the primary context of @a device */
static ucs_status_t uct_cuda_cpy_ns_push_primary(int device, int *pushed_p)
{
    CUcontext ctx;
    ucs_status_t status;

    status = uct_cuda_cpy_ns_primary_ctx(device, &ctx);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(CtxPushCurrent, ctx);
    *pushed_p = (status == UCS_OK);
    return status;
}


/* @return UCS_OK and *has_ctx_p nonzero when the thread has a context */
static ucs_status_t uct_cuda_cpy_ns_has_ctx(int *has_ctx_p)
{
    CUcontext ctx = NULL;
    ucs_status_t status;

    status     = UCT_CUDA_IPC_NS_CU(CtxGetCurrent, &ctx);
    *has_ctx_p = (ctx != NULL);
    return status;
}


ucs_status_t uct_cuda_cpy_ns_ctx_push(int device, int *pushed_p)
{
    ucs_status_t status;
    int has_ctx;

    *pushed_p = 0;
    status    = uct_cuda_cpy_ns_has_ctx(&has_ctx);
    if ((status != UCS_OK) || has_ctx) {
        return status;
    }

    return uct_cuda_cpy_ns_push_primary(device, pushed_p);
}


ucs_status_t uct_cuda_cpy_ns_ctx_set_current(int device)
{
    CUcontext ctx;
    ucs_status_t status;

    status = uct_cuda_cpy_ns_primary_ctx(device, &ctx);
    if (status != UCS_OK) {
        return status;
    }

    return UCT_CUDA_IPC_NS_CU(CtxSetCurrent, ctx);
}


void uct_cuda_cpy_ns_ctx_pop(int pushed)
{
    CUcontext ctx;

    if (pushed) {
        (void)UCT_CUDA_IPC_NS_CU(CtxPopCurrent, &ctx);
    }
}


/* The device owning @a a, else the one owning @a b, else device 0: only
 * asked when the thread has no current context */
static int uct_cuda_cpy_ns_copy_device(const void *a, const void *b)
{
    uct_cuda_cpy_ns_ptr_info_t info;

    uct_cuda_cpy_ns_ptr_query(a, &info);
    if (!info.is_cuda && (b != NULL)) {
        uct_cuda_cpy_ns_ptr_query(b, &info);
    }
    return info.is_cuda ? info.device : 0;
}


/* Push a context for memory at @a a / @a b when the thread has none */
static ucs_status_t uct_cuda_cpy_ns_ctx_push_for(const void *a, const void *b,
                                                 int *pushed_p)
{
    ucs_status_t status;
    int has_ctx;

    *pushed_p = 0;
    status    = uct_cuda_cpy_ns_has_ctx(&has_ctx);
    if ((status != UCS_OK) || has_ctx) {
        return status;
    }

    return uct_cuda_cpy_ns_push_primary(uct_cuda_cpy_ns_copy_device(a, b),
                                        pushed_p);
}


ucs_status_t uct_cuda_cpy_ns_copy(void *dst, const void *src, size_t length)
{
    ucs_status_t status;
    int pushed;

    if (length == 0) {
        return UCS_OK;
    }

    status = uct_cuda_cpy_ns_ctx_push_for(dst, src, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(Memcpy, (CUdeviceptr)dst, (CUdeviceptr)src,
                                length);
    uct_cuda_cpy_ns_ctx_pop(pushed);
    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: copy of %zu bytes from %p to %p failed",
                  length, src, dst);
    }
    return status;
}


ucs_status_t uct_cuda_cpy_ns_memset(void *dst, int value, size_t length)
{
    ucs_status_t status;
    int pushed;

    if (length == 0) {
        return UCS_OK;
    }

    status = uct_cuda_cpy_ns_ctx_push_for(dst, NULL, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(MemsetD8, (CUdeviceptr)dst,
                                (unsigned char)value, length);
    uct_cuda_cpy_ns_ctx_pop(pushed);
    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: setting %zu bytes at %p to 0x%x failed",
                  length, dst, value & 0xff);
    }
    return status;
}
