/*
 * cuda_ipc_ns: staged ops, copies by the owner through a session's staging
 * ring (docs/owner-copies.md, "The staging ring"), for local memory the
 * owner cannot map: legacy cudaMalloc memory, VMM memory without a POSIX-fd
 * handle type, host memory, and the short and bcopy puts and gets.
 */
#ifndef UCT_CUDA_IPC_NS_COPY_STAGED_H
#define UCT_CUDA_IPC_NS_COPY_STAGED_H

#include "cuda_ipc_ns_copy_op.h"


/* The owner answered (@a status) for @a slot's chunk: its next step, and
 * the chunks of waiting ops that free slots take; returns the ops
 * completed */
unsigned uct_cuda_ipc_ns_staged_answered(uct_cuda_ipc_ns_copies_t *copies,
                                         uct_cuda_ipc_ns_copy_session_t *session,
                                         uct_cuda_ipc_ns_copy_slot_t *slot,
                                         ucs_status_t status);

/* Start again the steps that lacked a resource (from progress); returns
 * the ops completed */
unsigned uct_cuda_ipc_ns_staged_retry(uct_cuda_ipc_ns_copies_t *copies,
                                      uct_cuda_ipc_ns_copy_session_t *session);

/*
 * The session ends: its chunks end with @a status (our copies still
 * running are waited for: the ring is freed after), the ops waiting for a
 * slot complete with it, and the ring goes. Returns the ops completed.
 */
unsigned uct_cuda_ipc_ns_staging_close(uct_cuda_ipc_ns_copies_t *copies,
                                       uct_cuda_ipc_ns_copy_session_t *session,
                                       ucs_status_t status);

/* Whether copies of @a key's memory stage through pinned host memory (the
 * owner's GPU is not one we can use, or the configuration says so) */
int uct_cuda_ipc_ns_staged_on_host(const uct_cuda_ipc_ns_copies_t *copies,
                                   const uct_cuda_ipc_ns_rkey_info_t *key);

/* The session's ring for @a key's memory, opened on @a device (-1: host
 * memory, device 0) if it has none, in device or pinned host memory as
 * uct_cuda_ipc_ns_staged_on_host() says; UCS_ERR_UNSUPPORTED when the ring
 * it has is on another device or of the other kind */
ucs_status_t
uct_cuda_ipc_ns_staging_get(uct_cuda_ipc_ns_copies_t *copies,
                            uct_cuda_ipc_ns_copy_session_t *session,
                            const uct_cuda_ipc_ns_rkey_info_t *key,
                            int device, const void *buffer);

/* A staged op of @a key, its local elements still to set */
uct_cuda_ipc_ns_copy_op_t *
uct_cuda_ipc_ns_staged_op_new(uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                              const uct_cuda_ipc_ns_rkey_info_t *key,
                              uint64_t offset, int is_put,
                              uct_completion_t *comp);

/*
 * Queue @a op for slots and issue what the free ones take. Returns
 * UCS_INPROGRESS when it runs or waits (an error completes it later), or
 * its error when its first chunk failed at once and nothing of it runs (the
 * op is then freed; a socket error ends the session: the caller's to do).
 */
ucs_status_t
uct_cuda_ipc_ns_staged_op_start(uct_cuda_ipc_ns_copies_t *copies,
                                uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                                uct_cuda_ipc_ns_copy_session_t *session,
                                uct_cuda_ipc_ns_copy_op_t *op);

/*
 * A put or get whose local buffer the owner cannot map: through the
 * session's staging ring (allocated now on first use, on @a device, the
 * local buffer's, or device 0 for host memory), chunk by chunk. Accepted
 * even when no slot is free: the op then waits in the session's queue.
 * Returns as uct_cuda_ipc_ns_staged_op_start().
 */
ucs_status_t
uct_cuda_ipc_ns_staged_post(uct_cuda_ipc_ns_copies_t *copies,
                            uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                            uct_cuda_ipc_ns_copy_session_t *session,
                            const uct_cuda_ipc_ns_rkey_info_t *key,
                            const uct_iov_t *iov, size_t iovcnt, int device,
                            uint64_t offset, int is_put,
                            uct_completion_t *comp);

#endif
