/*
 * cuda_ipc_ns: endpoint (see cuda_ipc_ns_ep.h).
 *
 * Each put or get goes to the lane of its key (docs/architecture.md, "Op
 * model"): the direct one, or the owner's for memory we cannot map
 * (key->owner_copy, also set when our open of a legacy key fails: the op
 * then goes there at once). Flush and fence read the endpoint's one op
 * list, whatever lane its ops took.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_ep.h"
#include "cuda_ipc_ns_iface.h"
#include "cuda_ipc_ns_lane_direct.h"
#include "cuda_ipc_ns_lane_owner.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log.h>
#include <ucs/type/class.h>
#include <inttypes.h>


static UCS_CLASS_INIT_FUNC(uct_cuda_ipc_ns_ep_t, const uct_ep_params_t *params)
{
    uct_cuda_ipc_ns_nsid_identity_t id;
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_cuda_ipc_ns_iface_base_ep_t, params);

    if (!(params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR)) {
        ucs_error("cuda_ipc_ns: ep_create needs the peer's device address");
        return UCS_ERR_INVALID_PARAM;
    }

    id.system_id  = self->super.remote_dev.system_id;
    id.pid_ns     = self->super.remote_iface.pid_ns;
    id.pid        = self->super.remote_iface.pid;
    id.start_time = self->super.remote_iface.start_time;
    status        = uct_cuda_ipc_ns_cache_peer_get(&id, &self->peer);
    if (status != UCS_OK) {
        return status;
    }

    uct_cuda_ipc_ns_op_list_init(&self->ops,
                                 &uct_cuda_ipc_ns_lane_iface(self)->cq.flush_mp);
    ucs_arbiter_group_init(&self->arb_group);
    self->must_wait   = 0;
    self->failed      = 0;
    self->canceled    = 0;
    ucs_debug("cuda_ipc_ns: ep %p to pid %u (PID namespace %" PRIu64 ")",
              self, id.pid, id.pid_ns);
    return UCS_OK;
}

static unsigned uct_cuda_ipc_ns_ep_canceled_progress(void *arg);


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_ipc_ns_ep_t)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(self);

    uct_cuda_ipc_ns_lane_cleanup(self);

    uct_cuda_ipc_ns_op_list_cleanup(&self->ops);
    if (!ucs_arbiter_group_is_empty(&self->arb_group)) {
        ucs_warn("cuda_ipc_ns: ep %p destroyed with pending requests", self);
        uct_cuda_ipc_ns_ep_pending_purge(&self->super.super.super, NULL, NULL);
    }
    ucs_arbiter_group_cleanup(&self->arb_group);

    /* copies still in flight pin their mappings: UCP may have stopped the
     * interface's progress (a failed peer's ep destroyed without a flush),
     * so complete them through worker progress, as a CANCEL flush does */
    if (!ucs_list_is_empty(&iface->cq.active)) {
        uct_worker_progress_register_safe(&iface->super.super.worker->super,
                                          uct_cuda_ipc_ns_ep_canceled_progress,
                                          iface, 0, &iface->cancel_prog_id);
    }

    /* UCP destroys the ep of a peer it found failed (keepalive on another
     * lane): ask the watch, so that a dead peer's mappings go now, not at
     * eviction or exit. A live peer costs one poll of its pidfd */
    (void)uct_cuda_ipc_ns_cache_peer_check(self->peer);
    uct_cuda_ipc_ns_cache_peer_put(self->peer);
}


UCS_CLASS_DEFINE(uct_cuda_ipc_ns_ep_t, uct_cuda_ipc_ns_iface_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t);

void uct_cuda_ipc_ns_ep_ops_failed(uct_cuda_ipc_ns_op_list_t *ops)
{
    uct_cuda_ipc_ns_lane_set_failed(ucs_container_of(ops, uct_cuda_ipc_ns_ep_t,
                                                     ops));
}


/* The lane of @a key; an op of no bytes is done at once on the direct one */
static UCS_F_ALWAYS_INLINE const uct_cuda_ipc_ns_lane_ops_t *
uct_cuda_ipc_ns_ep_lane(const uct_cuda_ipc_ns_md_rkey_t *key, size_t length)
{
    return (ucs_unlikely(key->owner_copy) && (length > 0)) ?
           &uct_cuda_ipc_ns_lane_owner_ops : &uct_cuda_ipc_ns_lane_direct_ops;
}


/* A post on the direct lane failed with @a status: when that set
 * key->owner_copy (our open of a legacy key failed), the owner's lane */
static UCS_F_ALWAYS_INLINE int
uct_cuda_ipc_ns_ep_to_owner(const uct_cuda_ipc_ns_lane_ops_t *lane,
                            const uct_cuda_ipc_ns_md_rkey_t *key,
                            ucs_status_t status)
{
    return ucs_unlikely(UCS_STATUS_IS_ERR(status)) && key->owner_copy &&
           (lane == &uct_cuda_ipc_ns_lane_direct_ops);
}


static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cuda_ipc_ns_ep_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                         uint64_t remote_addr, uct_rkey_t rkey,
                         uct_completion_t *comp, int is_put)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_md_rkey_t *key = (uct_cuda_ipc_ns_md_rkey_t*)rkey;
    size_t length                  = uct_iov_total_length(iov, iovcnt);
    const uct_cuda_ipc_ns_lane_ops_t *lane;
    ucs_status_t status;

    if (length == 0) {
        return UCS_OK;
    }

    lane   = uct_cuda_ipc_ns_ep_lane(key, length);
    status = lane->zcopy(ep, key, iov, iovcnt, length, remote_addr, comp,
                         is_put);
    if (uct_cuda_ipc_ns_ep_to_owner(lane, key, status)) {
        status = uct_cuda_ipc_ns_lane_owner_ops.zcopy(ep, key, iov, iovcnt,
                                                      length, remote_addr,
                                                      comp, is_put);
    }
    return status;
}


/* Put short and bcopy: done with @a buffer when this returns */
static ucs_status_t
uct_cuda_ipc_ns_ep_put_now(uct_ep_h tl_ep, const void *buffer, size_t length,
                           uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_md_rkey_t *key = (uct_cuda_ipc_ns_md_rkey_t*)rkey;
    const uct_cuda_ipc_ns_lane_ops_t *lane;
    ucs_status_t status;

    lane   = uct_cuda_ipc_ns_ep_lane(key, length);
    status = lane->put_now(ep, key, buffer, length, remote_addr);
    if (uct_cuda_ipc_ns_ep_to_owner(lane, key, status)) {
        status = uct_cuda_ipc_ns_lane_owner_ops.put_now(ep, key, buffer,
                                                        length, remote_addr);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_ep_put_now(tl_ep, buffer, length, remote_addr,
                                        rkey);
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t),
                                 PUT, SHORT, length);
    return status;
}


ssize_t uct_cuda_ipc_ns_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                     void *arg, uint64_t remote_addr,
                                     uct_rkey_t rkey)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);
    ucs_status_t status;
    size_t length;

    /* the caller packs host data into our staging buffer */
    length = pack_cb(iface->bounce, arg);
    status = uct_cuda_ipc_ns_ep_put_now(tl_ep, iface->bounce, length,
                                        remote_addr, rkey);
    if (status != UCS_OK) {
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super.super, PUT, BCOPY, length);
    return length;
}


ucs_status_t uct_cuda_ipc_ns_ep_get_bcopy(uct_ep_h tl_ep,
                                          uct_unpack_callback_t unpack_cb,
                                          void *arg, size_t length,
                                          uint64_t remote_addr, uct_rkey_t rkey,
                                          uct_completion_t *comp)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_md_rkey_t *key = (uct_cuda_ipc_ns_md_rkey_t*)rkey;
    const uct_cuda_ipc_ns_lane_ops_t *lane;
    ucs_status_t status;

    if (length > UCT_CUDA_IPC_NS_MAX_BCOPY) {
        ucs_error("cuda_ipc_ns: get_bcopy of %zu bytes, at most %d",
                  length, UCT_CUDA_IPC_NS_MAX_BCOPY);
        return UCS_ERR_INVALID_PARAM;
    }

    lane   = uct_cuda_ipc_ns_ep_lane(key, length);
    status = lane->get_bcopy(ep, key, unpack_cb, arg, length, remote_addr,
                             comp);
    if (uct_cuda_ipc_ns_ep_to_owner(lane, key, status)) {
        status = uct_cuda_ipc_ns_lane_owner_ops.get_bcopy(ep, key, unpack_cb,
                                                          arg, length,
                                                          remote_addr, comp);
    }
    if (!UCS_STATUS_IS_ERR(status)) {
        UCT_TL_EP_STAT_OP(&ep->super.super, GET, BCOPY, length);
    }
    return status; /* UCS_OK: done, the completion is not called */
}


ucs_status_t uct_cuda_ipc_ns_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey,
                                      comp, 1);
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t),
                                 PUT, ZCOPY, uct_iov_total_length(iov, iovcnt));
    return status;
}


ucs_status_t uct_cuda_ipc_ns_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey,
                                      comp, 0);
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t),
                                 GET, ZCOPY, uct_iov_total_length(iov, iovcnt));
    return status;
}



/*
 * Progress of the interface while a canceled endpoint's copies run: UCP
 * discards an endpoint with a CANCEL flush and may then disable the
 * interface's progress (its last UCP endpoint closed), yet waits for that
 * flush (docs/architecture.md, "Flush with CANCEL"). Removed once no copy is
 * in flight on the interface.
 */
static unsigned uct_cuda_ipc_ns_ep_canceled_progress(void *arg)
{
    uct_cuda_ipc_ns_iface_t *iface = arg;
    unsigned count;

    count = uct_iface_progress(&iface->super.super.super);
    if (ucs_list_is_empty(&iface->cq.active) &&
        (iface->copies.outstanding == 0)) {
        uct_worker_progress_unregister_safe(&iface->super.super.worker->super,
                                            &iface->cancel_prog_id);
    }
    return count;
}


ucs_status_t uct_cuda_ipc_ns_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                      uct_completion_t *comp)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);
    ucs_status_t status;

    if (!ucs_arbiter_group_is_empty(&ep->arb_group)) {
        return UCS_ERR_NO_RESOURCE;
    }

    /* CANCEL: copies on the device cannot be recalled; the flush completes
     * when they have, without relying on the interface's progress, and the
     * endpoint takes no new operation */
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        ep->canceled = 1;
    }

    status = uct_cuda_ipc_ns_op_list_flush(&ep->ops, comp);
    if (status == UCS_OK) {
        UCT_TL_EP_STAT_FLUSH(&ep->super.super);
    } else if (status == UCS_INPROGRESS) {
        if (flags & UCT_FLUSH_FLAG_CANCEL) {
            uct_worker_progress_register_safe(
                    &iface->super.super.worker->super,
                    uct_cuda_ipc_ns_ep_canceled_progress, iface, 0,
                    &iface->cancel_prog_id);
        }
        UCT_TL_EP_STAT_FLUSH_WAIT(&ep->super.super);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_cuda_ipc_ns_ep_t *ep = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);

    /* the next op comes after every op in flight, on whatever lane
     * (uct_cuda_ipc_ns_ep_fenced) */
    uct_cuda_ipc_ns_op_list_fence(&ep->ops);
    UCT_TL_EP_STAT_FENCE(&ep->super.super);
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_ep_check(uct_ep_h tl_ep, unsigned flags,
                                      uct_completion_t *comp)
{
    uct_cuda_ipc_ns_ep_t *ep = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);

    if ((flags != 0) || (comp != NULL)) {
        ucs_error("cuda_ipc_ns: ep_check: unsupported flags 0x%x or "
                  "completion %p (the verdict comes through the error "
                  "handler)", flags, comp);
        return UCS_ERR_INVALID_PARAM;
    }

    if (uct_cuda_ipc_ns_cache_peer_check(ep->peer) != UCS_OK) {
        uct_cuda_ipc_ns_lane_set_failed(ep);
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_ep_pending_add(uct_ep_h tl_ep,
                                            uct_pending_req_t *req,
                                            unsigned flags)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);

    /* an op refused until copies outstanding end waits for their
     * completion, which dispatches it */
    if (uct_cuda_ipc_ns_cq_has_resources(&iface->cq) &&
        !(ep->must_wait && ((iface->copies.outstanding > 0) ||
                            (iface->cq.num_ops > 0)))) {
        return UCS_ERR_BUSY; /* the caller may post now */
    }
    ep->must_wait = 0;

    uct_pending_req_arb_group_push(&ep->arb_group, req);
    ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    UCT_TL_EP_STAT_PEND(&ep->super.super);
    return UCS_OK;
}


static ucs_arbiter_cb_result_t
uct_cuda_ipc_ns_ep_pending_purge_cb(ucs_arbiter_t *arbiter,
                                    ucs_arbiter_group_t *group,
                                    ucs_arbiter_elem_t *elem, void *arg)
{
    uct_purge_cb_args_t *args = arg;
    uct_pending_req_t *req    = ucs_container_of(elem, uct_pending_req_t,
                                                 priv);

    if (args->cb != NULL) {
        args->cb(req, args->arg);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}


void uct_cuda_ipc_ns_ep_pending_purge(uct_ep_h tl_ep,
                                      uct_pending_purge_callback_t cb,
                                      void *arg)
{
    uct_cuda_ipc_ns_ep_t *ep = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_purge_cb_args_t args = {cb, arg};

    ucs_arbiter_group_purge(&uct_cuda_ipc_ns_lane_iface(ep)->arbiter,
                            &ep->arb_group,
                            uct_cuda_ipc_ns_ep_pending_purge_cb, &args);
}
