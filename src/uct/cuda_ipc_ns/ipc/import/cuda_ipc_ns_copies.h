/*
 * cuda_ipc_ns: the importer's copy sessions — puts and gets on memory it
 * cannot map, made by the memory's owner (docs/owner-copies.md).
 *
 * An interface keeps one session per owner (broker address and identity),
 * opened on the first copy with uct_cuda_ipc_ns_copy_client_open(), which
 * authenticates the owner. A put or get becomes one COPY request per local
 * buffer element when the buffer is VMM memory exportable as a POSIX fd
 * (its fd goes to the owner with the first request that names it);
 * otherwise it goes through a staging ring of the session (one per local
 * device and kind of memory, cuda_ipc_ns_staging.h), chunk by chunk:
 * a copy by the owner between the remote
 * memory and a slot, and one by us between the slot and the buffer, on a
 * stream of the completion queue. The op completes when every answer and
 * every copy of ours came, from progress, which reads the sockets only
 * while copies are outstanding. Those sockets are in the interface's
 * wakeup set (an epoll set that also holds the completion queue's eventfd)
 * exactly while they owe answers. A session that ends (the owner died, or
 * answered nonsense) completes what it owed with an error and reports the
 * endpoints that were waiting.
 */
#ifndef UCT_CUDA_IPC_NS_COPIES_H
#define UCT_CUDA_IPC_NS_COPIES_H

#include "cuda_ipc_ns_copy_op.h"


/**
 * @a cq: the interface's completion queue, which runs the staging copies;
 * its eventfd is the first member of the wakeup set. @a max_requests: COPY
 * requests unanswered per session before a post of a mappable buffer
 * returns UCS_ERR_NO_RESOURCE; @a staging_slots of @a staging_slot_size
 * bytes: the staging ring of each session (checked here, allocated on
 * first use), in memory of @a staging_kind.
 */
ucs_status_t uct_cuda_ipc_ns_copies_init(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                         unsigned max_requests,
                                         unsigned staging_slots,
                                         size_t staging_slot_size,
                                         uct_cuda_ipc_ns_staging_kind_t staging_kind,
                                         uct_cuda_ipc_ns_cq_t *cq,
                                         uct_cuda_ipc_ns_copy_op_failed_func_t ep_failed);

/* Closes every session and frees its staging ring; what is outstanding
 * completes with UCS_ERR_CANCELED. Before the completion queue's cleanup. */
void uct_cuda_ipc_ns_copies_cleanup(uct_cuda_ipc_ns_copy_op_sessions_t *copies);


/**
 * Ask the owner of @a key for the copy between [remote_addr, + length of
 * @a iov) and the local @a iov (is_put: to the owner). @a owner_gpu_usable:
 * whether the key's GPU is one we can use (asked at unpack), which picks
 * the kind of staging ring.
 *
 * @return UCS_INPROGRESS (@a comp is called once done), UCS_ERR_NO_RESOURCE
 *         when the session owes max_requests answers (a mappable buffer;
 *         a staged op waits for slots in its ring's queue instead),
 *         UCS_ERR_UNSUPPORTED for local elements the owner's copy cannot
 *         take (too many, or on different devices), or the error of
 *         opening the session, allocating a ring or sending.
 */
ucs_status_t uct_cuda_ipc_ns_copies_post(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         uct_cuda_ipc_ns_op_list_t *ops,
                                         const uct_cuda_ipc_ns_rkey_info_t *key,
                                         int owner_gpu_usable,
                                         const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, int is_put,
                                         uct_completion_t *comp);


/**
 * Put short/bcopy on memory its owner copies: @a buffer (host or device
 * memory) is copied into free staging slots before this returns, then the
 * owner copies them out.
 *
 * @return UCS_OK (the owner's copies complete later: a flush waits for
 *         them), UCS_ERR_NO_RESOURCE when not enough slots are free (or
 *         staged ops wait for them), or an error as for the post.
 */
ucs_status_t uct_cuda_ipc_ns_copies_put_now(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                            uct_cuda_ipc_ns_op_list_t *ops,
                                            const uct_cuda_ipc_ns_rkey_info_t *key,
                                            int owner_gpu_usable,
                                            const void *buffer, size_t length,
                                            uint64_t remote_addr);


/**
 * Get bcopy on memory its owner copies: through the staging ring into a
 * host buffer of ours, handed to @a unpack_cb (with @a arg) before @a comp
 * is called. @return UCS_INPROGRESS or an error as for the post.
 */
ucs_status_t uct_cuda_ipc_ns_copies_get_unpack(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                               uct_cuda_ipc_ns_op_list_t *ops,
                                               const uct_cuda_ipc_ns_rkey_info_t *key,
                                               int owner_gpu_usable,
                                               size_t length,
                                               uint64_t remote_addr,
                                               uct_unpack_callback_t unpack_cb,
                                               void *arg, uct_completion_t *comp);


/* Read the answers that came; returns the number of ops completed */
unsigned uct_cuda_ipc_ns_copies_progress(uct_cuda_ipc_ns_copy_op_sessions_t *copies);


/* Whether progress has work now: an answer waits in a session's socket
 * (the wakeup set is readable without its eventfd), or a session whose
 * socket broke is to end (nothing would wake a waiter for it) */
int uct_cuda_ipc_ns_copies_ready(uct_cuda_ipc_ns_copy_op_sessions_t *copies);

#endif
