/*
 * cuda_ipc_ns: staged ops, copies by the owner through the staging rings of
 * a session (docs/owner-copies.md, "The staging ring"), for local memory the
 * owner cannot map: legacy cudaMalloc memory, VMM memory without a POSIX-fd
 * handle type, host memory, and the short and bcopy puts and gets.
 */
#ifndef UCT_CUDA_IPC_NS_STAGED_H
#define UCT_CUDA_IPC_NS_STAGED_H

#include "cuda_ipc_ns_copy_op.h"


/* The owner answered (@a status) for @a slot's chunk: its next step, and
 * the chunks of waiting ops that free slots take; returns the ops
 * completed */
unsigned uct_cuda_ipc_ns_staged_answered(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         uct_cuda_ipc_ns_copy_op_slot_t *slot,
                                         ucs_status_t status);

/* Start again the steps that lacked a resource, on every ring of
 * @a session (from progress); returns the ops completed */
unsigned uct_cuda_ipc_ns_staged_retry(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                      uct_cuda_ipc_ns_copy_op_session_t *session);

/*
 * The session ends: on each of its rings, the chunks end with @a status
 * (our copies still running are waited for: the ring is freed after), the
 * ops waiting for a slot complete with it, and the ring goes. Returns the
 * ops completed.
 */
unsigned uct_cuda_ipc_ns_staged_close(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                       uct_cuda_ipc_ns_copy_op_session_t *session,
                                       ucs_status_t status);

/* The memory copies of memory on the owner's GPU stage through: pinned
 * host memory when that GPU is not one we can use (@a owner_gpu_usable,
 * asked once when the key was unpacked), or the configuration says so */
static inline const uct_cuda_ipc_ns_staging_ops_t *
uct_cuda_ipc_ns_staged_ring_ops(const uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                int owner_gpu_usable)
{
    switch (copies->staging_kind) {
    case UCT_CUDA_IPC_NS_STAGING_HOST:
        return &uct_cuda_ipc_ns_staging_host_ops;
    case UCT_CUDA_IPC_NS_STAGING_DEVICE:
        return &uct_cuda_ipc_ns_staging_vmm_ops;
    default:
        /* the owner could not map a ring on our GPU either: pods usually
         * get GPUs of their own (docs/owner-copies.md) */
        return owner_gpu_usable ? &uct_cuda_ipc_ns_staging_vmm_ops :
               &uct_cuda_ipc_ns_staging_host_ops;
    }
}

/* The ring of @a session in memory of @a ops for a local buffer on
 * @a device (-1: host memory, any device's ring serves it), opened (on
 * device 0 for host memory) if it has none */
ucs_status_t
uct_cuda_ipc_ns_staged_ring_get(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                 uct_cuda_ipc_ns_copy_op_session_t *session,
                                 const uct_cuda_ipc_ns_staging_ops_t *ops,
                                 int device,
                                 uct_cuda_ipc_ns_copy_op_ring_t **ring_p);

/*
 * Queue @a op for slots of @a ring and issue what the free ones take.
 * Returns UCS_INPROGRESS when it runs or waits (an error completes it
 * later), or its error when its first chunk failed at once and nothing of
 * it runs (the op is then freed; a socket error marks the session, which
 * progress ends).
 */
ucs_status_t
uct_cuda_ipc_ns_staged_op_start(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                uct_cuda_ipc_ns_op_list_t *ops,
                                uct_cuda_ipc_ns_copy_op_ring_t *ring,
                                uct_cuda_ipc_ns_copy_op_t *op);

#endif
