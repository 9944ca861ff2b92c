/*
 * cuda_ipc_ns: ops and requests of copies by the owner (see
 * cuda_ipc_ns_copy_op.h, docs/owner-copies.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_copy_op.h"
#include "cuda_ipc_ns_copy_client.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/queue.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>


_Static_assert(UCT_CUDA_IPC_NS_COPY_SENT_MAX < UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX,
               "the owner must keep the buffers we count on");


void uct_cuda_ipc_ns_copy_op_complete(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                      uct_cuda_ipc_ns_copy_op_t *op)
{
    uct_cuda_ipc_ns_op_list_t *ops = op->super.list;

    if ((op->super.comp == NULL) && (op->status != UCS_OK) && (ops != NULL)) {
        /* as a transport whose peer refused a write: the endpoint fails */
        ucs_error("cuda_ipc_ns: ops %p: a %s by the owner with no completion "
                  "failed after it was posted: %s", ops,
                  op->is_put ? "put" : "get", ucs_status_string(op->status));
        copies->ep_failed(ops);
    }
    uct_cuda_ipc_ns_op_complete(&op->super, op->status);
    ucs_mpool_put(op);
}


void uct_cuda_ipc_ns_copy_op_wakeup(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         uct_cuda_ipc_ns_copy_op_session_t *session,
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


uct_cuda_ipc_ns_copy_op_sent_t *
uct_cuda_ipc_ns_copy_op_sent_find(uct_cuda_ipc_ns_copy_op_session_t *session,
                               const uct_cuda_ipc_ns_copy_op_sent_t *buf)
{
    uct_cuda_ipc_ns_copy_op_sent_t *sent;
    unsigned i;

    for (i = 0; i < session->num_sent; ++i) {
        sent = &session->sent[i];
        if ((sent->buf_id == buf->buf_id) &&
            (sent->buf_size == buf->buf_size) &&
            (sent->flags == buf->flags) &&
            !memcmp(sent->dev_uuid, buf->dev_uuid, sizeof(sent->dev_uuid))) {
            sent->last_use = ++session->clock;
            return sent;
        }
    }
    return NULL;
}


void uct_cuda_ipc_ns_copy_op_sent_add(uct_cuda_ipc_ns_copy_op_session_t *session,
                                   const uct_cuda_ipc_ns_copy_op_sent_t *buf)
{
    uct_cuda_ipc_ns_copy_op_sent_t *sent;
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


ucs_status_t
uct_cuda_ipc_ns_copy_op_send(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                          uct_cuda_ipc_ns_copy_op_session_t *session,
                          const uct_cuda_ipc_ns_copy_op_local_t *local,
                          const void *ptr, size_t length, uint64_t offset,
                          uct_cuda_ipc_ns_copy_op_t *op,
                          uct_cuda_ipc_ns_copy_op_slot_t *slot)
{
    uct_cuda_ipc_ns_broker_proto_copy_args_t args;
    uct_cuda_ipc_ns_copy_op_req_t *req;
    ucs_status_t status;
    int fd = -1;

    req = ucs_malloc(sizeof(*req), "cuda_ipc_ns_copy_req");
    if (req == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a copy request");
        return UCS_ERR_NO_MEMORY;
    }

    req->buf.buf_id   = local->buf_id;
    req->buf.buf_size = local->size;
    req->buf.flags    = local->ops->buf_flags;
    memcpy(req->buf.dev_uuid, op->dev_uuid, sizeof(req->buf.dev_uuid));
    if (uct_cuda_ipc_ns_copy_op_sent_find(session, &req->buf) == NULL) {
        /* the owner does not hold it yet: its fd goes with the request */
        status = local->ops->export_fd(local->staging, local->base, &fd);
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
    args.direction  = op->is_put ? UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER :
                               UCT_CUDA_IPC_NS_COPY_TO_IMPORTER;
    args.flags      = req->buf.flags;
    status = uct_cuda_ipc_ns_copy_client_send(session->sock, op->reg_id,
                                              op->token, &args, fd,
                                              MSG_DONTWAIT);
    if (fd >= 0) {
        close(fd);
    }
    if (status != UCS_OK) {
        if ((status != UCS_ERR_TIMED_OUT) &&
            (session->send_status == UCS_OK)) {
            /* the socket is broken, unlike a local failure above: counted
             * as work outstanding, so that progress runs and ends it */
            session->send_status = status;
            ++copies->outstanding;
        }
        ucs_free(req);
        return status;
    }

    req->carried_fd = (fd >= 0);
    req->seq        = args.seq;
    req->reg_id     = op->reg_id;
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
                   session->pid, op->is_put ? "put" : "get", length, offset,
                   ptr);
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_copy_op_set_iov(uct_cuda_ipc_ns_copy_op_t *op,
                                             const uct_iov_t *iov,
                                             size_t iovcnt)
{
    size_t i, j;

    op->num_elems = 0;
    for (i = 0; i < iovcnt; ++i) {
        for (j = 0; (iov[i].length > 0) && (j < iov[i].count); ++j) {
            if (op->num_elems == UCT_CUDA_IPC_NS_COPY_ELEMS_MAX) {
                ucs_error("cuda_ipc_ns: a copy by the owner takes at most %d "
                          "local elements", UCT_CUDA_IPC_NS_COPY_ELEMS_MAX);
                return UCS_ERR_UNSUPPORTED;
            }
            op->elems[op->num_elems].ptr    = UCS_PTR_BYTE_OFFSET(
                    iov[i].buffer, j * iov[i].stride);
            op->elems[op->num_elems].length = iov[i].length;
            ++op->num_elems;
        }
    }
    return UCS_OK;
}


uct_cuda_ipc_ns_copy_op_t *
uct_cuda_ipc_ns_copy_op_new(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                            const uct_cuda_ipc_ns_rkey_info_t *key,
                            uint64_t offset, int is_put,
                            uct_completion_t *comp)
{
    uct_cuda_ipc_ns_copy_op_t *op;

    op = ucs_mpool_get(&copies->op_mp);
    if (op == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a copy op");
        return NULL;
    }
    memset(op, 0, sizeof(*op));
    op->super.kind = UCT_CUDA_IPC_NS_OP_OWNER;
    op->super.comp = comp;
    op->status     = UCS_OK;
    op->is_put = is_put;
    op->reg_id = key->base; /* a legacy key's id at its owner is its base */
    memcpy(op->token, key->token, sizeof(op->token));
    memcpy(op->dev_uuid, key->dev_uuid, sizeof(op->dev_uuid));
    op->offset = offset;
    return op;
}


void uct_cuda_ipc_ns_copy_op_free(uct_cuda_ipc_ns_copy_op_t *op)
{
    ucs_mpool_put(op);
}
