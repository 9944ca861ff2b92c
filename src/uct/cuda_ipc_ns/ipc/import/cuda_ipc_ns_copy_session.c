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
#include "cuda_ipc_ns_ptr.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_iov.inl>
#include <ucs/datastruct/queue.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
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


/* One put or get: one request per local element */
typedef struct uct_cuda_ipc_ns_copy_op {
    ucs_list_link_t           ep_elem;    /* in its endpoint's ops */
    uct_cuda_ipc_ns_copy_ep_t *ep;        /* NULL once the ep is gone */
    uct_completion_t          *comp;      /* user's, may be NULL */
    uint64_t                  seq;        /* endpoint post order */
    unsigned                  unanswered; /* requests owed an answer */
    ucs_status_t              status;     /* first error */
} uct_cuda_ipc_ns_copy_op_t;




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
} uct_cuda_ipc_ns_copy_session_t;


/* A local element: its allocation as the owner maps it */
typedef struct uct_cuda_ipc_ns_copy_local {
    uint64_t base;
    uint64_t size;
    uint64_t buf_id;
} uct_cuda_ipc_ns_copy_local_t;


ucs_status_t uct_cuda_ipc_ns_copies_init(uct_cuda_ipc_ns_copies_t *copies,
                                         const uct_cuda_ipc_ns_fdx_config_t *fdx,
                                         unsigned max_requests, int cq_event_fd,
                                         uct_cuda_ipc_ns_copy_ep_failed_func_t ep_failed)
{
    struct epoll_event event = {.events = EPOLLIN};

    if (max_requests == 0) {
        ucs_error("cuda_ipc_ns: UCX_CUDA_IPC_NS_OWNER_COPY_MAX_REQUESTS must be "
                  "positive");
        return UCS_ERR_INVALID_PARAM;
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


/* An answer for @a req came (or none will): returns 1 when its op is done */
static unsigned uct_cuda_ipc_ns_copy_req_done(uct_cuda_ipc_ns_copies_t *copies,
                                              uct_cuda_ipc_ns_copy_session_t *session,
                                              uct_cuda_ipc_ns_copy_req_t *req,
                                              ucs_status_t status)
{
    uct_cuda_ipc_ns_copy_op_t *op = req->op;
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

    if ((status != UCS_OK) && (op->status == UCS_OK)) {
        op->status = status;
    }
    if (--op->unanswered > 0) {
        return 0;
    }

    uct_cuda_ipc_ns_copy_op_complete(op);
    return 1;
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
    unsigned count = 0;

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

    ucs_list_for_each_safe(req, tmp, &session->reqs, list) {
        count += uct_cuda_ipc_ns_copy_req_done(copies, session, req, status);
    }

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
        ucs_list_for_each_safe(req, req_tmp, &session->reqs, list) {
            (void)uct_cuda_ipc_ns_copy_req_done(copies, session, req,
                                                UCS_ERR_CANCELED);
        }
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
    ucs_list_head_init(&session->reqs);
    ucs_list_add_tail(&copies->sessions, &session->list);
    ucs_debug("cuda_ipc_ns: copy session %d with pid %u (PID namespace %"
              PRIu64 ")", sock, key->pid, key->pid_ns);
    *session_p = session;
    return UCS_OK;
}


/*
 * The allocation of the local element [@a ptr, + @a length): the owner maps
 * it from its POSIX fd, so it must be VMM memory created with that handle
 * type. Anything else is refused here, before a request is sent.
 */
static ucs_status_t uct_cuda_ipc_ns_copy_local(const void *ptr, size_t length,
                                               uct_cuda_ipc_ns_copy_local_t *local)
{
    uct_cuda_ipc_ns_ptr_attr_t attr;
    CUdeviceptr base;
    size_t size;

    if (uct_cuda_ipc_ns_ptr_attr_get(ptr, &attr) != UCS_OK) {
        ucs_error("cuda_ipc_ns: local buffer %p is not CUDA device memory: a "
                  "copy by the owner needs VMM memory it can map (staging is "
                  "not implemented)", ptr);
        return UCS_ERR_UNSUPPORTED;
    }

    base = attr.base;
    size = attr.size;
    if (!(attr.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        ucs_error("cuda_ipc_ns: local buffer %p (allocation 0x%llx, %zu "
                  "bytes) cannot be exported as a POSIX fd (cuMemAlloc "
                  "memory, or VMM created without "
                  "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR): the owner of "
                  "the remote memory cannot map it for its copy (staging is "
                  "not implemented)", ptr, (unsigned long long)base, size);
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


/* Send the request of one element; *req_p owed an answer on success */
static ucs_status_t
uct_cuda_ipc_ns_copy_send(uct_cuda_ipc_ns_copies_t *copies,
                          uct_cuda_ipc_ns_copy_session_t *session,
                          const uct_cuda_ipc_ns_rkey_info_t *key,
                          const uct_cuda_ipc_ns_copy_local_t *local,
                          const void *ptr, size_t length, uint64_t offset,
                          int is_put, uct_cuda_ipc_ns_copy_op_t *op)
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
    memcpy(req->buf.dev_uuid, key->dev_uuid, sizeof(req->buf.dev_uuid));
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
    /* a legacy key's registration id at its owner is its base */
    status = uct_cuda_ipc_ns_copy_client_send(session->sock, key->base,
                                              key->token, &args, fd,
                                              MSG_DONTWAIT);
    if (fd >= 0) {
        close(fd);
    }
    if (status != UCS_OK) {
        ucs_free(req);
        return status;
    }

    req->carried_fd = (fd >= 0);
    req->seq        = args.seq;
    req->reg_id = key->base;
    req->op     = op;
    ucs_list_add_tail(&session->reqs, &req->list);
    ++session->num_reqs;
    ++copies->outstanding;
    ++op->unanswered;
    ucs_trace_data("cuda_ipc_ns: copy request %" PRIu64 " to pid %u: %s %zu "
                   "bytes at offset %" PRIu64 ", local %p", args.seq,
                   session->pid, is_put ? "put" : "get", length, offset, ptr);
    return UCS_OK;
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
                    length, &locals[num_elems++]);
            if (status != UCS_OK) {
                return status;
            }
        }
    }

    status = uct_cuda_ipc_ns_copy_session_get(copies, key, &session);
    if (status != UCS_OK) {
        return status;
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

    offset = remote_addr - key->base;
    elem   = 0;
    for (i = 0; i < iovcnt; ++i) {
        length = iov[i].length;
        for (j = 0; (length > 0) && (j < iov[i].count); ++j) {
            ptr    = UCS_PTR_BYTE_OFFSET(iov[i].buffer, j * iov[i].stride);
            status = uct_cuda_ipc_ns_copy_send(copies, session, key,
                                               &locals[elem++], ptr, length,
                                               offset, is_put, op);
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

        if ((session != NULL) && (session->num_reqs == 0)) {
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
