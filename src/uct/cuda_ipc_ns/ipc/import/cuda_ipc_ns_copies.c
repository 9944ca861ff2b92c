/*
 * cuda_ipc_ns: the importer's copy sessions (see cuda_ipc_ns_copies.h,
 * docs/owner-copies.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_copies.h"
#include "cuda_ipc_ns_copy_client.h"
#include "cuda_ipc_ns_staged.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_compat.h"

#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/compiler_def.h>
#include <limits.h>
#include <sys/epoll.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>


ucs_status_t uct_cuda_ipc_ns_copies_init(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                         unsigned max_requests,
                                         unsigned staging_slots,
                                         size_t staging_slot_size,
                                         uct_cuda_ipc_ns_staging_kind_t staging_kind,
                                         uct_cuda_ipc_ns_cq_t *cq,
                                         uct_cuda_ipc_ns_copy_op_failed_func_t ep_failed)
{
    struct epoll_event event = {.events = EPOLLIN};
    int cq_event_fd          = cq->wakeup->fd;
    ucs_status_t status;

    if (max_requests == 0) {
        ucs_error("cuda_ipc_ns: UCX_CUDA_IPC_NS_OWNER_COPY_MAX_REQUESTS must be "
                  "positive");
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_cuda_ipc_ns_staging_check_config(staging_slots,
                                                  staging_slot_size);
    if (status != UCS_OK) {
        return status;
    }

    copies->wakeup_fd = epoll_create1(EPOLL_CLOEXEC);
    if (copies->wakeup_fd < 0) {
        ucs_error("cuda_ipc_ns: epoll_create1() failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    event.data.fd = cq_event_fd;
    if (epoll_ctl(copies->wakeup_fd, EPOLL_CTL_ADD, cq_event_fd, &event) < 0) {
        ucs_error("cuda_ipc_ns: epoll_ctl(ADD) of the completion eventfd %d "
                  "failed: %m", cq_event_fd);
        close(copies->wakeup_fd);
        return UCS_ERR_IO_ERROR;
    }

    status = uct_cuda_ipc_ns_compat_mpool_init(&copies->op_mp,
                                               sizeof(uct_cuda_ipc_ns_copy_op_t),
                                               UCS_SYS_CACHE_LINE_SIZE, 16,
                                               UINT_MAX, NULL,
                                               "cuda_ipc_ns_copy_ops");
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: failed to create the copy op pool: %s",
                  ucs_status_string(status));
        close(copies->wakeup_fd);
        return status;
    }

    ucs_list_head_init(&copies->sessions);
    copies->outstanding  = 0;
    copies->max_requests = max_requests;
    copies->staging_slots     = staging_slots;
    copies->staging_slot_size = staging_slot_size;
    copies->staging_kind      = staging_kind;
    copies->cq           = cq;
    copies->fdx          = fdx;
    copies->ep_failed    = ep_failed;
    return UCS_OK;
}


/* An answer for @a req came (or none will): returns the ops completed */
static unsigned uct_cuda_ipc_ns_copy_req_done(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                              uct_cuda_ipc_ns_copy_op_session_t *session,
                                              uct_cuda_ipc_ns_copy_op_req_t *req,
                                              ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_t *op        = req->op;
    uct_cuda_ipc_ns_copy_op_slot_t *slot = req->slot;
    uct_cuda_ipc_ns_copy_op_sent_t *sent;

    if ((status == UCS_OK) && req->carried_fd) {
        if (uct_cuda_ipc_ns_copy_op_sent_find(session, &req->buf) == NULL) {
            uct_cuda_ipc_ns_copy_op_sent_add(session, &req->buf);
        }
    } else if (status == UCS_ERR_UNSUPPORTED) {
        /* NO_BUFFER: whatever we thought, the owner does not hold it */
        sent = uct_cuda_ipc_ns_copy_op_sent_find(session, &req->buf);
        if (sent != NULL) {
            *sent = session->sent[--session->num_sent];
        }
    }

    ucs_list_del(&req->list);
    --session->num_reqs;
    --copies->outstanding;
    ucs_free(req);

    if (slot != NULL) {
        return uct_cuda_ipc_ns_staged_answered(copies, slot, status);
    }

    if ((status != UCS_OK) && (op->status == UCS_OK)) {
        op->status = status;
    }
    if (--op->unanswered > 0) {
        return 0;
    }

    uct_cuda_ipc_ns_copy_op_complete(copies, op);
    return 1;
}


/* What @a session (closing) owes completes with @a status, and it goes;
 * returns the ops completed */
static unsigned uct_cuda_ipc_ns_copy_session_free(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                                  uct_cuda_ipc_ns_copy_op_session_t *session,
                                                  ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_req_t *req, *tmp;
    unsigned count = 0;

    ucs_list_for_each_safe(req, tmp, &session->reqs, list) {
        count += uct_cuda_ipc_ns_copy_req_done(copies, session, req, status);
    }
    count += uct_cuda_ipc_ns_staged_close(copies, session, status);

    if (session->send_status != UCS_OK) {
        --copies->outstanding; /* the session to end (copy_send) */
    }
    uct_cuda_ipc_ns_copy_op_wakeup(copies, session, 0);
    close(session->sock);
    ucs_list_del(&session->list);
    ucs_free(session);
    return count;
}


/*
 * The session ended: the owner closed it (died), or broke the protocol. What
 * it owed completes with @a status, the endpoints waiting are reported
 * (first: a completion may destroy its endpoint), and the session is freed:
 * the next copy opens a new one, if the owner is still there.
 */
static unsigned uct_cuda_ipc_ns_copy_session_fail(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                                  uct_cuda_ipc_ns_copy_op_session_t *session,
                                                  ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring;
    uct_cuda_ipc_ns_copy_op_req_t *req;
    uct_cuda_ipc_ns_copy_op_t *op;
    unsigned i;

    session->closing = 1; /* what ends here issues nothing new */
    if (session->num_reqs > 0) {
        ucs_error("cuda_ipc_ns: copy session with pid %u (PID namespace %"
                  PRIu64 ") ended: %s; its %u copies outstanding fail",
                  session->pid, session->pid_ns, ucs_status_string(status),
                  session->num_reqs);
    } else {
        ucs_debug("cuda_ipc_ns: copy session with pid %u (PID namespace %"
                  PRIu64 ") ended: %s", session->pid, session->pid_ns,
                  ucs_status_string(status));
    }

    ucs_list_for_each(req, &session->reqs, list) {
        if (req->op->super.list != NULL) {
            copies->ep_failed(req->op->super.list);
        }
    }
    ucs_list_for_each(ring, &session->rings, list) {
        for (i = 0; i < ring->staging.num_slots; ++i) {
            op = ring->slots[i].op;
            if ((op != NULL) && (op->super.list != NULL)) {
                copies->ep_failed(op->super.list);
            }
        }
        ucs_list_for_each(op, &ring->waiting, queue) {
            if (op->super.list != NULL) {
                copies->ep_failed(op->super.list);
            }
        }
    }

    return uct_cuda_ipc_ns_copy_session_free(copies, session, status);
}


void uct_cuda_ipc_ns_copies_cleanup(uct_cuda_ipc_ns_copy_op_sessions_t *copies)
{
    uct_cuda_ipc_ns_copy_op_session_t *session, *tmp;

    ucs_list_for_each_safe(session, tmp, &copies->sessions, list) {
        session->closing = 1;
        (void)uct_cuda_ipc_ns_copy_session_free(copies, session,
                                                UCS_ERR_CANCELED);
    }
    close(copies->wakeup_fd);
    ucs_mpool_cleanup(&copies->op_mp, 1);
}


/* The session with the owner of @a key, opened (and the owner
 * authenticated) on first use */
static ucs_status_t
uct_cuda_ipc_ns_copy_session_get(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 uct_cuda_ipc_ns_copy_op_session_t **session_p)
{
    uct_cuda_ipc_ns_copy_op_session_t *session;
    ucs_status_t status;
    int sock;

    ucs_list_for_each(session, &copies->sessions, list) {
        if (session->closing || (session->send_status != UCS_OK)) {
            continue; /* ending: a new op opens a new session */
        }
        if ((session->pid == key->pid) && (session->pid_ns == key->pid_ns) &&
            (session->start_time == key->start_time) &&
            (session->addr_len == key->broker_addr_len) &&
            !memcmp(session->addr, key->broker_addr, key->broker_addr_len)) {
            *session_p = session;
            return UCS_OK;
        }
    }

    status = uct_cuda_ipc_ns_copy_client_open(copies->fdx, key, &sock);
    if (status != UCS_OK) {
        ucs_debug("cuda_ipc_ns: no copy session with pid %u (PID namespace %"
                  PRIu64 "): %s", key->pid, key->pid_ns,
                  ucs_status_string(status));
        return status;
    }

    session = ucs_calloc(1, sizeof(*session), "cuda_ipc_ns_copy_session");
    if (session == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a copy session");
        close(sock);
        return UCS_ERR_NO_MEMORY;
    }

    session->pid        = key->pid;
    session->pid_ns     = key->pid_ns;
    session->start_time = key->start_time;
    session->addr_len   = key->broker_addr_len;
    memcpy(session->addr, key->broker_addr, key->broker_addr_len);
    session->sock       = sock;
    session->in_wakeup  = 0;
    session->copies     = copies;
    ucs_list_head_init(&session->reqs);
    ucs_list_head_init(&session->rings);
    ucs_list_add_tail(&copies->sessions, &session->list);
    ucs_debug("cuda_ipc_ns: copy session %d with pid %u (PID namespace %"
              PRIu64 ")", sock, key->pid, key->pid_ns);
    *session_p = session;
    return UCS_OK;
}


/*
 * The allocation of the local element [@a ptr, + @a length): the owner maps
 * it from its POSIX fd when it is VMM memory created with that handle type
 * (UCS_OK). Anything else goes through the staging ring: UCS_ERR_UNSUPPORTED
 * (quietly), with *device_p its device, or -1 for host memory.
 */
static ucs_status_t uct_cuda_ipc_ns_copy_local(const void *ptr, size_t length,
                                               uct_cuda_ipc_ns_copy_op_local_t *local,
                                               int *device_p)
{
    uct_cuda_ipc_ns_ptr_attr_t attr;
    CUdeviceptr base;
    size_t size;

    if (uct_cuda_ipc_ns_ptr_attr_get(ptr, &attr) != UCS_OK) {
        ucs_trace_data("cuda_ipc_ns: local buffer %p is not device memory: "
                       "staged", ptr);
        *device_p = -1;
        return UCS_ERR_UNSUPPORTED;
    }

    base = attr.base;
    size = attr.size;
    if (!(attr.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        /* cuMemAlloc memory, or VMM without the POSIX-fd handle type */
        ucs_trace_data("cuda_ipc_ns: local buffer %p (allocation 0x%llx, %zu "
                       "bytes, device %d) is not exportable as a POSIX fd: "
                       "staged", ptr, (unsigned long long)base, size,
                       attr.device);
        *device_p = attr.device;
        return UCS_ERR_UNSUPPORTED;
    }

    if (((uintptr_t)ptr < base) ||
        ((uintptr_t)ptr - base > size) || (length > base + size - (uintptr_t)ptr)) {
        ucs_error("cuda_ipc_ns: local buffer %p..%p runs past its allocation "
                  "0x%llx..0x%llx", ptr, UCS_PTR_BYTE_OFFSET(ptr, length),
                  (unsigned long long)base, (unsigned long long)(base + size));
        return UCS_ERR_INVALID_PARAM;
    }

    local->base   = base;
    local->size   = size;
    local->buf_id  = attr.alloc_id;
    local->ops     = &uct_cuda_ipc_ns_staging_vmm_ops;
    local->staging = NULL;
    *device_p     = attr.device;
    return UCS_OK;
}


/* The staging ring, in memory of @a ops, for a local buffer on @a device
 * (-1: host memory) in the session with the owner of @a key; the session
 * and the ring are opened on first use */
static ucs_status_t
uct_cuda_ipc_ns_copy_ring_get(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                              const uct_cuda_ipc_ns_rkey_info_t *key,
                              const uct_cuda_ipc_ns_staging_ops_t *ops,
                              int device,
                              uct_cuda_ipc_ns_copy_op_ring_t **ring_p)
{
    uct_cuda_ipc_ns_copy_op_session_t *session;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_copy_session_get(copies, key, &session);
    if (status != UCS_OK) {
        return status;
    }
    return uct_cuda_ipc_ns_staged_ring_get(copies, session, ops, device,
                                            ring_p);
}


ucs_status_t uct_cuda_ipc_ns_copies_put_now(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                            uct_cuda_ipc_ns_op_list_t *ops,
                                            const uct_cuda_ipc_ns_rkey_info_t *key,
                                            int owner_gpu_usable,
                                            const void *buffer, size_t length,
                                            uint64_t remote_addr)
{
    uct_cuda_ipc_ns_ptr_attr_t attr;
    uct_cuda_ipc_ns_copy_op_ring_t *ring;
    uct_cuda_ipc_ns_copy_op_t *op;
    ucs_status_t status;
    size_t num_chunks;

    status = uct_cuda_ipc_ns_copy_ring_get(
            copies, key,
            uct_cuda_ipc_ns_staged_ring_ops(copies, owner_gpu_usable),
            (uct_cuda_ipc_ns_ptr_attr_get(buffer, &attr) == UCS_OK) ?
            attr.device : -1, &ring);
    if (status != UCS_OK) {
        return status;
    }

    num_chunks = ucs_div_round_up(length, ring->staging.slot_size);
    if (num_chunks > ring->staging.num_slots) {
        ucs_error("cuda_ipc_ns: a put of %zu bytes by the owner needs %zu "
                  "staging slots at once, the ring has %u", length,
                  num_chunks, ring->staging.num_slots);
        return UCS_ERR_UNSUPPORTED;
    }

    /* all of it into slots now, after the ops waiting for them */
    if (!ucs_list_is_empty(&ring->waiting) ||
        (ring->free_slots < num_chunks)) {
        return UCS_ERR_NO_RESOURCE;
    }

    op = uct_cuda_ipc_ns_copy_op_new(copies, key, remote_addr - key->base,
                                     1, NULL);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    op->copy_in_now      = 1;
    op->elems[0].ptr     = (char*)buffer;
    op->elems[0].length  = length;
    op->num_elems        = 1;
    status = uct_cuda_ipc_ns_staged_op_start(copies, ops, ring, op);
    /* the owner's copies complete later: flush waits for them */
    return (status == UCS_INPROGRESS) ? UCS_OK : status;
}


ucs_status_t uct_cuda_ipc_ns_copies_get_unpack(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                               uct_cuda_ipc_ns_op_list_t *ops,
                                               const uct_cuda_ipc_ns_rkey_info_t *key,
                                               int owner_gpu_usable,
                                               size_t length,
                                               uint64_t remote_addr,
                                               uct_unpack_callback_t unpack_cb,
                                               void *arg, uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_op_ring_t *ring;
    uct_cuda_ipc_ns_copy_op_t *op;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_copy_ring_get(
            copies, key,
            uct_cuda_ipc_ns_staged_ring_ops(copies, owner_gpu_usable), -1,
            &ring);
    if (status != UCS_OK) {
        return status;
    }

    op = uct_cuda_ipc_ns_copy_op_new(copies, key, remote_addr - key->base,
                                     0, comp);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    op->bounce = ucs_malloc(length, "cuda_ipc_ns_get_bcopy");
    if (op->bounce == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate %zu bytes for a get bcopy",
                  length);
        uct_cuda_ipc_ns_copy_op_free(op);
        return UCS_ERR_NO_MEMORY;
    }
    op->unpack_cb       = unpack_cb;
    op->unpack_arg      = arg;
    op->elems[0].ptr    = op->bounce;
    op->elems[0].length = length;
    op->num_elems       = 1;
    return uct_cuda_ipc_ns_staged_op_start(copies, ops, ring, op);
}


/*
 * Every local element of @a op as the owner would map it, into @a locals,
 * checked before anything is sent: *staged_p set when the owner cannot
 * map one (it goes through the staging ring), *device_p their one device
 * (-1: host memory only)
 */
static ucs_status_t
uct_cuda_ipc_ns_copies_locals(const uct_cuda_ipc_ns_copy_op_t *op,
                              uct_cuda_ipc_ns_copy_op_local_t *locals,
                              int *staged_p, int *device_p)
{
    int device = -1, elem_device;
    ucs_status_t status;
    unsigned elem;

    for (elem = 0; elem < op->num_elems; ++elem) {
        status = uct_cuda_ipc_ns_copy_local(op->elems[elem].ptr,
                                            op->elems[elem].length,
                                            &locals[elem], &elem_device);
        if (status == UCS_ERR_UNSUPPORTED) {
            *staged_p = 1; /* the owner cannot map it */
        } else if (status != UCS_OK) {
            return status;
        }
        if (elem_device < 0) {
            continue;
        } else if ((device >= 0) && (elem_device != device)) {
            ucs_error("cuda_ipc_ns: a copy by the owner takes local elements "
                      "of one device (%d and %d here)", device, elem_device);
            return UCS_ERR_UNSUPPORTED;
        }
        device = elem_device;
    }

    *device_p = device;
    return UCS_OK;
}


/*
 * One request per local element of @a op to @a session: UCS_INPROGRESS
 * once some went (the op completes with the error of the rest once they
 * are answered), else the error, and the op is the caller's to free
 */
static ucs_status_t
uct_cuda_ipc_ns_copies_send_all(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                uct_cuda_ipc_ns_copy_op_session_t *session,
                                uct_cuda_ipc_ns_op_list_t *ops,
                                uct_cuda_ipc_ns_copy_op_t *op,
                                const uct_cuda_ipc_ns_copy_op_local_t *locals)
{
    uint64_t offset     = op->offset;
    ucs_status_t status = UCS_OK;
    unsigned elem;

    for (elem = 0; elem < op->num_elems; ++elem) {
        status = uct_cuda_ipc_ns_copy_op_send(copies, session, &locals[elem],
                                              op->elems[elem].ptr,
                                              op->elems[elem].length, offset,
                                              op, NULL);
        if (status != UCS_OK) {
            break;
        }
        offset += op->elems[elem].length;
    }

    if (op->unanswered == 0) {
        /* nothing went; a full socket: later */
        return (status == UCS_ERR_TIMED_OUT) ? UCS_ERR_NO_RESOURCE : status;
    }

    /* some went: the op completes with the error once they are answered */
    op->status = status;
    uct_cuda_ipc_ns_op_list_add(ops, &op->super);
    uct_cuda_ipc_ns_copy_op_wakeup(copies, session, 1);
    return UCS_INPROGRESS;
}


ucs_status_t uct_cuda_ipc_ns_copies_post(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         uct_cuda_ipc_ns_op_list_t *ops,
                                         const uct_cuda_ipc_ns_rkey_info_t *key,
                                         int owner_gpu_usable,
                                         const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, int is_put,
                                         uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_op_local_t locals[UCT_CUDA_IPC_NS_COPY_ELEMS_MAX];
    uct_cuda_ipc_ns_copy_op_session_t *session;
    uct_cuda_ipc_ns_copy_op_ring_t *ring;
    uct_cuda_ipc_ns_copy_op_t *op;
    const uct_cuda_ipc_ns_staging_ops_t *ring_ops;
    ucs_status_t status;
    int device, staged;

    op = uct_cuda_ipc_ns_copy_op_new(copies, key, remote_addr - key->base,
                                     is_put, comp);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_ipc_ns_copy_op_set_iov(op, iov, iovcnt);
    if (status != UCS_OK) {
        goto err_free_op;
    }

    /* through pinned host memory, the owner maps none of ours */
    ring_ops = uct_cuda_ipc_ns_staged_ring_ops(copies, owner_gpu_usable);
    staged   = !ring_ops->owner_maps_buffers;

    status = uct_cuda_ipc_ns_copies_locals(op, locals, &staged, &device);
    if (status != UCS_OK) {
        goto err_free_op;
    }

    if (staged) {
        status = uct_cuda_ipc_ns_copy_ring_get(copies, key, ring_ops, device,
                                               &ring);
        if (status != UCS_OK) {
            goto err_free_op;
        }
        return uct_cuda_ipc_ns_staged_op_start(copies, ops, ring, op);
    }

    status = uct_cuda_ipc_ns_copy_session_get(copies, key, &session);
    if (status != UCS_OK) {
        goto err_free_op;
    }

    /* the owner serves a few at a time; the rest would wait in its socket */
    if ((session->num_reqs > 0) &&
        (session->num_reqs + op->num_elems > copies->max_requests)) {
        status = UCS_ERR_NO_RESOURCE;
        goto err_free_op;
    }

    status = uct_cuda_ipc_ns_copies_send_all(copies, session, ops, op,
                                             locals);
    if (status == UCS_INPROGRESS) {
        return status;
    }

err_free_op:
    uct_cuda_ipc_ns_copy_op_free(op);
    return status;
}


unsigned uct_cuda_ipc_ns_copies_progress(uct_cuda_ipc_ns_copy_op_sessions_t *copies)
{
    uct_cuda_ipc_ns_copy_op_session_t *session, *tmp;
    uct_cuda_ipc_ns_copy_op_req_t *req, *found;
    ucs_status_t status, op_status;
    uint64_t reg_id, seq;
    unsigned count = 0;

    ucs_list_for_each_safe(session, tmp, &copies->sessions, list) {
        while (session->num_reqs > 0) {
            status = uct_cuda_ipc_ns_copy_client_recv_any(session->sock,
                                                          MSG_DONTWAIT,
                                                          &reg_id, &seq,
                                                          &op_status);
            if (status == UCS_ERR_TIMED_OUT) {
                break; /* nothing more now */
            } else if (status != UCS_OK) {
                count += uct_cuda_ipc_ns_copy_session_fail(copies, session,
                                                           status);
                session = NULL;
                break;
            }

            if (seq == 0) {
                /* refused before any request was read (uid); an owner that
                 * says "done" to no request lies, and what it owes fails */
                if (op_status == UCS_OK) {
                    ucs_error("cuda_ipc_ns: pid %u answered \"done\" to no "
                              "copy request (seq 0)", session->pid);
                    op_status = UCS_ERR_IO_ERROR;
                }
                count += uct_cuda_ipc_ns_copy_session_fail(copies, session,
                                                           op_status);
                session = NULL;
                break;
            }

            found = NULL;
            ucs_list_for_each(req, &session->reqs, list) {
                if (req->seq == seq) {
                    found = req;
                    break;
                }
            }
            if ((found == NULL) || (found->reg_id != reg_id)) {
                ucs_error("cuda_ipc_ns: pid %u answered copy %" PRIu64 " of "
                          "registration 0x%" PRIx64 ", which it does not owe",
                          session->pid, seq, reg_id);
                count += uct_cuda_ipc_ns_copy_session_fail(copies, session,
                                                           UCS_ERR_IO_ERROR);
                session = NULL;
                break;
            }

            count += uct_cuda_ipc_ns_copy_req_done(copies, session, found,
                                                   op_status);
        }

        if (session == NULL) {
            continue;
        }
        count += uct_cuda_ipc_ns_staged_retry(copies, session);
        if (session->send_status != UCS_OK) {
            /* a send found the socket broken: in a post, or just now */
            count += uct_cuda_ipc_ns_copy_session_fail(copies, session,
                                                       session->send_status);
            continue;
        }
        if (session->num_reqs == 0) {
            uct_cuda_ipc_ns_copy_op_wakeup(copies, session, 0);
        }
    }

    return count;
}


int uct_cuda_ipc_ns_copies_ready(uct_cuda_ipc_ns_copy_op_sessions_t *copies)
{
    uct_cuda_ipc_ns_copy_op_session_t *session;
    struct epoll_event event;

    ucs_list_for_each(session, &copies->sessions, list) {
        if (session->send_status != UCS_OK) {
            return 1; /* progress ends it */
        }
    }
    return epoll_wait(copies->wakeup_fd, &event, 1, 0) > 0;
}
