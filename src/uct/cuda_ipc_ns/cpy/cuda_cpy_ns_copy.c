/*
 * cuda_cpy_ns: synchronous copies through the CUDA driver in the right
 * context (see cuda_cpy_ns_copy.h): each returns once the data is written
 * (the default stream synchronized after the copy or memset).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_copy.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>


/* The device owning @a a, else the one owning @a b, else device 0: only
 * asked when the thread has no current context */
static int uct_cuda_cpy_ns_copy_device(const void *a, const void *b)
{
    uct_cuda_ipc_ns_ptr_info_t info;

    uct_cuda_ipc_ns_ptr_query(a, &info);
    if (!info.is_cuda && (b != NULL)) {
        uct_cuda_ipc_ns_ptr_query(b, &info);
    }
    return info.is_cuda ? info.device : 0;
}


/* Make sure a context is current for memory at @a a / @a b: the caller's
 * when it has one (unified addressing lets any context copy), else the
 * primary context of the memory's device */
static ucs_status_t uct_cuda_cpy_ns_ctx_push_for(const void *a, const void *b,
                                                 int *pushed_p)
{
    CUcontext current = NULL;
    ucs_status_t status;

    *pushed_p = 0;
    status    = UCT_CUDA_IPC_NS_CU(cuCtxGetCurrent, &current);
    if (status != UCS_OK) {
        return status;
    }
    /* the pointers are only asked when the thread has no context */
    return uct_cuda_ipc_ns_ctx_push(current, (current != NULL) ? -1 :
                                    uct_cuda_cpy_ns_copy_device(a, b),
                                    pushed_p);
}


/* Copy from @a src, or set to @a value when @a src is NULL, @a length bytes
 * at @a dst, in a context for that memory */
static ucs_status_t uct_cuda_cpy_ns_write(void *dst, const void *src,
                                          int value, size_t length)
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

    status = (src != NULL) ?
             UCT_CUDA_IPC_NS_CU(cuMemcpy, (CUdeviceptr)dst, (CUdeviceptr)src,
                                length) :
             UCT_CUDA_IPC_NS_CU(cuMemsetD8, (CUdeviceptr)dst,
                                (unsigned char)value, length);
    if (status == UCS_OK) {
        /* cuMemcpy to device memory and cuMemsetD8 return before the data
         * lands (the driver's "API synchronization behavior"): the write is
         * done, and may be reported so, once the default stream is */
        status = UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, NULL);
    }
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: writing %zu bytes at %p from %p (value 0x%x "
                  "when none) failed", length, dst, src, value & 0xff);
    }
    return status;
}


ucs_status_t uct_cuda_cpy_ns_copy(void *dst, const void *src, size_t length)
{
    return uct_cuda_cpy_ns_write(dst, src, 0, length);
}


ucs_status_t uct_cuda_cpy_ns_copy_memset(void *dst, int value, size_t length)
{
    return uct_cuda_cpy_ns_write(dst, NULL, value, length);
}
