/*
 * cuda_ipc_ns: the direct lane (see cuda_ipc_ns_lane_direct.h).
 *
 * A put or get maps the remote allocation through the cache (pinned until
 * the copy completes), enqueues cuMemcpyDtoDAsync on the stream of (local
 * buffer's context, remote device) and hands the op to the completion queue
 * (cuda_ipc_ns_cq.h), which owns it from then on.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_lane_direct.h"
#include "cuda_ipc_ns_target.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_legacy_direct.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log.h>
#include <inttypes.h>


/*
 * Context and device of the local buffer; VMM memory has no context: the
 * device's primary one runs its copies. Host memory (staging buffers of the
 * short and bcopy operations) is copied in device 0's primary context.
 */
static ucs_status_t uct_cuda_ipc_ns_lane_direct_local_ctx(const void *buffer,
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
    return uct_cuda_ipc_ns_ctx_primary(device, ctx_p);
}


/* Make @a stream wait for what a fence orders before the next op */
static ucs_status_t uct_cuda_ipc_ns_lane_direct_apply_fence(uct_cuda_ipc_ns_ep_t *ep,
                                                   uct_cuda_ipc_ns_cq_stream_t *stream)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);
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
     * made the op wait: uct_cuda_ipc_ns_lane_fenced) */
    if (ep->ops.fence_seq != 0) {
        ucs_list_for_each(any, &ep->ops.ops, elem) {
            if (any->seq > ep->ops.fence_seq) {
                break;
            }
            op = ucs_container_of(any, uct_cuda_ipc_ns_cq_op_t, super);
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
uct_cuda_ipc_ns_lane_direct_enqueue(uct_cuda_ipc_ns_ep_t *ep, uct_cuda_ipc_ns_cq_op_t *op,
                           uct_cuda_ipc_ns_cq_stream_t *stream,
                           const uct_iov_t *iov, size_t iovcnt,
                           const uct_cuda_ipc_ns_target_t *target,
                           uct_completion_t *comp, int is_put)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);
    ucs_status_t status;
    CUdeviceptr local;
    size_t i, j, count, length, off = 0;
    int posted = 0;

    status = uct_cuda_ipc_ns_lane_direct_apply_fence(ep, stream);
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
static void uct_cuda_ipc_ns_lane_direct_direct_failed(uct_cuda_ipc_ns_md_rkey_t *key,
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
uct_cuda_ipc_ns_lane_direct_resolve(uct_cuda_ipc_ns_ep_t *ep, uct_cuda_ipc_ns_md_rkey_t *key,
                           const void *local, size_t length,
                           uint64_t remote_addr, int allow_host,
                           uct_cuda_ipc_ns_target_t *target)
{
    uct_cuda_ipc_ns_cache_peer_t *peer;
    ucs_status_t status;
    int device;

    status = uct_cuda_ipc_ns_lane_check(ep, key, remote_addr, length);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    status = uct_cuda_ipc_ns_lane_direct_local_ctx(local, allow_host, &target->ctx,
                                          &device);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_lane_key_peer(ep, key, &peer);
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
                                                   &uct_cuda_ipc_ns_lane_md(ep)->fdx);
    } else {
        status = uct_cuda_ipc_ns_cache_map(peer, &key->info, device,
                                           &uct_cuda_ipc_ns_lane_md(ep)->fdx,
                                           &target->region);
    }
    if (status != UCS_OK) {
        /* a failed import may mean the owner is gone: ask its watch */
        if ((uct_cuda_ipc_ns_cache_peer_check(peer) != UCS_OK) &&
            (peer == ep->peer)) {
            uct_cuda_ipc_ns_lane_set_failed(ep);
            status = UCS_ERR_CONNECTION_RESET;
        } else if (ucs_unlikely(key->direct_fallback)) {
            uct_cuda_ipc_ns_lane_direct_direct_failed(key, status);
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
uct_cuda_ipc_ns_lane_direct_check_iov_ctx(const uct_iov_t *iov, size_t iovcnt,
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
        status = uct_cuda_ipc_ns_lane_direct_local_ctx(iov[i].buffer, 0, &other,
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


/* Put/get zcopy: the op on a stream of (local context, remote device) */
static ucs_status_t
uct_cuda_ipc_ns_lane_direct_zcopy(uct_cuda_ipc_ns_ep_t *ep,
                                  uct_cuda_ipc_ns_md_rkey_t *key,
                                  const uct_iov_t *iov, size_t iovcnt,
                                  size_t length, uint64_t remote_addr,
                                  uct_completion_t *comp, int is_put)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);
    uct_cuda_ipc_ns_cq_stream_t *stream;
    uct_cuda_ipc_ns_target_t target;
    uct_cuda_ipc_ns_cq_op_t *op;
    ucs_status_t status;
    int pushed;

    if (ucs_unlikely(uct_cuda_ipc_ns_lane_fenced(ep,
                                                 UCT_CUDA_IPC_NS_OP_STREAM))) {
        return UCS_ERR_NO_RESOURCE;
    }

    op = uct_cuda_ipc_ns_cq_op_get(&iface->cq);
    if (ucs_unlikely(op == NULL)) {
        return ep->failed ? UCS_ERR_CONNECTION_RESET :
               UCS_ERR_NO_RESOURCE; /* MAX_EVENTS in flight: pending */
    }

    status = uct_cuda_ipc_ns_lane_direct_resolve(ep, key, iov[0].buffer, length,
                                        remote_addr, 0, &target);
    if (status != UCS_OK) {
        goto err_put_op;
    }

    if (iovcnt > 1) {
        status = uct_cuda_ipc_ns_lane_direct_check_iov_ctx(iov, iovcnt, target.ctx);
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
        status = uct_cuda_ipc_ns_lane_direct_enqueue(ep, op, stream, iov, iovcnt,
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
    return status; /* with key->owner_copy set: the owner's lane next */
}


/*
 * A copy that is done when this returns (short and bcopy operations): on
 * the stream of the pair, so that it also follows the copies before it, and
 * waited for. @a local may be host memory; the driver copies it either way,
 * the CPU never touches device memory.
 */
static ucs_status_t
uct_cuda_ipc_ns_lane_direct_copy_sync(uct_cuda_ipc_ns_ep_t *ep,
                                      uct_cuda_ipc_ns_md_rkey_t *key, void *local,
                                      size_t length, uint64_t remote_addr,
                                      int is_put)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);
    uct_cuda_ipc_ns_cq_stream_t *stream;
    uct_cuda_ipc_ns_target_t target;
    ucs_status_t status;
    int pushed, posted = 0;

    if (length == 0) {
        return UCS_OK;
    }

    if (ucs_unlikely(uct_cuda_ipc_ns_lane_fenced(ep,
                                                 UCT_CUDA_IPC_NS_OP_STREAM))) {
        return UCS_ERR_NO_RESOURCE;
    }

    status = uct_cuda_ipc_ns_lane_direct_resolve(ep, key, local, length, remote_addr, 1,
                                        &target);
    if (status != UCS_OK) {
        return status; /* with key->owner_copy set: the owner's lane next */
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


static ucs_status_t
uct_cuda_ipc_ns_lane_direct_put_now(uct_cuda_ipc_ns_ep_t *ep,
                                    uct_cuda_ipc_ns_md_rkey_t *key,
                                    const void *buffer, size_t length,
                                    uint64_t remote_addr)
{
    return uct_cuda_ipc_ns_lane_direct_copy_sync(ep, key, (void*)buffer,
                                                 length, remote_addr, 1);
}


/* Get bcopy through the interface's staging buffer, done when it returns
 * (the completion is not called) */
static ucs_status_t
uct_cuda_ipc_ns_lane_direct_get_bcopy(uct_cuda_ipc_ns_ep_t *ep,
                                      uct_cuda_ipc_ns_md_rkey_t *key,
                                      uct_unpack_callback_t unpack_cb,
                                      void *arg, size_t length,
                                      uint64_t remote_addr,
                                      uct_completion_t *comp)
{
    void *bounce = uct_cuda_ipc_ns_lane_iface(ep)->bounce;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_lane_direct_copy_sync(ep, key, bounce, length,
                                                   remote_addr, 0);
    if (status == UCS_OK) {
        unpack_cb(arg, bounce, length);
    }
    return status;
}


const uct_cuda_ipc_ns_lane_ops_t uct_cuda_ipc_ns_lane_direct_ops = {
    .zcopy     = uct_cuda_ipc_ns_lane_direct_zcopy,
    .put_now   = uct_cuda_ipc_ns_lane_direct_put_now,
    .get_bcopy = uct_cuda_ipc_ns_lane_direct_get_bcopy
};
