/*
 * cuda_ipc_ns: CUDA contexts for the calls of both transports.
 *
 * Driver calls need a current context; the application may have another one
 * current, or none (a UCX progress thread). These helpers make the right one
 * current for a call and restore the caller's afterwards. Primary contexts
 * are retained once for the life of the process: copies and mappings outlive
 * any one interface, and releasing them at exit could call into a driver
 * that is already unloaded.
 */
#ifndef UCT_CUDA_IPC_NS_CTX_H
#define UCT_CUDA_IPC_NS_CTX_H

#include <ucs/type/status.h>
#include <cuda.h>


/** The primary context of @a device (retained on first use) */
ucs_status_t uct_cuda_ipc_ns_primary_ctx(int device, CUcontext *ctx_p);


/**
 * Make @a ctx current on this thread, pushing it only when another context
 * is current. *pushed_p tells uct_cuda_ipc_ns_ctx_pop() what to undo.
 */
ucs_status_t uct_cuda_ipc_ns_ctx_push(CUcontext ctx, int *pushed_p);


/** Push the primary context of @a device, whatever is current */
ucs_status_t uct_cuda_ipc_ns_ctx_push_primary(int device, int *pushed_p);


/**
 * Make sure the thread has a current context: keep the caller's when it has
 * one (unified addressing lets any context copy), else push the primary
 * context of @a device.
 */
ucs_status_t uct_cuda_ipc_ns_ctx_ensure(int device, int *pushed_p);


/** Undo uct_cuda_ipc_ns_ctx_push() / _ensure() */
void uct_cuda_ipc_ns_ctx_pop(int pushed);


/** Make the primary context of @a device current (replacing any) */
ucs_status_t uct_cuda_ipc_ns_ctx_set_primary(int device);

#endif
