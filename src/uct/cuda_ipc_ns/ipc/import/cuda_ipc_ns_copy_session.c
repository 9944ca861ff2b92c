/*
 * cuda_ipc_ns: the importer's copy sessions (see cuda_ipc_ns_copy_session.h,
 * docs/owner-copies.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_copy_session.h"
#include "cuda_ipc_ns_copy_client.h"
#include "cuda_ipc_ns_broker_copy.h"
#include "cuda_ipc_ns_copy_staging.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_iov.inl>
#include <ucs/datastruct/queue.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>


/*
 * Buffers we count on the owner holding for a session. The owner keeps the
 * UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX most recently named ones (in request
 * order, as we name them), so the fewer most recent ones we remember are
 * always among them: a request without the fd never finds its buffer gone.
 */
#define UCT_CUDA_IPC_NS_COPY_SENT_MAX  8

_Static_assert(UCT_CUDA_IPC_NS_COPY_SENT_MAX < UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX,
               "the owner must keep the buffers we count on");

/* Local elements (iov entries times their count) of one put or get */
#define UCT_CUDA_IPC_NS_COPY_ELEMS_MAX 16


/* A local element of a staged op */
typedef struct uct_cuda_ipc_ns_copy_elem {
    char   *ptr;
    size_t length;
} uct_cuda_ipc_ns_copy_elem_t;


/*
 * One put or get: one request per local element, or (staged) one chunk of
 * at most a slot at a time through the session's staging ring. A staged op
 * remembers where its next chunk starts, and waits in its session's queue
 * while it has chunks to issue and no slot is free.
 */
typedef struct uct_cuda_ipc_ns_copy_op {
    ucs_list_link_t           ep_elem;    /* in its endpoint's ops */
    uct_cuda_ipc_ns_copy_ep_t *ep;        /* NULL once the ep is gone */
    uct_completion_t          *comp;      /* user's, may be NULL */
    uint64_t                  seq;        /* endpoint post order */
    /* requests owed an answer; staged: slots it holds */
    unsigned                  unanswered;
    ucs_status_t              status;     /* first error */
    /* staged ops only */
    int                       staged;
    int                       is_put;
    int                       posting;    /* its post has not returned */
    int                       in_queue;   /* in its session's waiting ops */
    ucs_list_link_t           queue;
    uint64_t                  reg_id;     /* the key's, kept for later */
    uint8_t                   token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    uint8_t                   dev_uuid[UCT_CUDA_IPC_NS_UUID_SIZE];
    uint64_t                  offset;     /* of the next chunk, remote */
    /* put short/bcopy: the caller's buffer is copied into each slot before
     * the post returns */
    int                       copy_in_now;
    /* get bcopy: the data lands in @a bounce (ours), handed to unpack_cb
     * before the completion */
    void                      *bounce;
    uct_unpack_callback_t     unpack_cb;
    void                      *unpack_arg;
    unsigned                  num_elems;
    unsigned                  elem;       /* of the next chunk */
    size_t                    elem_off;   /* in it */
    uct_cuda_ipc_ns_copy_elem_t elems[UCT_CUDA_IPC_NS_COPY_ELEMS_MAX];
} uct_cuda_ipc_ns_copy_op_t;


/* What a staging slot is doing */
typedef enum {
    UCT_CUDA_IPC_NS_SLOT_FREE,
    /* our copy runs: buffer -> slot for a put (first), slot -> buffer for a
     * get (after the owner's) */
    UCT_CUDA_IPC_NS_SLOT_COPY,
    UCT_CUDA_IPC_NS_SLOT_REQUEST,    /* the owner's copy: answer owed */
    UCT_CUDA_IPC_NS_SLOT_RETRY_COPY, /* our copy waits for a cq op */
    UCT_CUDA_IPC_NS_SLOT_RETRY_SEND  /* the request waits for socket room */
} uct_cuda_ipc_ns_slot_state_t;


struct uct_cuda_ipc_ns_copy_session;

/* One slot of the staging ring, and the chunk it carries */
typedef struct uct_cuda_ipc_ns_copy_slot {
    uct_completion_t                    comp;    /* of our copy */
    struct uct_cuda_ipc_ns_copy_session *session;
    uct_cuda_ipc_ns_copy_op_t           *op;     /* NULL: free */
    unsigned                            index;
    uct_cuda_ipc_ns_slot_state_t        state;
    char                                *local;  /* the chunk */
    size_t                              length;
    uint64_t                            offset;  /* in the registration */
} uct_cuda_ipc_ns_copy_slot_t;




/* An endpoint flush with a completion, waiting for the ops up to seq */
typedef struct uct_cuda_ipc_ns_copy_flush {
    ucs_queue_elem_t queue;
    uct_completion_t *comp;
    uint64_t         seq;
} uct_cuda_ipc_ns_copy_flush_t;


/* A local buffer the owner holds (mapped for the key's device) */
typedef struct uct_cuda_ipc_ns_copy_sent {
    uint64_t buf_id;
    uint64_t buf_size;
    uint8_t  dev_uuid[UCT_CUDA_IPC_NS_UUID_SIZE];
    uint64_t last_use;
} uct_cuda_ipc_ns_copy_sent_t;


/* One COPY request owed an answer */
typedef struct uct_cuda_ipc_ns_copy_req {
    ucs_list_link_t             list;    /* in its session's reqs */
    uint64_t                    seq;     /* on the wire, the session's */
    uint64_t                    reg_id;  /* the answer must name it */
    uct_cuda_ipc_ns_copy_op_t   *op;
    uct_cuda_ipc_ns_copy_slot_t *slot;   /* a staged chunk's, or NULL */
    /* the buffer it names, and whether its fd went with it: the owner
     * holds the buffer once such a request was answered OK (a refusal
     * before the buffer, a wrong token say, leaves it unmapped) */
    uct_cuda_ipc_ns_copy_sent_t buf;
    int                         carried_fd;
} uct_cuda_ipc_ns_copy_req_t;


/* A connection to one owner's broker */
typedef struct uct_cuda_ipc_ns_copy_session {
    ucs_list_link_t             list;      /* in the iface's sessions */
    uint32_t                    pid;       /* the owner */
    uint64_t                    pid_ns;
    uint64_t                    start_time;
    uint8_t                     addr_len;  /* its broker */
    char                        addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    int                         sock;
    int                         in_wakeup; /* sock in the wakeup set */
    ucs_list_link_t             reqs;      /* owed answers */
    unsigned                    num_reqs;
    uint64_t                    next_seq;
    uint64_t                    clock;     /* of the sent buffers' use */
    unsigned                    num_sent;
    uct_cuda_ipc_ns_copy_sent_t sent[UCT_CUDA_IPC_NS_COPY_SENT_MAX];
    uct_cuda_ipc_ns_copies_t    *copies;
    int                         closing;   /* no new staged chunk */
    /* the staging ring, allocated by the first op that needs it */
    uct_cuda_ipc_ns_staging_t   staging;
    uct_cuda_ipc_ns_copy_slot_t *slots;    /* NULL: no ring yet */
    unsigned                    free_slots;
    unsigned                    retry_slots; /* RETRY_COPY or _SEND */
    ucs_list_link_t             waiting;   /* staged ops, FIFO */
    uct_cuda_ipc_ns_cq_ep_t     cq_ep;     /* our copies of the ring */
    uct_cuda_ipc_ns_stream_t    *stream;   /* created with the ring */
} uct_cuda_ipc_ns_copy_session_t;


/* A local element: its allocation as the owner maps it */
typedef struct uct_cuda_ipc_ns_copy_local {
    uint64_t base;
    uint64_t size;
    uint64_t buf_id;
} uct_cuda_ipc_ns_copy_local_t;


ucs_status_t uct_cuda_ipc_ns_copies_init(uct_cuda_ipc_ns_copies_t *copies,
                                         const uct_cuda_ipc_ns_fdx_config_t *fdx,
                                         unsigned max_requests,
                                         unsigned staging_slots,
                                         size_t staging_slot_size,
                                         uct_cuda_ipc_ns_cq_t *cq,
                                         uct_cuda_ipc_ns_copy_ep_failed_func_t ep_failed)
{
    struct epoll_event event = {.events = EPOLLIN};
    int cq_event_fd          = cq->event_fd;
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

    ucs_list_head_init(&copies->sessions);
    copies->outstanding  = 0;
    copies->max_requests = max_requests;
    copies->staging_slots     = staging_slots;
    copies->staging_slot_size = staging_slot_size;
    copies->cq           = cq;
    copies->fdx          = fdx;
    copies->ep_failed    = ep_failed;
    return UCS_OK;
}


void uct_cuda_ipc_ns_copy_ep_init(uct_cuda_ipc_ns_copy_ep_t *copy_ep, void *ep)
{
    ucs_list_head_init(&copy_ep->ops);
    ucs_queue_head_init(&copy_ep->flush_q);
    copy_ep->seq   = 0;
    copy_ep->owner = ep;
}


void uct_cuda_ipc_ns_copy_ep_cleanup(uct_cuda_ipc_ns_copy_ep_t *copy_ep)
{
    uct_cuda_ipc_ns_copy_op_t *op, *tmp;
    uct_cuda_ipc_ns_copy_flush_t *flush;

    /* the owner answers them later: the answers are dropped */
    ucs_list_for_each_safe(op, tmp, &copy_ep->ops, ep_elem) {
        ucs_list_del(&op->ep_elem);
        op->ep   = NULL;
        op->comp = NULL;
    }

    while (!ucs_queue_is_empty(&copy_ep->flush_q)) {
        flush = ucs_queue_pull_elem_non_empty(&copy_ep->flush_q,
                                              uct_cuda_ipc_ns_copy_flush_t,
                                              queue);
        ucs_free(flush);
    }
}


/* Add or remove the session's socket from the wakeup set: it is there while
 * answers are owed, so that an idle session (or one whose owner closed it)
 * never makes a waiter spin */
static void uct_cuda_ipc_ns_copy_session_wakeup(uct_cuda_ipc_ns_copies_t *copies,
                                                uct_cuda_ipc_ns_copy_session_t *session,
                                                int in_wakeup)
{
    struct epoll_event event = {.events = EPOLLIN};

    if (session->in_wakeup == in_wakeup) {
        return;
    }

    event.data.fd = session->sock;
    if (epoll_ctl(copies->wakeup_fd,
                  in_wakeup ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, session->sock,
                  &event) < 0) {
        /* a waiter may then sleep through an answer: said loudly */
        ucs_error("cuda_ipc_ns: epoll_ctl(%s) of copy session socket %d "
                  "failed: %m", in_wakeup ? "ADD" : "DEL", session->sock);
        return;
    }
    session->in_wakeup = in_wakeup;
}


/* Complete @a op: its completion, then the flushes that waited for it */
static void uct_cuda_ipc_ns_copy_op_complete(uct_cuda_ipc_ns_copy_op_t *op)
{
    uct_cuda_ipc_ns_copy_ep_t *copy_ep = op->ep;
    uct_cuda_ipc_ns_copy_flush_t *flush;
    uct_cuda_ipc_ns_copy_op_t *first;

    if (copy_ep != NULL) {
        ucs_list_del(&op->ep_elem);
    }
    if (op->comp != NULL) {
        uct_invoke_completion(op->comp, op->status);
    }
    ucs_free(op);

    if (copy_ep == NULL) {
        return;
    }

    while (!ucs_queue_is_empty(&copy_ep->flush_q)) {
        flush = ucs_queue_head_elem_non_empty(&copy_ep->flush_q,
                                              uct_cuda_ipc_ns_copy_flush_t,
                                              queue);
        if (!ucs_list_is_empty(&copy_ep->ops)) {
            first = ucs_list_head(&copy_ep->ops, uct_cuda_ipc_ns_copy_op_t,
                                  ep_elem);
            if (first->seq <= flush->seq) {
                break; /* ops complete in any order: the oldest decides */
            }
        }
        ucs_queue_pull_non_empty(&copy_ep->flush_q);
        uct_invoke_completion(flush->comp, UCS_OK);
        ucs_free(flush);
    }
}


static uct_cuda_ipc_ns_copy_sent_t *
uct_cuda_ipc_ns_copy_sent_find(uct_cuda_ipc_ns_copy_session_t *session,
                               const uct_cuda_ipc_ns_copy_sent_t *buf);

static void uct_cuda_ipc_ns_copy_sent_add(uct_cuda_ipc_ns_copy_session_t *session,
                                          const uct_cuda_ipc_ns_copy_sent_t *buf);


static unsigned uct_cuda_ipc_ns_staged_answered(uct_cuda_ipc_ns_copies_t *copies,
                                                uct_cuda_ipc_ns_copy_session_t *session,
                                                uct_cuda_ipc_ns_copy_slot_t *slot,
                                                ucs_status_t status);


/* An answer for @a req came (or none will): returns the ops completed */
static unsigned uct_cuda_ipc_ns_copy_req_done(uct_cuda_ipc_ns_copies_t *copies,
                                              uct_cuda_ipc_ns_copy_session_t *session,
                                              uct_cuda_ipc_ns_copy_req_t *req,
                                              ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_t *op     = req->op;
    uct_cuda_ipc_ns_copy_slot_t *slot = req->slot;
    uct_cuda_ipc_ns_copy_sent_t *sent;

    if ((status == UCS_OK) && req->carried_fd) {
        if (uct_cuda_ipc_ns_copy_sent_find(session, &req->buf) == NULL) {
            uct_cuda_ipc_ns_copy_sent_add(session, &req->buf);
        }
    } else if (status == UCS_ERR_UNSUPPORTED) {
        /* NO_BUFFER: whatever we thought, the owner does not hold it */
        sent = uct_cuda_ipc_ns_copy_sent_find(session, &req->buf);
        if (sent != NULL) {
            *sent = session->sent[--session->num_sent];
        }
    }

    ucs_list_del(&req->list);
    --session->num_reqs;
    --copies->outstanding;
    ucs_free(req);

    if (slot != NULL) {
        return uct_cuda_ipc_ns_staged_answered(copies, session, slot, status);
    }

    if ((status != UCS_OK) && (op->status == UCS_OK)) {
        op->status = status;
    }
    if (--op->unanswered > 0) {
        return 0;
    }

    uct_cuda_ipc_ns_copy_op_complete(op);
    return 1;
}


/* Send the request of one element or staged chunk; owed an answer on
 * success (defined below) */
static ucs_status_t
uct_cuda_ipc_ns_copy_send(uct_cuda_ipc_ns_copies_t *copies,
                          uct_cuda_ipc_ns_copy_session_t *session,
                          uint64_t reg_id, const uint8_t *token,
                          const uint8_t *dev_uuid,
                          const uct_cuda_ipc_ns_copy_local_t *local,
                          const void *ptr, size_t length, uint64_t offset,
                          int is_put, uct_cuda_ipc_ns_copy_op_t *op,
                          uct_cuda_ipc_ns_copy_slot_t *slot);


/*
 * Staged ops (docs/owner-copies.md, "The staging ring"). A chunk holds a
 * slot from the moment it is issued until its last copy ended: a get asks
 * the owner for remote -> slot, then copies slot -> buffer on the ring's
 * stream; a put copies buffer -> slot, then asks the owner for slot ->
 * remote. Our copies are ops of the completion queue (its events, its
 * eventfd for waiters) whose completion is the slot's; the owner's answers
 * come through the session's socket. Each time a slot frees up, the oldest
 * waiting op issues its next chunk, so that with several slots the owner's
 * copy of one chunk runs while we copy another.
 */

/* A staged op whose chunks all ended, or that failed and has none running
 * any more, completes: returns 1 then */
static unsigned uct_cuda_ipc_ns_staged_op_check(uct_cuda_ipc_ns_copies_t *copies,
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
        if ((op->status == UCS_OK) && (op->ep != NULL)) {
            op->unpack_cb(op->unpack_arg, op->bounce, op->elems[0].length);
        }
        ucs_free(op->bounce);
    }
    --copies->outstanding;
    uct_cuda_ipc_ns_copy_op_complete(op);
    return 1;
}


/* @a slot's chunk ended with @a status: the slot is free again */
static unsigned uct_cuda_ipc_ns_staged_release(uct_cuda_ipc_ns_copies_t *copies,
                                               uct_cuda_ipc_ns_copy_session_t *session,
                                               uct_cuda_ipc_ns_copy_slot_t *slot,
                                               ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_t *op = slot->op;

    if ((slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_COPY) ||
        (slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_SEND)) {
        --session->retry_slots;
    }
    slot->op    = NULL;
    slot->state = UCT_CUDA_IPC_NS_SLOT_FREE;
    ++session->free_slots;

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
uct_cuda_ipc_ns_staged_copy(uct_cuda_ipc_ns_copies_t *copies,
                            uct_cuda_ipc_ns_copy_session_t *session,
                            uct_cuda_ipc_ns_copy_slot_t *slot)
{
    CUdeviceptr ring = uct_cuda_ipc_ns_staging_slot(&session->staging,
                                                    slot->index);
    CUdeviceptr local = (CUdeviceptr)slot->local;
    int is_put        = slot->op->is_put;
    uct_cuda_ipc_ns_op_t *cq_op;
    ucs_status_t status;
    int pushed;

    cq_op = uct_cuda_ipc_ns_cq_op_get(copies->cq);
    if (cq_op == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    status = uct_cuda_ipc_ns_ctx_push(session->staging.ctx,
                                      session->staging.device, &pushed);
    if (status != UCS_OK) {
        goto out_put_op;
    }

    /* any local memory: device (legacy, VMM of another kind) or host */
    status = UCT_CUDA_IPC_NS_CU(cuMemcpyAsync, is_put ? ring : local,
                                is_put ? local : ring, slot->length,
                                session->stream->stream);
    if (status == UCS_OK) {
        slot->comp.func   = uct_cuda_ipc_ns_staged_copied;
        slot->comp.count  = 1;
        slot->comp.status = UCS_OK;
        status = uct_cuda_ipc_ns_cq_post(copies->cq, &session->cq_ep, cq_op,
                                         session->stream, NULL, &slot->comp);
    }
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status == UCS_OK) {
        return UCS_OK;
    }

    ucs_error("cuda_ipc_ns: staging copy of %zu bytes %s slot %u of the ring "
              "of pid %u's session (local %p) failed: %s", slot->length,
              is_put ? "to" : "from", slot->index, session->pid, slot->local,
              ucs_status_string(status));
out_put_op:
    uct_cuda_ipc_ns_cq_op_put(copies->cq, cq_op);
    return status;
}


/* Put short/bcopy: the caller's data into @a slot now (it may reuse its
 * buffer once the put returns); the slot is free, so nothing runs on it */
static ucs_status_t
uct_cuda_ipc_ns_staged_copy_in_now(uct_cuda_ipc_ns_copy_session_t *session,
                                   uct_cuda_ipc_ns_copy_slot_t *slot)
{
    ucs_status_t status;
    int pushed;

    status = uct_cuda_ipc_ns_ctx_push(session->staging.ctx,
                                      session->staging.device, &pushed);
    if (status != UCS_OK) {
        return status;
    }
    status = UCT_CUDA_IPC_NS_CU(cuMemcpy,
                                uct_cuda_ipc_ns_staging_slot(&session->staging,
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
uct_cuda_ipc_ns_staged_send(uct_cuda_ipc_ns_copies_t *copies,
                            uct_cuda_ipc_ns_copy_session_t *session,
                            uct_cuda_ipc_ns_copy_slot_t *slot)
{
    uct_cuda_ipc_ns_copy_op_t *op = slot->op;
    uct_cuda_ipc_ns_copy_local_t ring;
    ucs_status_t status;

    ring.base   = session->staging.base;
    ring.size   = session->staging.size;
    ring.buf_id = session->staging.buf_id;
    status = uct_cuda_ipc_ns_copy_send(
            copies, session, op->reg_id, op->token, op->dev_uuid, &ring,
            (void*)uct_cuda_ipc_ns_staging_slot(&session->staging, slot->index),
            slot->length, slot->offset, op->is_put, op, slot);
    if (status == UCS_OK) {
        uct_cuda_ipc_ns_copy_session_wakeup(copies, session, 1);
    }
    return status;
}


/*
 * Start the step @a state (SLOT_COPY: ours, SLOT_REQUEST: the owner's) of
 * @a slot's chunk. Without a completion queue op or room in the socket it
 * is retried from progress; on an error the chunk ends with it. Returns the
 * ops completed.
 */
static unsigned uct_cuda_ipc_ns_staged_start(uct_cuda_ipc_ns_copies_t *copies,
                                             uct_cuda_ipc_ns_copy_session_t *session,
                                             uct_cuda_ipc_ns_copy_slot_t *slot,
                                             uct_cuda_ipc_ns_slot_state_t state)
{
    ucs_status_t status;

    if ((state == UCT_CUDA_IPC_NS_SLOT_COPY) && slot->op->copy_in_now) {
        status = uct_cuda_ipc_ns_staged_copy_in_now(session, slot);
        if (status != UCS_OK) {
            slot->state = state;
            return uct_cuda_ipc_ns_staged_release(copies, session, slot,
                                                  status);
        }
        state = UCT_CUDA_IPC_NS_SLOT_REQUEST; /* the slot holds the data */
    }

    if (state == UCT_CUDA_IPC_NS_SLOT_REQUEST) {
        status = uct_cuda_ipc_ns_staged_send(copies, session, slot);
    } else {
        status = uct_cuda_ipc_ns_staged_copy(copies, session, slot);
    }

    if (status == UCS_OK) {
        slot->state = state;
        return 0;
    } else if ((status == UCS_ERR_NO_RESOURCE) ||
               (status == UCS_ERR_TIMED_OUT)) {
        slot->state = (state == UCT_CUDA_IPC_NS_SLOT_REQUEST) ?
                      UCT_CUDA_IPC_NS_SLOT_RETRY_SEND :
                      UCT_CUDA_IPC_NS_SLOT_RETRY_COPY;
        ++session->retry_slots;
        return 0;
    }

    slot->state = state;
    return uct_cuda_ipc_ns_staged_release(copies, session, slot, status);
}


/* Issue chunks of the waiting ops, oldest first, while slots are free */
static unsigned uct_cuda_ipc_ns_staged_dispatch(uct_cuda_ipc_ns_copies_t *copies,
                                                uct_cuda_ipc_ns_copy_session_t *session)
{
    const uct_cuda_ipc_ns_copy_elem_t *elem;
    uct_cuda_ipc_ns_copy_slot_t *slot;
    uct_cuda_ipc_ns_copy_op_t *op;
    unsigned count = 0, i;

    while (!session->closing && (session->free_slots > 0) &&
           !ucs_list_is_empty(&session->waiting)) {
        op   = ucs_list_head(&session->waiting, uct_cuda_ipc_ns_copy_op_t,
                             queue);
        slot = NULL;
        for (i = 0; slot == NULL; ++i) {
            if (session->slots[i].state == UCT_CUDA_IPC_NS_SLOT_FREE) {
                slot = &session->slots[i];
            }
        }

        elem         = &op->elems[op->elem];
        slot->op     = op;
        slot->local  = elem->ptr + op->elem_off;
        slot->length = ucs_min(session->staging.slot_size,
                               elem->length - op->elem_off);
        slot->offset = op->offset;
        --session->free_slots;
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
        count += uct_cuda_ipc_ns_staged_start(copies, session, slot,
                                              op->is_put ?
                                              UCT_CUDA_IPC_NS_SLOT_COPY :
                                              UCT_CUDA_IPC_NS_SLOT_REQUEST);
    }
    return count;
}


/* The owner answered for @a slot's chunk */
static unsigned uct_cuda_ipc_ns_staged_answered(uct_cuda_ipc_ns_copies_t *copies,
                                                uct_cuda_ipc_ns_copy_session_t *session,
                                                uct_cuda_ipc_ns_copy_slot_t *slot,
                                                ucs_status_t status)
{
    unsigned count;

    if ((status == UCS_OK) && !slot->op->is_put && !session->closing) {
        count = uct_cuda_ipc_ns_staged_start(copies, session, slot,
                                             UCT_CUDA_IPC_NS_SLOT_COPY);
    } else {
        count = uct_cuda_ipc_ns_staged_release(copies, session, slot, status);
    }
    return count + uct_cuda_ipc_ns_staged_dispatch(copies, session);
}


/* Our copy of a chunk ended (from the completion queue's progress) */
static void uct_cuda_ipc_ns_staged_copied(uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_slot_t *slot       = ucs_container_of(
            comp, uct_cuda_ipc_ns_copy_slot_t, comp);
    uct_cuda_ipc_ns_copy_session_t *session = slot->session;
    uct_cuda_ipc_ns_copies_t *copies        = session->copies;

    if (comp->status != UCS_OK) {
        ucs_error("cuda_ipc_ns: staging copy of %zu bytes %s slot %u (local "
                  "%p) failed: %s", slot->length,
                  slot->op->is_put ? "to" : "from", slot->index, slot->local,
                  ucs_status_string(comp->status));
        (void)uct_cuda_ipc_ns_staged_release(copies, session, slot,
                                             comp->status);
    } else if (slot->op->is_put) {
        (void)uct_cuda_ipc_ns_staged_start(copies, session, slot,
                                           UCT_CUDA_IPC_NS_SLOT_REQUEST);
    } else {
        (void)uct_cuda_ipc_ns_staged_release(copies, session, slot, UCS_OK);
    }
    (void)uct_cuda_ipc_ns_staged_dispatch(copies, session);
}


/* Start again the steps that lacked a resource (from progress) */
static unsigned uct_cuda_ipc_ns_staged_retry(uct_cuda_ipc_ns_copies_t *copies,
                                             uct_cuda_ipc_ns_copy_session_t *session)
{
    uct_cuda_ipc_ns_copy_slot_t *slot;
    unsigned count = 0, i;

    for (i = 0; (i < session->staging.num_slots) &&
                (session->retry_slots > 0); ++i) {
        slot = &session->slots[i];
        if (slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_SEND) {
            slot->state = UCT_CUDA_IPC_NS_SLOT_REQUEST;
        } else if (slot->state == UCT_CUDA_IPC_NS_SLOT_RETRY_COPY) {
            slot->state = UCT_CUDA_IPC_NS_SLOT_COPY;
        } else {
            continue;
        }
        --session->retry_slots;
        count += uct_cuda_ipc_ns_staged_start(copies, session, slot,
                                              slot->state);
    }
    return count + uct_cuda_ipc_ns_staged_dispatch(copies, session);
}


/* The session's ring, on @a device (in its primary context: the ring
 * outlives any context of the application's), and its stream */
static ucs_status_t
uct_cuda_ipc_ns_staging_open(uct_cuda_ipc_ns_copies_t *copies,
                             uct_cuda_ipc_ns_copy_session_t *session,
                             int device)
{
    /* the ring's copies are within one device: a stream of their own */
    static const uint8_t ring_uuid[UCT_CUDA_IPC_NS_UUID_SIZE] = {};
    uct_cuda_ipc_ns_copy_slot_t *slots;
    ucs_status_t status;
    unsigned i;
    int pushed;

    status = uct_cuda_ipc_ns_staging_alloc(device, copies->staging_slots,
                                           copies->staging_slot_size,
                                           &session->staging);
    if (status != UCS_OK) {
        return status;
    }

    slots = ucs_calloc(session->staging.num_slots, sizeof(*slots),
                       "cuda_ipc_ns_staging_slots");
    if (slots == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate %u staging slots",
                  session->staging.num_slots);
        status = UCS_ERR_NO_MEMORY;
        goto err_free;
    }

    status = uct_cuda_ipc_ns_ctx_push(session->staging.ctx, device, &pushed);
    if (status != UCS_OK) {
        goto err_free_slots;
    }
    status = uct_cuda_ipc_ns_cq_stream(copies->cq, session->staging.ctx,
                                       ring_uuid, &session->stream);
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status != UCS_OK) {
        goto err_free_slots;
    }

    for (i = 0; i < session->staging.num_slots; ++i) {
        slots[i].session = session;
        slots[i].index   = i;
        slots[i].state   = UCT_CUDA_IPC_NS_SLOT_FREE;
    }
    session->slots       = slots;
    session->free_slots  = session->staging.num_slots;
    session->retry_slots = 0;
    uct_cuda_ipc_ns_cq_ep_init(&session->cq_ep);
    return UCS_OK;

err_free_slots:
    ucs_free(slots);
err_free:
    uct_cuda_ipc_ns_staging_free(&session->staging);
    return status;
}


/*
 * The session ends: its chunks end with @a status (our copies still
 * running are waited for: the ring is freed after), the ops waiting for a
 * slot complete with it, and the ring goes. Returns the ops completed.
 */
static unsigned uct_cuda_ipc_ns_staging_close(uct_cuda_ipc_ns_copies_t *copies,
                                              uct_cuda_ipc_ns_copy_session_t *session,
                                              ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_t *op, *tmp;
    unsigned count = 0, i;
    int copying    = 0, pushed;

    if (session->slots == NULL) {
        return 0;
    }

    for (i = 0; i < session->staging.num_slots; ++i) {
        copying |= (session->slots[i].state == UCT_CUDA_IPC_NS_SLOT_COPY);
    }
    if (copying &&
        (uct_cuda_ipc_ns_ctx_push(session->staging.ctx,
                                  session->staging.device, &pushed) == UCS_OK)) {
        (void)UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, session->stream->stream);
        uct_cuda_ipc_ns_ctx_pop(pushed);
    }
    /* their completion queue ops complete unseen */
    uct_cuda_ipc_ns_cq_ep_cleanup(copies->cq, &session->cq_ep);

    for (i = 0; i < session->staging.num_slots; ++i) {
        if (session->slots[i].state != UCT_CUDA_IPC_NS_SLOT_FREE) {
            count += uct_cuda_ipc_ns_staged_release(copies, session,
                                                    &session->slots[i],
                                                    status);
        }
    }

    ucs_list_for_each_safe(op, tmp, &session->waiting, queue) {
        if (op->status == UCS_OK) {
            op->status = status;
        }
        count += uct_cuda_ipc_ns_staged_op_check(copies, op);
    }

    ucs_free(session->slots);
    session->slots = NULL;
    uct_cuda_ipc_ns_staging_free(&session->staging);
    return count;
}


/*
 * The session ended: the owner closed it (died), or broke the protocol. What
 * it owed completes with @a status, the endpoints waiting are reported
 * (first: a completion may destroy its endpoint), and the session is freed:
 * the next copy opens a new one, if the owner is still there.
 */
static unsigned uct_cuda_ipc_ns_copy_session_fail(uct_cuda_ipc_ns_copies_t *copies,
                                                  uct_cuda_ipc_ns_copy_session_t *session,
                                                  ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_req_t *req, *tmp;
    uct_cuda_ipc_ns_copy_op_t *op;
    unsigned count = 0, i;

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
        if (req->op->ep != NULL) {
            copies->ep_failed(req->op->ep->owner);
        }
    }
    for (i = 0; (session->slots != NULL) && (i < session->staging.num_slots);
         ++i) {
        op = session->slots[i].op;
        if ((op != NULL) && (op->ep != NULL)) {
            copies->ep_failed(op->ep->owner);
        }
    }
    ucs_list_for_each(op, &session->waiting, queue) {
        if (op->ep != NULL) {
            copies->ep_failed(op->ep->owner);
        }
    }

    ucs_list_for_each_safe(req, tmp, &session->reqs, list) {
        count += uct_cuda_ipc_ns_copy_req_done(copies, session, req, status);
    }
    count += uct_cuda_ipc_ns_staging_close(copies, session, status);

    uct_cuda_ipc_ns_copy_session_wakeup(copies, session, 0);
    close(session->sock);
    ucs_list_del(&session->list);
    ucs_free(session);
    return count;
}


void uct_cuda_ipc_ns_copies_cleanup(uct_cuda_ipc_ns_copies_t *copies)
{
    uct_cuda_ipc_ns_copy_session_t *session, *tmp;
    uct_cuda_ipc_ns_copy_req_t *req, *req_tmp;

    ucs_list_for_each_safe(session, tmp, &copies->sessions, list) {
        session->closing = 1;
        ucs_list_for_each_safe(req, req_tmp, &session->reqs, list) {
            (void)uct_cuda_ipc_ns_copy_req_done(copies, session, req,
                                                UCS_ERR_CANCELED);
        }
        (void)uct_cuda_ipc_ns_staging_close(copies, session, UCS_ERR_CANCELED);
        close(session->sock);
        ucs_list_del(&session->list);
        ucs_free(session);
    }
    close(copies->wakeup_fd);
}


/* The session with the owner of @a key, opened (and the owner
 * authenticated) on first use */
static ucs_status_t
uct_cuda_ipc_ns_copy_session_get(uct_cuda_ipc_ns_copies_t *copies,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 uct_cuda_ipc_ns_copy_session_t **session_p)
{
    uct_cuda_ipc_ns_copy_session_t *session;
    ucs_status_t status;
    int sock;

    ucs_list_for_each(session, &copies->sessions, list) {
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
    ucs_list_head_init(&session->waiting);
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
                                               uct_cuda_ipc_ns_copy_local_t *local,
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
    local->buf_id = attr.buffer_id;
    *device_p     = attr.device;
    return UCS_OK;
}


/* The owner holds @a buf: no fd needed */
static uct_cuda_ipc_ns_copy_sent_t *
uct_cuda_ipc_ns_copy_sent_find(uct_cuda_ipc_ns_copy_session_t *session,
                               const uct_cuda_ipc_ns_copy_sent_t *buf)
{
    uct_cuda_ipc_ns_copy_sent_t *sent;
    unsigned i;

    for (i = 0; i < session->num_sent; ++i) {
        sent = &session->sent[i];
        if ((sent->buf_id == buf->buf_id) &&
            (sent->buf_size == buf->buf_size) &&
            !memcmp(sent->dev_uuid, buf->dev_uuid, sizeof(sent->dev_uuid))) {
            sent->last_use = ++session->clock;
            return sent;
        }
    }
    return NULL;
}


/* The owner mapped @a buf: remembered, replacing the least recently named
 * one */
static void uct_cuda_ipc_ns_copy_sent_add(uct_cuda_ipc_ns_copy_session_t *session,
                                          const uct_cuda_ipc_ns_copy_sent_t *buf)
{
    uct_cuda_ipc_ns_copy_sent_t *sent;
    unsigned i;

    if (session->num_sent < UCT_CUDA_IPC_NS_COPY_SENT_MAX) {
        sent = &session->sent[session->num_sent++];
    } else {
        sent = &session->sent[0];
        for (i = 1; i < UCT_CUDA_IPC_NS_COPY_SENT_MAX; ++i) {
            if (session->sent[i].last_use < sent->last_use) {
                sent = &session->sent[i];
            }
        }
    }

    *sent          = *buf;
    sent->last_use = ++session->clock;
}


static ucs_status_t
uct_cuda_ipc_ns_copy_send(uct_cuda_ipc_ns_copies_t *copies,
                          uct_cuda_ipc_ns_copy_session_t *session,
                          uint64_t reg_id, const uint8_t *token,
                          const uint8_t *dev_uuid,
                          const uct_cuda_ipc_ns_copy_local_t *local,
                          const void *ptr, size_t length, uint64_t offset,
                          int is_put, uct_cuda_ipc_ns_copy_op_t *op,
                          uct_cuda_ipc_ns_copy_slot_t *slot)
{
    uct_cuda_ipc_ns_copy_args_t args;
    uct_cuda_ipc_ns_copy_req_t *req;
    ucs_status_t status;
    int fd = -1;

    req = ucs_malloc(sizeof(*req), "cuda_ipc_ns_copy_req");
    if (req == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a copy request");
        return UCS_ERR_NO_MEMORY;
    }

    req->buf.buf_id   = local->buf_id;
    req->buf.buf_size = local->size;
    memcpy(req->buf.dev_uuid, dev_uuid, sizeof(req->buf.dev_uuid));
    if (uct_cuda_ipc_ns_copy_sent_find(session, &req->buf) == NULL) {
        status = uct_cuda_ipc_ns_ptr_export_fd(local->base, UCS_LOG_LEVEL_ERROR,
                                               &fd);
        if (status != UCS_OK) {
            ucs_free(req);
            return status;
        }
    }

    args.seq        = ++session->next_seq;
    args.offset     = offset;
    args.length     = length;
    args.buf_id     = local->buf_id;
    args.buf_size   = local->size;
    args.buf_offset = (uintptr_t)ptr - local->base;
    args.direction  = is_put ? UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER :
                               UCT_CUDA_IPC_NS_COPY_TO_IMPORTER;
    status = uct_cuda_ipc_ns_copy_client_send(session->sock, reg_id, token,
                                              &args, fd, MSG_DONTWAIT);
    if (fd >= 0) {
        close(fd);
    }
    if (status != UCS_OK) {
        ucs_free(req);
        return status;
    }

    req->carried_fd = (fd >= 0);
    req->seq        = args.seq;
    req->reg_id     = reg_id;
    req->op         = op;
    req->slot       = slot;
    ucs_list_add_tail(&session->reqs, &req->list);
    ++session->num_reqs;
    ++copies->outstanding;
    if (slot == NULL) {
        ++op->unanswered; /* a staged op counts its slots */
    }
    ucs_trace_data("cuda_ipc_ns: copy request %" PRIu64 " to pid %u: %s %zu "
                   "bytes at offset %" PRIu64 ", local %p", args.seq,
                   session->pid, is_put ? "put" : "get", length, offset, ptr);
    return UCS_OK;
}


/* The session's ring, opened on @a device (-1: host memory, device 0) if
 * it has none; UCS_ERR_UNSUPPORTED when it is on another device */
static ucs_status_t
uct_cuda_ipc_ns_staging_get(uct_cuda_ipc_ns_copies_t *copies,
                            uct_cuda_ipc_ns_copy_session_t *session,
                            int device, const void *buffer)
{
    if (session->slots == NULL) {
        return uct_cuda_ipc_ns_staging_open(copies, session,
                                            (device >= 0) ? device : 0);
    } else if ((device >= 0) && (device != session->staging.device)) {
        ucs_error("cuda_ipc_ns: local buffer %p is on device %d, the staging "
                  "ring of pid %u's session on device %d: a copy by the owner "
                  "stages through one device", buffer, device, session->pid,
                  session->staging.device);
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}


/* A staged op of @a key, its local elements still to set */
static uct_cuda_ipc_ns_copy_op_t *
uct_cuda_ipc_ns_staged_op_new(uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                              const uct_cuda_ipc_ns_rkey_info_t *key,
                              uint64_t offset, int is_put,
                              uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_op_t *op;

    op = ucs_calloc(1, sizeof(*op), "cuda_ipc_ns_copy_op");
    if (op == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a copy op");
        return NULL;
    }
    op->ep      = copy_ep;
    op->comp    = comp;
    op->status  = UCS_OK;
    op->staged  = 1;
    op->is_put  = is_put;
    op->posting = 1; /* it completes only after its post returned */
    op->reg_id  = key->base;
    memcpy(op->token, key->token, sizeof(op->token));
    memcpy(op->dev_uuid, key->dev_uuid, sizeof(op->dev_uuid));
    op->offset  = offset;
    return op;
}


/*
 * Queue @a op for slots and issue what the free ones take. Returns
 * UCS_INPROGRESS when it runs or waits (an error completes it later), or
 * its error when its first chunk failed at once and nothing of it runs (the
 * op is then freed).
 */
static ucs_status_t
uct_cuda_ipc_ns_staged_op_start(uct_cuda_ipc_ns_copies_t *copies,
                                uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                                uct_cuda_ipc_ns_copy_session_t *session,
                                uct_cuda_ipc_ns_copy_op_t *op)
{
    ucs_status_t status;

    op->seq = ++copy_ep->seq;
    ucs_list_add_tail(&copy_ep->ops, &op->ep_elem);
    ++copies->outstanding;
    ucs_list_add_tail(&session->waiting, &op->queue);
    op->in_queue = 1;
    (void)uct_cuda_ipc_ns_staged_dispatch(copies, session);
    op->posting = 0;

    if ((op->status == UCS_OK) || (op->unanswered > 0)) {
        return UCS_INPROGRESS;
    }

    status = op->status;
    ucs_list_del(&op->ep_elem);
    --copies->outstanding;
    ucs_free(op->bounce);
    ucs_free(op);
    if ((status == UCS_ERR_CONNECTION_RESET) || (status == UCS_ERR_IO_ERROR)) {
        (void)uct_cuda_ipc_ns_copy_session_fail(copies, session, status);
    }
    return status;
}


/*
 * A put or get whose local buffer the owner cannot map: through the
 * session's staging ring (allocated now on first use, on @a device, the
 * local buffer's, or device 0 for host memory), chunk by chunk. Accepted
 * even when no slot is free: the op then waits in the session's queue.
 */
static ucs_status_t
uct_cuda_ipc_ns_staged_post(uct_cuda_ipc_ns_copies_t *copies,
                            uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                            uct_cuda_ipc_ns_copy_session_t *session,
                            const uct_cuda_ipc_ns_rkey_info_t *key,
                            const uct_iov_t *iov, size_t iovcnt, int device,
                            uint64_t offset, int is_put,
                            uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_op_t *op;
    ucs_status_t status;
    size_t i, j;

    status = uct_cuda_ipc_ns_staging_get(copies, session, device,
                                         iov[0].buffer);
    if (status != UCS_OK) {
        return status;
    }

    op = uct_cuda_ipc_ns_staged_op_new(copy_ep, key, offset, is_put, comp);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < iovcnt; ++i) {
        for (j = 0; (iov[i].length > 0) && (j < iov[i].count); ++j) {
            op->elems[op->num_elems].ptr    = UCS_PTR_BYTE_OFFSET(
                    iov[i].buffer, j * iov[i].stride);
            op->elems[op->num_elems].length = iov[i].length;
            ++op->num_elems; /* at most COPY_ELEMS_MAX: checked */
        }
    }
    return uct_cuda_ipc_ns_staged_op_start(copies, copy_ep, session, op);
}


ucs_status_t uct_cuda_ipc_ns_copies_put_now(uct_cuda_ipc_ns_copies_t *copies,
                                            uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                                            const uct_cuda_ipc_ns_rkey_info_t *key,
                                            const void *buffer, size_t length,
                                            uint64_t remote_addr)
{
    uct_cuda_ipc_ns_ptr_attr_t attr;
    uct_cuda_ipc_ns_copy_session_t *session;
    uct_cuda_ipc_ns_copy_op_t *op;
    ucs_status_t status;
    size_t num_chunks;

    status = uct_cuda_ipc_ns_copy_session_get(copies, key, &session);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_staging_get(
            copies, session,
            (uct_cuda_ipc_ns_ptr_attr_get(buffer, &attr) == UCS_OK) ?
            attr.device : -1, buffer);
    if (status != UCS_OK) {
        return status;
    }

    num_chunks = ucs_div_round_up(length, session->staging.slot_size);
    if (num_chunks > session->staging.num_slots) {
        ucs_error("cuda_ipc_ns: a put of %zu bytes by the owner needs %zu "
                  "staging slots at once, the ring has %u", length,
                  num_chunks, session->staging.num_slots);
        return UCS_ERR_UNSUPPORTED;
    }

    /* all of it into slots now, after the ops waiting for them */
    if (!ucs_list_is_empty(&session->waiting) ||
        (session->free_slots < num_chunks)) {
        return UCS_ERR_NO_RESOURCE;
    }

    op = uct_cuda_ipc_ns_staged_op_new(copy_ep, key, remote_addr - key->base,
                                       1, NULL);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    op->copy_in_now      = 1;
    op->elems[0].ptr     = (char*)buffer;
    op->elems[0].length  = length;
    op->num_elems        = 1;
    status = uct_cuda_ipc_ns_staged_op_start(copies, copy_ep, session, op);
    /* the owner's copies complete later: flush waits for them */
    return (status == UCS_INPROGRESS) ? UCS_OK : status;
}


ucs_status_t uct_cuda_ipc_ns_copies_get_unpack(uct_cuda_ipc_ns_copies_t *copies,
                                               uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                                               const uct_cuda_ipc_ns_rkey_info_t *key,
                                               size_t length,
                                               uint64_t remote_addr,
                                               uct_unpack_callback_t unpack_cb,
                                               void *arg, uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_session_t *session;
    uct_cuda_ipc_ns_copy_op_t *op;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_copy_session_get(copies, key, &session);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_staging_get(copies, session, -1, NULL);
    if (status != UCS_OK) {
        return status;
    }

    op = uct_cuda_ipc_ns_staged_op_new(copy_ep, key, remote_addr - key->base,
                                       0, comp);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    op->bounce = ucs_malloc(length, "cuda_ipc_ns_get_bcopy");
    if (op->bounce == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate %zu bytes for a get bcopy",
                  length);
        ucs_free(op);
        return UCS_ERR_NO_MEMORY;
    }
    op->unpack_cb       = unpack_cb;
    op->unpack_arg      = arg;
    op->elems[0].ptr    = op->bounce;
    op->elems[0].length = length;
    op->num_elems       = 1;
    return uct_cuda_ipc_ns_staged_op_start(copies, copy_ep, session, op);
}


ucs_status_t uct_cuda_ipc_ns_copies_post(uct_cuda_ipc_ns_copies_t *copies,
                                         uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                                         const uct_cuda_ipc_ns_rkey_info_t *key,
                                         const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, int is_put,
                                         uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_local_t locals[UCT_CUDA_IPC_NS_COPY_ELEMS_MAX];
    uct_cuda_ipc_ns_copy_session_t *session;
    uct_cuda_ipc_ns_copy_op_t *op;
    unsigned num_elems = 0, elem;
    int staged = 0, device = -1, elem_device;
    uint64_t offset;
    ucs_status_t status;
    size_t i, j, length;
    const void *ptr;

    /* every element is checked before anything is sent */
    for (i = 0; i < iovcnt; ++i) {
        length = iov[i].length; /* of each of its count elements */
        for (j = 0; (length > 0) && (j < iov[i].count); ++j) {
            if (num_elems == ucs_static_array_size(locals)) {
                ucs_error("cuda_ipc_ns: a copy by the owner takes at most %zu "
                          "local elements", ucs_static_array_size(locals));
                return UCS_ERR_UNSUPPORTED;
            }
            status = uct_cuda_ipc_ns_copy_local(
                    UCS_PTR_BYTE_OFFSET(iov[i].buffer, j * iov[i].stride),
                    length, &locals[num_elems++], &elem_device);
            if (status == UCS_ERR_UNSUPPORTED) {
                staged = 1; /* the owner cannot map it */
            } else if (status != UCS_OK) {
                return status;
            }
            if (elem_device < 0) {
                continue;
            } else if ((device >= 0) && (elem_device != device)) {
                ucs_error("cuda_ipc_ns: a copy by the owner takes local "
                          "elements of one device (%d and %d here)", device,
                          elem_device);
                return UCS_ERR_UNSUPPORTED;
            }
            device = elem_device;
        }
    }

    status = uct_cuda_ipc_ns_copy_session_get(copies, key, &session);
    if (status != UCS_OK) {
        return status;
    }

    if (staged) {
        return uct_cuda_ipc_ns_staged_post(copies, copy_ep, session, key, iov,
                                           iovcnt, device,
                                           remote_addr - key->base, is_put,
                                           comp);
    }

    /* the owner serves a few at a time; the rest would wait in its socket */
    if ((session->num_reqs > 0) &&
        (session->num_reqs + num_elems > copies->max_requests)) {
        return UCS_ERR_NO_RESOURCE;
    }

    op = ucs_malloc(sizeof(*op), "cuda_ipc_ns_copy_op");
    if (op == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a copy op");
        return UCS_ERR_NO_MEMORY;
    }
    op->ep         = copy_ep;
    op->comp       = comp;
    op->unanswered = 0;
    op->status     = UCS_OK;
    op->staged     = 0;
    op->posting    = 0;
    op->in_queue   = 0;
    op->bounce     = NULL;

    offset = remote_addr - key->base;
    elem   = 0;
    for (i = 0; i < iovcnt; ++i) {
        length = iov[i].length;
        for (j = 0; (length > 0) && (j < iov[i].count); ++j) {
            ptr    = UCS_PTR_BYTE_OFFSET(iov[i].buffer, j * iov[i].stride);
            /* a legacy key's registration id at its owner is its base */
            status = uct_cuda_ipc_ns_copy_send(copies, session, key->base,
                                               key->token, key->dev_uuid,
                                               &locals[elem++], ptr, length,
                                               offset, is_put, op, NULL);
            if (status != UCS_OK) {
                goto out_sent;
            }
            offset += length;
        }
    }

out_sent:
    if (op->unanswered == 0) {
        ucs_free(op);
        if (status == UCS_ERR_TIMED_OUT) {
            return UCS_ERR_NO_RESOURCE; /* the socket is full: later */
        } else if ((status == UCS_ERR_CONNECTION_RESET) ||
                   (status == UCS_ERR_IO_ERROR)) {
            (void)uct_cuda_ipc_ns_copy_session_fail(copies, session, status);
        }
        return status;
    }

    /* some went: the op completes with the error once they are answered */
    op->status = status;
    op->seq    = ++copy_ep->seq;
    ucs_list_add_tail(&copy_ep->ops, &op->ep_elem);
    uct_cuda_ipc_ns_copy_session_wakeup(copies, session, 1);
    return UCS_INPROGRESS;
}


unsigned uct_cuda_ipc_ns_copies_progress(uct_cuda_ipc_ns_copies_t *copies)
{
    uct_cuda_ipc_ns_copy_session_t *session, *tmp;
    uct_cuda_ipc_ns_copy_req_t *req, *found;
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
                /* refused before any request was read (uid) */
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
        if (ucs_unlikely(session->retry_slots > 0)) {
            count += uct_cuda_ipc_ns_staged_retry(copies, session);
        }
        if (session->num_reqs == 0) {
            uct_cuda_ipc_ns_copy_session_wakeup(copies, session, 0);
        }
    }

    return count;
}


ucs_status_t uct_cuda_ipc_ns_copy_ep_flush(uct_cuda_ipc_ns_copy_ep_t *copy_ep,
                                           uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_flush_t *flush;

    if (ucs_list_is_empty(&copy_ep->ops)) {
        return UCS_OK;
    }

    if (comp != NULL) {
        flush = ucs_malloc(sizeof(*flush), "cuda_ipc_ns_copy_flush");
        if (flush == NULL) {
            ucs_error("cuda_ipc_ns: failed to allocate a flush request");
            return UCS_ERR_NO_MEMORY;
        }
        flush->comp = comp;
        flush->seq  = copy_ep->seq;
        ucs_queue_push(&copy_ep->flush_q, &flush->queue);
    }
    return UCS_INPROGRESS;
}


int uct_cuda_ipc_ns_copies_ready(uct_cuda_ipc_ns_copies_t *copies)
{
    struct epoll_event event;

    return epoll_wait(copies->wakeup_fd, &event, 1, 0) > 0;
}
