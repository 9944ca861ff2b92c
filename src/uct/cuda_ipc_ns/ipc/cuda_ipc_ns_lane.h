/*
 * cuda_ipc_ns: the lanes an endpoint's puts and gets travel
 * (docs/architecture.md, "Op model"), each a small ops table, and what
 * they share of the endpoint: its checks, the key's owner, its failure and
 * the fence rule. The endpoint picks a lane per key and owns none.
 *   direct (cuda_ipc_ns_lane_direct.h): the remote memory mapped here, our
 *          copies on a stream;
 *   owner  (cuda_ipc_ns_lane_owner.h): the owner copies, into the local
 *          buffer or through a staging ring of device or pinned host memory
 *          (cuda_ipc_ns_copies.h).
 */
#ifndef UCT_CUDA_IPC_NS_LANE_H
#define UCT_CUDA_IPC_NS_LANE_H

#include "cuda_ipc_ns_iface.h"
#include "cuda_ipc_ns_ep.h"
#include "cuda_ipc_ns_md.h"

#include <ucs/debug/log.h>
#include <inttypes.h>


/* One lane: how an op of each kind is posted on it */
typedef struct uct_cuda_ipc_ns_lane_ops {
    /* put/get zcopy of @a iov (@a length bytes in all, not 0) */
    ucs_status_t (*zcopy)(uct_cuda_ipc_ns_ep_t *ep, uct_cuda_ipc_ns_md_rkey_t *key,
                          const uct_iov_t *iov, size_t iovcnt, size_t length,
                          uint64_t remote_addr, uct_completion_t *comp,
                          int is_put);
    /* put short/bcopy of @a buffer (host or device memory): UCS_OK once
     * the buffer may be reused */
    ucs_status_t (*put_now)(uct_cuda_ipc_ns_ep_t *ep,
                            uct_cuda_ipc_ns_md_rkey_t *key, const void *buffer,
                            size_t length, uint64_t remote_addr);
    /* get bcopy: the data to @a unpack_cb, UCS_OK when done now, else
     * UCS_INPROGRESS and @a comp when done */
    ucs_status_t (*get_bcopy)(uct_cuda_ipc_ns_ep_t *ep,
                              uct_cuda_ipc_ns_md_rkey_t *key,
                              uct_unpack_callback_t unpack_cb, void *arg,
                              size_t length, uint64_t remote_addr,
                              uct_completion_t *comp);
} uct_cuda_ipc_ns_lane_ops_t;


static UCS_F_ALWAYS_INLINE uct_cuda_ipc_ns_iface_t *
uct_cuda_ipc_ns_lane_iface(const uct_cuda_ipc_ns_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.super.iface, uct_cuda_ipc_ns_iface_t);
}


static UCS_F_ALWAYS_INLINE uct_cuda_ipc_ns_md_t *
uct_cuda_ipc_ns_lane_md(const uct_cuda_ipc_ns_ep_t *ep)
{
    return ucs_derived_of(uct_cuda_ipc_ns_lane_iface(ep)->super.super.md,
                          uct_cuda_ipc_ns_md_t);
}


/*
 * What every lane checks first: the endpoint failed or was flushed with
 * CANCEL, or [remote_addr, +length) is outside the key's allocation
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cuda_ipc_ns_lane_check(uct_cuda_ipc_ns_ep_t *ep,
                           const uct_cuda_ipc_ns_md_rkey_t *key,
                           uint64_t remote_addr, size_t length)
{
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
    return UCS_OK;
}


/*
 * The fence rule (docs/architecture.md, "Op model"): whether an op of
 * @a kind must wait for ops a fence put before it (then UCS_ERR_NO_RESOURCE,
 * and a pending request is dispatched at a completion). An op on a stream
 * waits here only for the copies by owners; its stream waits for the
 * other streams' ops (the direct lane's fence).
 */
static UCS_F_ALWAYS_INLINE int
uct_cuda_ipc_ns_lane_fenced(uct_cuda_ipc_ns_ep_t *ep,
                            uct_cuda_ipc_ns_op_kind_t kind)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);
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


/* The peer entry holding the key's owner: the ep's peer unless the key is
 * of another process (then looked up once and kept in the unpacked key) */
ucs_status_t uct_cuda_ipc_ns_lane_key_peer(uct_cuda_ipc_ns_ep_t *ep,
                                           uct_cuda_ipc_ns_md_rkey_t *key,
                                           uct_cuda_ipc_ns_cache_peer_t **peer_p);

/* Report the peer's failure once, from progress (UCT's rule for errors) */
void uct_cuda_ipc_ns_lane_set_failed(uct_cuda_ipc_ns_ep_t *ep);

/* A post on @a key failed with @a status: if the key's owner is gone (its
 * watch says so) and it is the endpoint's peer, the endpoint fails and the
 * post with UCS_ERR_CONNECTION_RESET; else @a status */
ucs_status_t uct_cuda_ipc_ns_lane_post_failed(uct_cuda_ipc_ns_ep_t *ep,
                                              uct_cuda_ipc_ns_cache_peer_t *peer,
                                              ucs_status_t status);

/* The endpoint goes: its failure report, if queued, is dropped */
void uct_cuda_ipc_ns_lane_cleanup(uct_cuda_ipc_ns_ep_t *ep);

#endif
