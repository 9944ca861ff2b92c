/*
 * cuda_ipc_ns: endpoint (see cuda_ipc_ns_ep.h).
 *
 * A put or get maps the remote allocation through the cache (pinned until
 * the copy completes), enqueues cuMemcpyDtoDAsync on the stream of (local
 * buffer's context, remote device) and hands the op to the completion queue
 * (cuda_ipc_ns_cq.h), which owns it from then on.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_ep.h"
#include "cuda_ipc_ns_target.h"
#include "cuda_ipc_ns_copy_session.h"
#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_compat.h"
#include "cuda_ipc_ns_legacy_direct.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/memtrack_int.h>
#include <ucs/debug/log.h>
#include <ucs/type/class.h>
#include <inttypes.h>
#include <string.h>


static UCS_F_ALWAYS_INLINE uct_cuda_ipc_ns_iface_t *
uct_cuda_ipc_ns_ep_iface(const uct_cuda_ipc_ns_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.super.iface, uct_cuda_ipc_ns_iface_t);
}


static UCS_F_ALWAYS_INLINE uct_cuda_ipc_ns_md_t *
uct_cuda_ipc_ns_ep_md(const uct_cuda_ipc_ns_ep_t *ep)
{
    return ucs_derived_of(uct_cuda_ipc_ns_ep_iface(ep)->super.super.md,
                          uct_cuda_ipc_ns_md_t);
}


static UCS_CLASS_INIT_FUNC(uct_cuda_ipc_ns_ep_t, const uct_ep_params_t *params)
{
    uct_cuda_ipc_ns_identity_t id;
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_cuda_ipc_ns_ep_base_t, params);

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
                                 &uct_cuda_ipc_ns_ep_iface(self)->cq.flush_mp);
    ucs_arbiter_group_init(&self->arb_group);
    self->must_wait   = 0;
    self->failed      = 0;
    self->canceled    = 0;
    ucs_debug("cuda_ipc_ns: ep %p to pid %u (PID namespace %" PRIu64 ")",
              self, id.pid, id.pid_ns);
    return UCS_OK;
}


static unsigned uct_cuda_ipc_ns_ep_err_progress(void *arg)
{
    uct_cuda_ipc_ns_ep_t *ep = arg;

    uct_iface_handle_ep_err(ep->super.super.super.iface, &ep->super.super.super,
                            UCS_ERR_CONNECTION_RESET);
    return 1;
}


static int uct_cuda_ipc_ns_ep_is_err_cb(const ucs_callbackq_elem_t *elem,
                                        void *arg)
{
    return (elem->cb == uct_cuda_ipc_ns_ep_err_progress) && (elem->arg == arg);
}


static unsigned uct_cuda_ipc_ns_ep_canceled_progress(void *arg);


static UCS_CLASS_CLEANUP_FUNC(uct_cuda_ipc_ns_ep_t)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(self);

    uct_cuda_ipc_ns_compat_oneshot_remove(
            &iface->super.super.worker->super.progress_q, self,
            uct_cuda_ipc_ns_ep_is_err_cb, self);

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


UCS_CLASS_DEFINE(uct_cuda_ipc_ns_ep_t, uct_cuda_ipc_ns_ep_base_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_cuda_ipc_ns_ep_t, uct_ep_t);


/* Report the peer's failure once, from progress (UCT's rule for errors) */
static void uct_cuda_ipc_ns_ep_set_failed(uct_cuda_ipc_ns_ep_t *ep)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);

    if (ep->failed) {
        return;
    }

    ep->failed = 1;
    ucs_debug("cuda_ipc_ns: ep %p: peer pid %u (PID namespace %" PRIu64
              ") failed", ep, ep->super.remote_iface.pid,
              ep->super.remote_iface.pid_ns);
    uct_cuda_ipc_ns_compat_oneshot_add(
            &iface->super.super.worker->super.progress_q, ep,
            uct_cuda_ipc_ns_ep_err_progress, ep);
}


void uct_cuda_ipc_ns_ep_ops_failed(uct_cuda_ipc_ns_op_list_t *ops)
{
    uct_cuda_ipc_ns_ep_set_failed(ucs_container_of(ops, uct_cuda_ipc_ns_ep_t,
                                                   ops));
}


/*
 * Context and device of the local buffer; VMM memory has no context: the
 * device's primary one runs its copies. Host memory (staging buffers of the
 * short and bcopy operations) is copied in device 0's primary context.
 */
static ucs_status_t uct_cuda_ipc_ns_ep_local_ctx(const void *buffer,
                                                 int allow_host,
                                                 CUcontext *ctx_p,
                                                 int *device_p)
{
    CUpointer_attribute names[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_CONTEXT,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    };
    CUmemorytype mem_type = 0;
    CUcontext ctx         = NULL;
    int device            = -1;
    void *values[]        = {&mem_type, &ctx, &device};
    ucs_status_t status;

    status = UCT_CUDA_IPC_NS_CU(cuPointerGetAttributes,
                                ucs_static_array_size(names), names, values,
                                (CUdeviceptr)buffer);
    if (status != UCS_OK) {
        return status;
    }

    if (mem_type != CU_MEMORYTYPE_DEVICE) {
        if (!allow_host) {
            ucs_error("cuda_ipc_ns: local buffer %p is not CUDA device memory",
                      buffer);
            return UCS_ERR_INVALID_PARAM;
        }
        device = 0;
        ctx    = NULL;
    }

    *device_p = device;
    if (ctx != NULL) {
        *ctx_p = ctx;
        return UCS_OK;
    }
    return uct_cuda_ipc_ns_primary_ctx(device, ctx_p);
}


/* The peer entry holding the key's owner: the ep's peer unless the key is
 * of another process (then looked up once and kept in the unpacked key) */
static ucs_status_t uct_cuda_ipc_ns_ep_key_peer(uct_cuda_ipc_ns_ep_t *ep,
                                                uct_cuda_ipc_ns_rkey_t *key,
                                                uct_cuda_ipc_ns_peer_t **peer_p)
{
    const uct_cuda_ipc_ns_identity_t *id = uct_cuda_ipc_ns_cache_peer_id(ep->peer);
    uct_cuda_ipc_ns_identity_t key_id;

    if (ucs_likely((key->info.pid == id->pid) &&
                   (key->info.pid_ns == id->pid_ns) &&
                   ((key->info.start_time == 0) ||
                    (key->info.start_time == id->start_time)))) {
        *peer_p = ep->peer;
        return UCS_OK;
    }

    if (key->peer == NULL) {
        key_id.system_id  = id->system_id;
        key_id.pid_ns     = key->info.pid_ns;
        key_id.pid        = key->info.pid;
        key_id.start_time = key->info.start_time;
        if (uct_cuda_ipc_ns_cache_peer_get(&key_id, &key->peer) != UCS_OK) {
            return UCS_ERR_NO_MEMORY;
        }
    }

    *peer_p = key->peer;
    return UCS_OK;
}


/* Make @a stream wait for what a fence orders before the next op */
static ucs_status_t uct_cuda_ipc_ns_ep_apply_fence(uct_cuda_ipc_ns_ep_t *ep,
                                                   uct_cuda_ipc_ns_cq_stream_t *stream)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
    uct_cuda_ipc_ns_cq_stream_t *other;
    uct_cuda_ipc_ns_cq_op_t *op;
    uct_cuda_ipc_ns_op_t *any;
    ucs_status_t status;

    if (iface->fence) {
        ucs_list_for_each(other, &iface->cq.active, active) {
            if (other == stream) {
                continue;
            }
            op     = ucs_queue_tail_elem_non_empty(&other->queue,
                                                   uct_cuda_ipc_ns_cq_op_t, queue);
            status = uct_cuda_ipc_ns_cq_wait_op(stream, op);
            if (status != UCS_OK) {
                return status;
            }
        }
        iface->fence = 0;
    }

    /* the ops left before the fence are all on streams (those by owners
     * made the op wait: uct_cuda_ipc_ns_ep_fenced) */
    if (ep->ops.fence_seq != 0) {
        ucs_list_for_each(any, &ep->ops.ops, elem) {
            if (any->seq > ep->ops.fence_seq) {
                break;
            }
            op = ucs_derived_of(any, uct_cuda_ipc_ns_cq_op_t);
            if (op->stream != stream) {
                status = uct_cuda_ipc_ns_cq_wait_op(stream, op);
                if (status != UCS_OK) {
                    return status;
                }
            }
        }
        ep->ops.fence_seq = 0;
    }

    return UCS_OK;
}


/* Enqueue the copies of @a iov on @a stream and post the op */
static ucs_status_t
uct_cuda_ipc_ns_ep_enqueue(uct_cuda_ipc_ns_ep_t *ep, uct_cuda_ipc_ns_cq_op_t *op,
                           uct_cuda_ipc_ns_cq_stream_t *stream,
                           const uct_iov_t *iov, size_t iovcnt,
                           const uct_cuda_ipc_ns_target_t *target,
                           uct_completion_t *comp, int is_put)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
    ucs_status_t status;
    CUdeviceptr local;
    size_t i, j, count, length, off = 0;
    int posted = 0;

    status = uct_cuda_ipc_ns_ep_apply_fence(ep, stream);
    if (status != UCS_OK) {
        return status;
    }

    /* each iov: count elements of length bytes, stride apart locally, one
     * after the other remotely (contiguous elements are one copy) */
    for (i = 0; i < iovcnt; ++i) {
        length = uct_iov_get_length(&iov[i]);
        if (length == 0) {
            continue;
        }

        count = 1;
        if ((iov[i].count > 1) && (iov[i].stride != iov[i].length)) {
            count  = iov[i].count;
            length = iov[i].length;
        }

        for (j = 0; j < count; ++j) {
            local  = (CUdeviceptr)UCS_PTR_BYTE_OFFSET(iov[i].buffer,
                                                      j * iov[i].stride);
            status = uct_cuda_ipc_ns_target_memcpy(target, local, off,
                                                   length, is_put, 0,
                                                   stream->stream, &posted);
            if (status != UCS_OK) {
                if (posted) {
                    /* earlier copies use the mapping: let them end first */
                    (void)UCT_CUDA_IPC_NS_CU(cuStreamSynchronize,
                                             stream->stream);
                }
                return status;
            }
            off += length;
        }
    }

    return uct_cuda_ipc_ns_cq_post(&iface->cq, &ep->ops, op, stream,
                                   target->region, comp);
}


/*
 * Our open of legacy key @a key of another PID namespace failed with
 * @a status (logged where the driver answered): the key, and the owner's
 * later keys, go to the owner's copies (cuda_ipc_ns_legacy_direct.h). The
 * caller sees key->owner_copy set and posts the op there.
 */
static void uct_cuda_ipc_ns_ep_direct_failed(uct_cuda_ipc_ns_rkey_t *key,
                                             ucs_status_t status)
{
    /* remembered and logged already when the driver refused the open */
    (void)uct_cuda_ipc_ns_legacy_direct_failed(&key->info,
                                               ucs_status_string(status));
    key->direct_fallback = 0;
    key->owner_copy      = 1;
}


/*
 * Everything a copy between @a local and [remote_addr, +length) of @a key
 * needs: range check, the local context, the owner's cache entry (and its
 * watch), the mappings (pinned: the caller releases the target).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cuda_ipc_ns_ep_resolve(uct_cuda_ipc_ns_ep_t *ep, uct_cuda_ipc_ns_rkey_t *key,
                           const void *local, size_t length,
                           uint64_t remote_addr, int allow_host,
                           uct_cuda_ipc_ns_target_t *target)
{
    uct_cuda_ipc_ns_peer_t *peer;
    ucs_status_t status;
    int device;

    if (ucs_unlikely(ep->failed)) {
        return UCS_ERR_CONNECTION_RESET;
    }

    if (ucs_unlikely(ep->canceled)) {
        ucs_debug("cuda_ipc_ns: ep %p was flushed with UCT_FLUSH_FLAG_CANCEL: "
                  "only destroy is allowed", ep);
        return UCS_ERR_CANCELED;
    }

    if (ucs_unlikely((remote_addr < key->info.base) ||
                     (remote_addr - key->info.base > key->info.length) ||
                     (length > key->info.base + key->info.length -
                               remote_addr))) {
        ucs_error("cuda_ipc_ns: copy of %zu bytes at 0x%" PRIx64 " is outside "
                  "remote allocation 0x%" PRIx64 "..0x%" PRIx64, length,
                  remote_addr, key->info.base,
                  key->info.base + key->info.length);
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_cuda_ipc_ns_ep_local_ctx(local, allow_host, &target->ctx,
                                          &device);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_ep_key_peer(ep, key, &peer);
    if (status != UCS_OK) {
        return status;
    }

    target->remote = NULL;
    target->chunks = NULL;
    target->more   = NULL;
    target->count  = 1;
    if (ucs_unlikely(key->info.handle_type == UCT_CUDA_IPC_NS_HANDLE_CHUNKS)) {
        status = uct_cuda_ipc_ns_target_map_chunks(target, key, peer, device,
                                                   remote_addr - key->info.base,
                                                   length,
                                                   &uct_cuda_ipc_ns_ep_md(ep)->fdx);
    } else {
        status = uct_cuda_ipc_ns_cache_map(peer, &key->info, device,
                                           &uct_cuda_ipc_ns_ep_md(ep)->fdx,
                                           &target->region);
    }
    if (status != UCS_OK) {
        /* a failed import may mean the owner is gone: ask its watch */
        if ((uct_cuda_ipc_ns_cache_peer_check(peer) != UCS_OK) &&
            (peer == ep->peer)) {
            uct_cuda_ipc_ns_ep_set_failed(ep);
            status = UCS_ERR_CONNECTION_RESET;
        } else if (ucs_unlikely(key->direct_fallback)) {
            uct_cuda_ipc_ns_ep_direct_failed(key, status);
        }
        return status;
    }

    if (target->chunks == NULL) {
        target->remote = UCS_PTR_BYTE_OFFSET(target->region->mapping.addr,
                                             remote_addr - key->info.base);
    }
    return UCS_OK;
}


/*
 * The copies of one op run on one stream, in the context of the local buffer
 * of iov[0], with a mapping for its device: every other iov must live in that
 * context. Buffers of several contexts (or devices) in one op are refused.
 */
static ucs_status_t
uct_cuda_ipc_ns_ep_check_iov_ctx(const uct_iov_t *iov, size_t iovcnt,
                                 CUcontext ctx)
{
    ucs_status_t status;
    CUcontext other;
    int device;
    size_t i;

    for (i = 1; i < iovcnt; ++i) {
        if (uct_iov_get_length(&iov[i]) == 0) {
            continue;
        }
        status = uct_cuda_ipc_ns_ep_local_ctx(iov[i].buffer, 0, &other,
                                              &device);
        if (status != UCS_OK) {
            return status;
        }
        if (other != ctx) {
            ucs_error("cuda_ipc_ns: iov[%zu] %p is in context %p (device %d), "
                      "iov[0] %p in context %p: an operation's buffers must "
                      "share one context", i, iov[i].buffer, (void*)other,
                      device, iov[0].buffer, (void*)ctx);
            return UCS_ERR_UNSUPPORTED;
        }
    }
    return UCS_OK;
}


/*
 * The fence rule (docs/architecture.md, "Op model"): whether an op of
 * @a kind must wait for ops a fence put before it (then UCS_ERR_NO_RESOURCE,
 * and a pending request is dispatched at a completion). An op on a stream
 * waits here only for the copies by owners; its stream waits for the
 * other streams' ops (uct_cuda_ipc_ns_ep_apply_fence).
 */
static UCS_F_ALWAYS_INLINE int
uct_cuda_ipc_ns_ep_fenced(uct_cuda_ipc_ns_ep_t *ep,
                          uct_cuda_ipc_ns_iface_t *iface,
                          uct_cuda_ipc_ns_op_kind_t kind)
{
    int fenced;

    if (ucs_likely((ep->ops.fence_seq == 0) && !iface->fence)) {
        return 0;
    }

    fenced = (ep->ops.fence_seq != 0) &&
             uct_cuda_ipc_ns_op_list_fenced(&ep->ops, kind);
    if (iface->fence) {
        if ((iface->copies.outstanding > 0) ||
            ((kind != UCT_CUDA_IPC_NS_OP_STREAM) &&
             !ucs_list_is_empty(&iface->cq.active))) {
            fenced = 1;
        } else if (kind != UCT_CUDA_IPC_NS_OP_STREAM) {
            iface->fence = 0; /* an op on a stream: once its stream waits */
        }
    }

    ep->must_wait |= fenced;
    return fenced;
}


/* What a short or bcopy op hands to a copy by the owner */
typedef struct {
    const void            *buffer;    /* put: the data */
    uct_unpack_callback_t unpack_cb;  /* get: where the data goes */
    void                  *arg;
} uct_cuda_ipc_ns_ep_bcopy_t;


/*
 * A put or get on memory of another PID namespace that we cannot map: a
 * copy its owner makes (docs/owner-copies.md), completed from progress when
 * the owner answers. A fence orders it after the zero-copy ops before the
 * fence, by waiting (as pending) until they completed. @a bcopy: a short or
 * bcopy op (its data through the staging ring), else zero-copy @a iov.
 */
static ucs_status_t
uct_cuda_ipc_ns_ep_owner_copy(uct_cuda_ipc_ns_ep_t *ep,
                              uct_cuda_ipc_ns_rkey_t *key, const uct_iov_t *iov,
                              size_t iovcnt, size_t length,
                              uint64_t remote_addr, uct_completion_t *comp,
                              int is_put,
                              const uct_cuda_ipc_ns_ep_bcopy_t *bcopy)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
    uct_cuda_ipc_ns_peer_t *peer;
    ucs_status_t status;

    if (ep->failed) {
        return UCS_ERR_CONNECTION_RESET;
    }

    if (ep->canceled) {
        ucs_debug("cuda_ipc_ns: ep %p was flushed with UCT_FLUSH_FLAG_CANCEL: "
                  "only destroy is allowed", ep);
        return UCS_ERR_CANCELED;
    }

    if ((remote_addr < key->info.base) ||
        (remote_addr - key->info.base > key->info.length) ||
        (length > key->info.base + key->info.length - remote_addr)) {
        ucs_error("cuda_ipc_ns: copy of %zu bytes at 0x%" PRIx64 " is outside "
                  "remote allocation 0x%" PRIx64 "..0x%" PRIx64, length,
                  remote_addr, key->info.base,
                  key->info.base + key->info.length);
        return UCS_ERR_INVALID_PARAM;
    }

    if (uct_cuda_ipc_ns_ep_fenced(ep, iface, UCT_CUDA_IPC_NS_OP_OWNER)) {
        return UCS_ERR_NO_RESOURCE;
    }

    if (bcopy == NULL) {
        status = uct_cuda_ipc_ns_copies_post(&iface->copies, &ep->ops,
                                             &key->info, key->owner_gpu_usable,
                                             iov, iovcnt, remote_addr, is_put,
                                             comp);
    } else if (is_put) {
        status = uct_cuda_ipc_ns_copies_put_now(&iface->copies, &ep->ops,
                                                &key->info,
                                                key->owner_gpu_usable,
                                                bcopy->buffer, length,
                                                remote_addr);
    } else {
        status = uct_cuda_ipc_ns_copies_get_unpack(&iface->copies,
                                                   &ep->ops, &key->info,
                                                   key->owner_gpu_usable,
                                                   length, remote_addr,
                                                   bcopy->unpack_cb,
                                                   bcopy->arg, comp);
    }
    if ((status == UCS_INPROGRESS) || (status == UCS_OK)) {
        ucs_trace_data("cuda_ipc_ns: ep %p %s %zu bytes remote 0x%" PRIx64
                       " by its owner%s", ep, is_put ? "put" : "get",
                       length, remote_addr, (bcopy != NULL) ? " (staged)" : "");
        return status;
    } else if (status == UCS_ERR_NO_RESOURCE) {
        ep->must_wait = 1;
        return status;
    } else if ((status == UCS_ERR_UNSUPPORTED) ||
               (status == UCS_ERR_INVALID_PARAM)) {
        return status; /* the local buffer: logged */
    }

    /* no session, or it broke: the owner may be gone, ask its watch */
    if ((uct_cuda_ipc_ns_ep_key_peer(ep, key, &peer) == UCS_OK) &&
        (uct_cuda_ipc_ns_cache_peer_check(peer) != UCS_OK) &&
        (peer == ep->peer)) {
        uct_cuda_ipc_ns_ep_set_failed(ep);
        status = UCS_ERR_CONNECTION_RESET;
    }
    return status;
}


static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cuda_ipc_ns_ep_copy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                        uint64_t remote_addr, uct_rkey_t rkey,
                        uct_completion_t *comp, int is_put)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
    uct_cuda_ipc_ns_rkey_t *key    = (uct_cuda_ipc_ns_rkey_t*)rkey;
    size_t length                  = uct_iov_total_length(iov, iovcnt);
    uct_cuda_ipc_ns_cq_stream_t *stream;
    uct_cuda_ipc_ns_target_t target;
    uct_cuda_ipc_ns_cq_op_t *op;
    ucs_status_t status;
    int pushed;

    if (length == 0) {
        return UCS_OK;
    }

    if (ucs_unlikely(key->owner_copy)) {
        return uct_cuda_ipc_ns_ep_owner_copy(ep, key, iov, iovcnt, length,
                                             remote_addr, comp, is_put, NULL);
    }

    if (ucs_unlikely(uct_cuda_ipc_ns_ep_fenced(ep, iface,
                                               UCT_CUDA_IPC_NS_OP_STREAM))) {
        return UCS_ERR_NO_RESOURCE;
    }

    op = uct_cuda_ipc_ns_cq_op_get(&iface->cq);
    if (ucs_unlikely(op == NULL)) {
        return ep->failed ? UCS_ERR_CONNECTION_RESET :
               UCS_ERR_NO_RESOURCE; /* MAX_EVENTS in flight: pending */
    }

    status = uct_cuda_ipc_ns_ep_resolve(ep, key, iov[0].buffer, length,
                                        remote_addr, 0, &target);
    if (status != UCS_OK) {
        goto err_put_op;
    }

    if (iovcnt > 1) {
        status = uct_cuda_ipc_ns_ep_check_iov_ctx(iov, iovcnt, target.ctx);
        if (status != UCS_OK) {
            goto err_unpin;
        }
    }

    status = uct_cuda_ipc_ns_ctx_push(target.ctx, -1, &pushed);
    if (status != UCS_OK) {
        goto err_unpin;
    }

    status = uct_cuda_ipc_ns_cq_stream(&iface->cq, target.ctx,
                                       key->info.dev_uuid, &stream);
    if (status == UCS_OK) {
        /* the op owns the chunks' pins once posted */
        op->more_regions     = target.more;
        op->num_more_regions = target.count - 1;
        status = uct_cuda_ipc_ns_ep_enqueue(ep, op, stream, iov, iovcnt,
                                            &target, comp, is_put);
        if (status != UCS_OK) {
            op->more_regions     = NULL;
            op->num_more_regions = 0;
        }
    }
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status != UCS_OK) {
        goto err_unpin;
    }

    ucs_trace_data("cuda_ipc_ns: ep %p %s %zu bytes remote 0x%" PRIx64
                   " (mapped %p) local %p op %p", ep, is_put ? "put" : "get",
                   length, remote_addr, target.remote, iov[0].buffer, op);
    return UCS_INPROGRESS;

err_unpin:
    uct_cuda_ipc_ns_target_release(&target);
err_put_op:
    uct_cuda_ipc_ns_cq_op_put(&iface->cq, op);
    if (ucs_unlikely(key->owner_copy)) {
        /* our open of a legacy key failed: its owner copies it */
        return uct_cuda_ipc_ns_ep_owner_copy(ep, key, iov, iovcnt, length,
                                             remote_addr, comp, is_put, NULL);
    }
    return status;
}


/*
 * A copy that is done when this returns (short and bcopy operations): on
 * the stream of the pair, so that it also follows the copies before it, and
 * waited for. @a local may be host memory; the driver copies it either way,
 * the CPU never touches device memory.
 */
static ucs_status_t
uct_cuda_ipc_ns_ep_copy_sync(uct_ep_h tl_ep, void *local, size_t length,
                             uint64_t remote_addr, uct_rkey_t rkey, int is_put)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
    uct_cuda_ipc_ns_rkey_t *key    = (uct_cuda_ipc_ns_rkey_t*)rkey;
    uct_cuda_ipc_ns_ep_bcopy_t bcopy;
    uct_cuda_ipc_ns_cq_stream_t *stream;
    uct_cuda_ipc_ns_target_t target;
    ucs_status_t status;
    int pushed, posted = 0;

    if (length == 0) {
        return UCS_OK;
    }

    if (ucs_unlikely(key->owner_copy)) {
        /* a put only (get bcopy goes through the owner before): its data
         * into the staging ring now */
        ucs_assert(is_put);
        bcopy.buffer = local;
        return uct_cuda_ipc_ns_ep_owner_copy(ep, key, NULL, 0, length,
                                             remote_addr, NULL, 1, &bcopy);
    }

    if (ucs_unlikely(uct_cuda_ipc_ns_ep_fenced(ep, iface,
                                               UCT_CUDA_IPC_NS_OP_STREAM))) {
        return UCS_ERR_NO_RESOURCE;
    }

    status = uct_cuda_ipc_ns_ep_resolve(ep, key, local, length, remote_addr, 1,
                                        &target);
    if (status != UCS_OK) {
        if (ucs_unlikely(key->owner_copy) && is_put) {
            /* our open of a legacy key failed: its owner copies it (a get
             * bcopy goes there from its caller) */
            bcopy.buffer = local;
            return uct_cuda_ipc_ns_ep_owner_copy(ep, key, NULL, 0, length,
                                                 remote_addr, NULL, 1, &bcopy);
        }
        return status;
    }

    status = uct_cuda_ipc_ns_ctx_push(target.ctx, -1, &pushed);
    if (status == UCS_OK) {
        status = uct_cuda_ipc_ns_cq_stream(&iface->cq, target.ctx,
                                           key->info.dev_uuid, &stream);
        if (status == UCS_OK) {
            status = uct_cuda_ipc_ns_target_memcpy(&target,
                                                   (CUdeviceptr)local, 0,
                                                   length, is_put, 1,
                                                   stream->stream, &posted);
            /* even after a failed enqueue: earlier copies use the mapping */
            if (UCT_CUDA_IPC_NS_CU(cuStreamSynchronize, stream->stream) !=
                UCS_OK) {
                status = UCS_ERR_IO_ERROR;
            }
        }
        uct_cuda_ipc_ns_ctx_pop(pushed);
    }

    uct_cuda_ipc_ns_target_release(&target);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                          unsigned length, uint64_t remote_addr,
                                          uct_rkey_t rkey)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_ep_copy_sync(tl_ep, (void*)buffer, length,
                                          remote_addr, rkey, 1);
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t),
                                 PUT, SHORT, length);
    return status;
}


ssize_t uct_cuda_ipc_ns_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                     void *arg, uint64_t remote_addr,
                                     uct_rkey_t rkey)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
    ucs_status_t status;
    size_t length;

    /* the caller packs host data into our staging buffer */
    length = pack_cb(iface->bounce, arg);
    status = uct_cuda_ipc_ns_ep_copy_sync(tl_ep, iface->bounce, length,
                                          remote_addr, rkey, 1);
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
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
    uct_cuda_ipc_ns_rkey_t *key    = (uct_cuda_ipc_ns_rkey_t*)rkey;
    uct_cuda_ipc_ns_ep_bcopy_t bcopy;
    ucs_status_t status;

    if (length > UCT_CUDA_IPC_NS_MAX_BCOPY) {
        ucs_error("cuda_ipc_ns: get_bcopy of %zu bytes, at most %d",
                  length, UCT_CUDA_IPC_NS_MAX_BCOPY);
        return UCS_ERR_INVALID_PARAM;
    }

    if (ucs_unlikely(key->owner_copy) && (length > 0)) {
        goto owner_copy;
    }

    status = uct_cuda_ipc_ns_ep_copy_sync(tl_ep, iface->bounce, length,
                                          remote_addr, rkey, 0);
    if (status != UCS_OK) {
        if (ucs_unlikely(key->owner_copy)) {
            goto owner_copy; /* our open of a legacy key failed */
        }
        return status;
    }

    unpack_cb(arg, iface->bounce, length);
    UCT_TL_EP_STAT_OP(&ep->super.super, GET, BCOPY, length);
    return UCS_OK; /* done: the completion is not called */

owner_copy:
    /* through the staging ring, unpacked when it came */
    bcopy.unpack_cb = unpack_cb;
    bcopy.arg       = arg;
    status = uct_cuda_ipc_ns_ep_owner_copy(ep, key, NULL, 0, length,
                                           remote_addr, comp, 0, &bcopy);
    if (status == UCS_INPROGRESS) {
        UCT_TL_EP_STAT_OP(&ep->super.super, GET, BCOPY, length);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                          size_t iovcnt, uint64_t remote_addr,
                                          uct_rkey_t rkey,
                                          uct_completion_t *comp)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_ep_copy(tl_ep, iov, iovcnt, remote_addr, rkey,
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

    status = uct_cuda_ipc_ns_ep_copy(tl_ep, iov, iovcnt, remote_addr, rkey,
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
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);
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
        uct_cuda_ipc_ns_ep_set_failed(ep);
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_ep_pending_add(uct_ep_h tl_ep,
                                            uct_pending_req_t *req,
                                            unsigned flags)
{
    uct_cuda_ipc_ns_ep_t *ep       = ucs_derived_of(tl_ep, uct_cuda_ipc_ns_ep_t);
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_ep_iface(ep);

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

    ucs_arbiter_group_purge(&uct_cuda_ipc_ns_ep_iface(ep)->arbiter,
                            &ep->arb_group,
                            uct_cuda_ipc_ns_ep_pending_purge_cb, &args);
}
