/*
 * cuda_ipc_ns: staged ops (see cuda_ipc_ns_staged.h,
 * docs/owner-copies.md, "The staging ring").
 *
 * A chunk holds a slot from the moment it is issued until its last copy
 * ended: a get asks the owner for remote -> slot, then copies slot ->
 * buffer on the ring's stream; a put copies buffer -> slot, then asks the
 * owner for slot -> remote. Our copies are ops of the completion queue (its
 * events, its eventfd for waiters) whose completion is the slot's; the
 * owner's answers come through the session's socket. Each time a slot
 * frees up, the oldest waiting op issues its next chunk, so that with
 * several slots the owner's copy of one chunk runs while we copy another.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_staged.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <inttypes.h>
#include <string.h>


/* The smallest chunk a staged op is cut into (below a slot): each costs a
 * request and an answer */
#define UCT_CUDA_IPC_NS_STAGED_CHUNK_MIN (256ul * 1024)


/* A staged op whose chunks all ended, or that failed and has none running
 * any more, completes: returns 1 then */
static unsigned uct_cuda_ipc_ns_staged_op_check(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                                uct_cuda_ipc_ns_copy_op_t *op)
{
    if ((op->status != UCS_OK) && op->in_queue) {
        ucs_list_del(&op->queue); /* issues no more chunks */
        op->in_queue = 0;
    }

    if (op->posting || op->in_queue || (op->unanswered > 0)) {
        return 0;
    }

    if (op->bounce != NULL) {
        if ((op->status == UCS_OK) && (op->super.list != NULL)) {
            op->unpack_cb(op->unpack_arg, op->bounce, op->elems[0].length);
        }
        ucs_free(op->bounce);
    }
    --copies->outstanding;
    uct_cuda_ipc_ns_copy_op_complete(copies, op);
    return 1;
}


/* @a slot's chunk ended with @a status: the slot is free again */
static unsigned uct_cuda_ipc_ns_staged_release(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                               uct_cuda_ipc_ns_copy_op_slot_t *slot,
                                               ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring = slot->ring;
    uct_cuda_ipc_ns_copy_op_t *op        = slot->op;

    if ((slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_COPY) ||
        (slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_SEND)) {
        --ring->retry_slots;
    }
    slot->op    = NULL;
    slot->state = UCT_CUDA_IPC_NS_SLOT_FREE;
    ++ring->free_slots;

    if ((status != UCS_OK) && (op->status == UCS_OK)) {
        op->status = status;
    }
    --op->unanswered;
    return uct_cuda_ipc_ns_staged_op_check(copies, op);
}


static void uct_cuda_ipc_ns_staged_copied(uct_completion_t *comp);


/* Our copy of @a slot's chunk: buffer -> slot for a put, slot -> buffer
 * for a get, on the ring's stream; UCS_ERR_NO_RESOURCE when the completion
 * queue has no op free (MAX_EVENTS) */
static ucs_status_t
uct_cuda_ipc_ns_staged_copy(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                            uct_cuda_ipc_ns_copy_op_slot_t *slot)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring = slot->ring;
    CUdeviceptr slot_ptr = uct_cuda_ipc_ns_staging_slot(&ring->staging,
                                                        slot->index);
    CUdeviceptr local    = (CUdeviceptr)slot->local;
    int is_put           = slot->op->is_put;
    uct_cuda_ipc_ns_cq_op_t *cq_op;
    ucs_status_t status;
    int pushed;

    cq_op = uct_cuda_ipc_ns_cq_op_get(copies->cq);
    if (cq_op == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    status = uct_cuda_ipc_ns_ctx_push(ring->staging.ctx, ring->staging.device,
                                      &pushed);
    if (status != UCS_OK) {
        goto out_put_op;
    }

    /* any local memory: device (legacy, VMM of another kind) or host */
    status = UCT_CUDA_IPC_NS_CU(cuMemcpyAsync, is_put ? slot_ptr : local,
                                is_put ? local : slot_ptr, slot->length,
                                ring->stream->stream);
    if (status == UCS_OK) {
        slot->comp.func   = uct_cuda_ipc_ns_staged_copied;
        slot->comp.count  = 1;
        slot->comp.status = UCS_OK;
        status = uct_cuda_ipc_ns_cq_post(copies->cq, &ring->ops, cq_op,
                                         ring->stream, NULL, &slot->comp);
    }
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status == UCS_OK) {
        return UCS_OK;
    }

    ucs_error("cuda_ipc_ns: staging copy of %zu bytes %s slot %u of a ring "
              "of pid %u's session (%s memory, device %d; local %p) failed: "
              "%s", slot->length, is_put ? "to" : "from", slot->index,
              ring->session->pid, uct_cuda_ipc_ns_staging_kind_str(&ring->staging),
              ring->staging.device, slot->local, ucs_status_string(status));
out_put_op:
    uct_cuda_ipc_ns_cq_op_put(copies->cq, cq_op);
    return status;
}


/* Put short/bcopy: the caller's data into @a slot now (it may reuse its
 * buffer once the put returns); the slot is free, so nothing runs on it */
static ucs_status_t
uct_cuda_ipc_ns_staged_copy_in_now(uct_cuda_ipc_ns_copy_op_slot_t *slot)
{
    const uct_cuda_ipc_ns_staging_t *staging = &slot->ring->staging;
    ucs_status_t status;
    int pushed;

    status = uct_cuda_ipc_ns_ctx_push(staging->ctx, staging->device, &pushed);
    if (status != UCS_OK) {
        return status;
    }
    status = UCT_CUDA_IPC_NS_CU(cuMemcpy,
                                uct_cuda_ipc_ns_staging_slot(staging,
                                                             slot->index),
                                (CUdeviceptr)slot->local, slot->length);
    if (status == UCS_OK) {
        /* cuMemcpy may return before the data lands (a pageable source is
         * staged first, device memory is copied on the default stream):
         * the owner reads the slot once asked */
        status = UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, NULL);
    }
    uct_cuda_ipc_ns_ctx_pop(pushed);
    return status;
}


/* The owner's copy of @a slot's chunk: slot -> remote for a put, remote ->
 * slot for a get */
static ucs_status_t
uct_cuda_ipc_ns_staged_send(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                            uct_cuda_ipc_ns_copy_op_slot_t *slot)
{
    const uct_cuda_ipc_ns_staging_t *staging   = &slot->ring->staging;
    uct_cuda_ipc_ns_copy_op_session_t *session = slot->ring->session;
    uct_cuda_ipc_ns_copy_op_t *op              = slot->op;
    uct_cuda_ipc_ns_copy_op_local_t local;
    ucs_status_t status;

    local.base    = staging->base;
    local.size    = staging->size;
    local.buf_id  = staging->buf_id;
    local.ops     = staging->ops;
    local.staging = staging;
    status = uct_cuda_ipc_ns_copy_op_send(
            copies, session, &local,
            (void*)uct_cuda_ipc_ns_staging_slot(staging, slot->index),
            slot->length, slot->offset, op, slot);
    if (status == UCS_OK) {
        uct_cuda_ipc_ns_copy_op_wakeup(copies, session, 1);
    }
    return status;
}


/*
 * Start the step @a state (SLOT_COPY: ours, SLOT_REQUEST: the owner's) of
 * @a slot's chunk. Without a completion queue op or room in the socket it
 * is retried from progress; on an error the chunk ends with it. Returns the
 * ops completed.
 */
static unsigned uct_cuda_ipc_ns_staged_start(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                             uct_cuda_ipc_ns_copy_op_slot_t *slot,
                                             uct_cuda_ipc_ns_copy_op_slot_state_t state)
{
    ucs_status_t status;

    if ((state == UCT_CUDA_IPC_NS_SLOT_COPY) && slot->op->copy_in_now) {
        status = uct_cuda_ipc_ns_staged_copy_in_now(slot);
        if (status != UCS_OK) {
            slot->state = state;
            return uct_cuda_ipc_ns_staged_release(copies, slot, status);
        }
        state = UCT_CUDA_IPC_NS_SLOT_REQUEST; /* the slot holds the data */
    }

    if (state == UCT_CUDA_IPC_NS_SLOT_REQUEST) {
        status = uct_cuda_ipc_ns_staged_send(copies, slot);
    } else {
        status = uct_cuda_ipc_ns_staged_copy(copies, slot);
    }

    if (status == UCS_OK) {
        slot->state = state;
        return 0;
    } else if ((status == UCS_ERR_NO_RESOURCE) ||
               (status == UCS_ERR_TIMED_OUT)) {
        slot->state = (state == UCT_CUDA_IPC_NS_SLOT_REQUEST) ?
                      UCT_CUDA_IPC_NS_SLOT_RETRY_SEND :
                      UCT_CUDA_IPC_NS_SLOT_RETRY_COPY;
        ++slot->ring->retry_slots;
        return 0;
    }

    slot->state = state;
    return uct_cuda_ipc_ns_staged_release(copies, slot, status);
}


/* Issue chunks of the ring's waiting ops, oldest first, while slots are
 * free */
static unsigned uct_cuda_ipc_ns_staged_dispatch(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                                uct_cuda_ipc_ns_copy_op_ring_t *ring)
{
    const uct_cuda_ipc_ns_copy_op_elem_t *elem;
    uct_cuda_ipc_ns_copy_op_slot_t *slot;
    uct_cuda_ipc_ns_copy_op_t *op;
    unsigned count = 0, i;

    while (!ring->session->closing && (ring->free_slots > 0) &&
           !ucs_list_is_empty(&ring->waiting)) {
        op   = ucs_list_head(&ring->waiting, uct_cuda_ipc_ns_copy_op_t, queue);
        slot = NULL;
        for (i = 0; slot == NULL; ++i) {
            if (ring->slots[i].state == UCT_CUDA_IPC_NS_SLOT_FREE) {
                slot = &ring->slots[i];
            }
        }

        elem         = &op->elems[op->elem];
        slot->op     = op;
        slot->local  = elem->ptr + op->elem_off;
        slot->length = ucs_min(op->chunk, elem->length - op->elem_off);
        slot->offset = op->offset;
        --ring->free_slots;
        ++op->unanswered;

        op->offset   += slot->length;
        op->elem_off += slot->length;
        if (op->elem_off == elem->length) {
            ++op->elem;
            op->elem_off = 0;
        }
        if (op->elem == op->num_elems) {
            ucs_list_del(&op->queue); /* its last chunk */
            op->in_queue = 0;
        }

        ucs_trace_data("cuda_ipc_ns: staged %s op %p: slot %u, %zu bytes at "
                       "offset %" PRIu64 ", local %p", op->is_put ? "put" :
                       "get", op, slot->index, slot->length, slot->offset,
                       slot->local);
        count += uct_cuda_ipc_ns_staged_start(copies, slot,
                                              op->is_put ?
                                              UCT_CUDA_IPC_NS_SLOT_COPY :
                                              UCT_CUDA_IPC_NS_SLOT_REQUEST);
    }
    return count;
}


unsigned uct_cuda_ipc_ns_staged_answered(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         uct_cuda_ipc_ns_copy_op_slot_t *slot,
                                         ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring = slot->ring;
    unsigned count;

    if ((status == UCS_OK) && !slot->op->is_put && !ring->session->closing) {
        count = uct_cuda_ipc_ns_staged_start(copies, slot,
                                             UCT_CUDA_IPC_NS_SLOT_COPY);
    } else {
        count = uct_cuda_ipc_ns_staged_release(copies, slot, status);
    }
    return count + uct_cuda_ipc_ns_staged_dispatch(copies, ring);
}


/* Our copy of a chunk ended (from the completion queue's progress) */
static void uct_cuda_ipc_ns_staged_copied(uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_op_slot_t *slot       = ucs_container_of(
            comp, uct_cuda_ipc_ns_copy_op_slot_t, comp);
    uct_cuda_ipc_ns_copy_op_ring_t *ring       = slot->ring;
    uct_cuda_ipc_ns_copy_op_sessions_t *copies = ring->session->copies;

    if (comp->status != UCS_OK) {
        ucs_error("cuda_ipc_ns: staging copy of %zu bytes %s slot %u (local "
                  "%p) failed: %s", slot->length,
                  slot->op->is_put ? "to" : "from", slot->index, slot->local,
                  ucs_status_string(comp->status));
        (void)uct_cuda_ipc_ns_staged_release(copies, slot, comp->status);
    } else if (slot->op->is_put) {
        (void)uct_cuda_ipc_ns_staged_start(copies, slot,
                                           UCT_CUDA_IPC_NS_SLOT_REQUEST);
    } else {
        (void)uct_cuda_ipc_ns_staged_release(copies, slot, UCS_OK);
    }
    (void)uct_cuda_ipc_ns_staged_dispatch(copies, ring);
}


unsigned uct_cuda_ipc_ns_staged_retry(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                      uct_cuda_ipc_ns_copy_op_session_t *session)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring;
    uct_cuda_ipc_ns_copy_op_slot_t *slot;
    unsigned count = 0, i;

    ucs_list_for_each(ring, &session->rings, list) {
        if (ring->retry_slots == 0) {
            continue;
        }
        for (i = 0; (i < ring->staging.num_slots) && (ring->retry_slots > 0);
             ++i) {
            slot = &ring->slots[i];
            if (slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_SEND) {
                slot->state = UCT_CUDA_IPC_NS_SLOT_REQUEST;
            } else if (slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_COPY) {
                slot->state = UCT_CUDA_IPC_NS_SLOT_COPY;
            } else {
                continue;
            }
            --ring->retry_slots;
            count += uct_cuda_ipc_ns_staged_start(copies, slot, slot->state);
        }
        count += uct_cuda_ipc_ns_staged_dispatch(copies, ring);
    }
    return count;
}


/* A new ring of @a session, on @a device (in its primary context: the ring
 * outlives any context of the application's), with its stream */
static ucs_status_t
uct_cuda_ipc_ns_staged_ring_open(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                  uct_cuda_ipc_ns_copy_op_session_t *session,
                                  int device,
                                  const uct_cuda_ipc_ns_staging_ops_t *ops,
                                  uct_cuda_ipc_ns_copy_op_ring_t **ring_p)
{
    /* the ring's copies are within one device: a stream of their own */
    static const uint8_t ring_uuid[UCT_CUDA_IPC_NS_UUID_SIZE] = {};
    uct_cuda_ipc_ns_copy_op_ring_t *ring;
    ucs_status_t status;
    unsigned i;
    int pushed;

    ring = ucs_calloc(1, sizeof(*ring) +
                      (copies->staging_slots * sizeof(ring->slots[0])),
                      "cuda_ipc_ns_staging_ring");
    if (ring == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a staging ring of %u slots",
                  copies->staging_slots);
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_ipc_ns_staging_alloc(ops, device,
                                           copies->staging_slots,
                                           copies->staging_slot_size,
                                           &ring->staging);
    if (status != UCS_OK) {
        goto err_free_ring;
    }

    status = uct_cuda_ipc_ns_ctx_push(ring->staging.ctx, device, &pushed);
    if (status != UCS_OK) {
        goto err_free_staging;
    }
    status = uct_cuda_ipc_ns_cq_stream(copies->cq, ring->staging.ctx,
                                       ring_uuid, &ring->stream);
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status != UCS_OK) {
        goto err_free_staging;
    }

    for (i = 0; i < ring->staging.num_slots; ++i) {
        ring->slots[i].ring  = ring;
        ring->slots[i].index = i;
        ring->slots[i].state = UCT_CUDA_IPC_NS_SLOT_FREE;
    }
    ring->session     = session;
    ring->free_slots  = ring->staging.num_slots;
    ring->retry_slots = 0;
    ucs_list_head_init(&ring->waiting);
    uct_cuda_ipc_ns_op_list_init(&ring->ops, NULL);
    ucs_list_add_tail(&session->rings, &ring->list);
    /* its memory was logged by uct_cuda_ipc_ns_staging_alloc() */
    ucs_debug("cuda_ipc_ns: staging ring at 0x%llx opened for pid %u's session",
              (unsigned long long)ring->staging.base, session->pid);
    *ring_p = ring;
    return UCS_OK;

err_free_staging:
    uct_cuda_ipc_ns_staging_free(&ring->staging);
err_free_ring:
    ucs_free(ring);
    return status;
}


/* @a ring goes: its chunks end with @a status (our copies still running
 * are waited for: the memory is freed after), its waiting ops complete
 * with it. Returns the ops completed. */
static unsigned
uct_cuda_ipc_ns_staged_ring_close(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                   uct_cuda_ipc_ns_copy_op_ring_t *ring,
                                   ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_t *op, *tmp;
    unsigned count = 0, i;
    int copying    = 0, pushed;

    for (i = 0; i < ring->staging.num_slots; ++i) {
        copying |= (ring->slots[i].state == UCT_CUDA_IPC_NS_SLOT_COPY);
    }
    if (copying &&
        (uct_cuda_ipc_ns_ctx_push(ring->staging.ctx, ring->staging.device,
                                  &pushed) == UCS_OK)) {
        (void)UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, ring->stream->stream);
        uct_cuda_ipc_ns_ctx_pop(pushed);
    }
    /* their completion queue ops complete unseen */
    uct_cuda_ipc_ns_op_list_cleanup(&ring->ops);

    for (i = 0; i < ring->staging.num_slots; ++i) {
        if (ring->slots[i].state != UCT_CUDA_IPC_NS_SLOT_FREE) {
            count += uct_cuda_ipc_ns_staged_release(copies, &ring->slots[i],
                                                    status);
        }
    }

    ucs_list_for_each_safe(op, tmp, &ring->waiting, queue) {
        if (op->status == UCS_OK) {
            op->status = status;
        }
        count += uct_cuda_ipc_ns_staged_op_check(copies, op);
    }

    ucs_list_del(&ring->list);
    uct_cuda_ipc_ns_staging_free(&ring->staging);
    ucs_free(ring);
    return count;
}


unsigned uct_cuda_ipc_ns_staged_close(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                       uct_cuda_ipc_ns_copy_op_session_t *session,
                                       ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring, *tmp;
    unsigned count = 0;

    ucs_list_for_each_safe(ring, tmp, &session->rings, list) {
        count += uct_cuda_ipc_ns_staged_ring_close(copies, ring, status);
    }
    return count;
}


ucs_status_t
uct_cuda_ipc_ns_staged_ring_get(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                 uct_cuda_ipc_ns_copy_op_session_t *session,
                                 const uct_cuda_ipc_ns_staging_ops_t *ops,
                                 int device,
                                 uct_cuda_ipc_ns_copy_op_ring_t **ring_p)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring;

    ucs_list_for_each(ring, &session->rings, list) {
        if ((ring->staging.ops == ops) &&
            ((device < 0) || (ring->staging.device == device))) {
            *ring_p = ring;
            return UCS_OK;
        }
    }

    /* host memory of ours: a ring on device 0 serves it as well as any */
    return uct_cuda_ipc_ns_staged_ring_open(copies, session,
                                             (device >= 0) ? device : 0,
                                             ops, ring_p);
}


/*
 * The chunk size of @a op on @a ring: a slot, or less for an op smaller
 * than the ring, so that its chunks spread over the slots and the owner's
 * copy of one runs while we copy another (docs/owner-copies.md, "Chunks").
 * Put short/bcopy copy their data in at once: slots whole.
 */
static size_t
uct_cuda_ipc_ns_staged_chunk(const uct_cuda_ipc_ns_copy_op_ring_t *ring,
                             const uct_cuda_ipc_ns_copy_op_t *op)
{
    size_t total = 0, chunk;
    unsigned i;

    if (op->copy_in_now) {
        return ring->staging.slot_size;
    }
    for (i = 0; i < op->num_elems; ++i) {
        total += op->elems[i].length;
    }
    /* whole multiples of the smallest chunk */
    chunk = ucs_div_round_up(ucs_div_round_up(total, ring->staging.num_slots),
                             UCT_CUDA_IPC_NS_STAGED_CHUNK_MIN) *
            UCT_CUDA_IPC_NS_STAGED_CHUNK_MIN;
    return ucs_min(ring->staging.slot_size, chunk);
}


ucs_status_t
uct_cuda_ipc_ns_staged_op_start(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                uct_cuda_ipc_ns_op_list_t *ops,
                                uct_cuda_ipc_ns_copy_op_ring_t *ring,
                                uct_cuda_ipc_ns_copy_op_t *op)
{
    ucs_status_t status;

    op->chunk   = uct_cuda_ipc_ns_staged_chunk(ring, op);
    op->posting = 1; /* it completes only after its post returned */
    uct_cuda_ipc_ns_op_list_add(ops, &op->super);
    ++copies->outstanding;
    ucs_list_add_tail(&ring->waiting, &op->queue);
    op->in_queue = 1;
    (void)uct_cuda_ipc_ns_staged_dispatch(copies, ring);
    op->posting = 0;

    if ((op->status == UCS_OK) || (op->unanswered > 0)) {
        return UCS_INPROGRESS;
    }

    status = op->status;
    uct_cuda_ipc_ns_op_list_del(&op->super);
    --copies->outstanding;
    ucs_free(op->bounce);
    uct_cuda_ipc_ns_copy_op_free(op);
    return status;
}
