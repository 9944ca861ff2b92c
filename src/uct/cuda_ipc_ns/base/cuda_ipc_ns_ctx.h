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
ucs_status_t uct_cuda_ipc_ns_ctx_primary(int device, CUcontext *ctx_p);


/**
 * Make a context current on this thread for driver calls: @a ctx, or when it
 * is NULL the primary context of @a device. It is pushed only when another
 * context, or none, is current, so that uct_cuda_ipc_ns_ctx_pop(*pushed_p)
 * restores the caller's context and never pops it. The one way the library
 * makes a context current.
 */
ucs_status_t uct_cuda_ipc_ns_ctx_push(CUcontext ctx, int device,
                                      int *pushed_p);


/** Undo uct_cuda_ipc_ns_ctx_push() */
void uct_cuda_ipc_ns_ctx_pop(int pushed);

#endif
