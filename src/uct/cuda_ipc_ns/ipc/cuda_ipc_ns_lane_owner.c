/*
 * cuda_ipc_ns: the owner's lane (see cuda_ipc_ns_lane_owner.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_lane_owner.h"
#include "cuda_ipc_ns_copies.h"

#include <ucs/debug/log.h>
#include <inttypes.h>


/* What every post on this lane does first: the endpoint's checks, then the
 * fence rule, by which it waits (as pending) for the ops before a fence */
static ucs_status_t
uct_cuda_ipc_ns_lane_owner_begin(uct_cuda_ipc_ns_ep_t *ep,
                                 const uct_cuda_ipc_ns_md_rkey_t *key,
                                 uint64_t remote_addr, size_t length)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_lane_check(ep, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }

    if (uct_cuda_ipc_ns_lane_fenced(ep, UCT_CUDA_IPC_NS_OP_OWNER)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}


/* The post of @a what ended with @a status */
static ucs_status_t
uct_cuda_ipc_ns_lane_owner_end(uct_cuda_ipc_ns_ep_t *ep,
                               uct_cuda_ipc_ns_md_rkey_t *key, ucs_status_t status,
                               const char *what, size_t length,
                               uint64_t remote_addr)
{
    uct_cuda_ipc_ns_cache_peer_t *peer;

    if ((status == UCS_INPROGRESS) || (status == UCS_OK)) {
        ucs_trace_data("cuda_ipc_ns: ep %p %s %zu bytes remote 0x%" PRIx64
                       " by its owner", ep, what, length, remote_addr);
        return status;
    } else if (status == UCS_ERR_NO_RESOURCE) {
        ep->must_wait = 1;
        return status;
    } else if ((status == UCS_ERR_UNSUPPORTED) ||
               (status == UCS_ERR_INVALID_PARAM)) {
        return status; /* the local buffer: logged */
    }

    /* no session, or it broke: the owner may be gone, ask its watch */
    if (uct_cuda_ipc_ns_lane_key_peer(ep, key, &peer) == UCS_OK) {
        status = uct_cuda_ipc_ns_lane_post_failed(ep, peer, status);
    }
    return status;
}


static ucs_status_t
uct_cuda_ipc_ns_lane_owner_zcopy(uct_cuda_ipc_ns_ep_t *ep,
                                 uct_cuda_ipc_ns_md_rkey_t *key,
                                 const uct_iov_t *iov, size_t iovcnt,
                                 size_t length, uint64_t remote_addr,
                                 uct_completion_t *comp, int is_put)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_lane_owner_begin(ep, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_copies_post(&uct_cuda_ipc_ns_lane_iface(ep)->copies,
                                         &ep->ops, &key->info,
                                         key->owner_gpu_usable, iov, iovcnt,
                                         remote_addr, is_put, comp);
    return uct_cuda_ipc_ns_lane_owner_end(ep, key, status,
                                          is_put ? "put" : "get", length,
                                          remote_addr);
}


/* Put short/bcopy: the data into the staging ring before this returns */
static ucs_status_t
uct_cuda_ipc_ns_lane_owner_put_now(uct_cuda_ipc_ns_ep_t *ep,
                                   uct_cuda_ipc_ns_md_rkey_t *key,
                                   const void *buffer, size_t length,
                                   uint64_t remote_addr)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_lane_owner_begin(ep, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_copies_put_now(
            &uct_cuda_ipc_ns_lane_iface(ep)->copies, &ep->ops, &key->info,
            key->owner_gpu_usable, buffer, length, remote_addr);
    return uct_cuda_ipc_ns_lane_owner_end(ep, key, status, "put (staged)",
                                          length, remote_addr);
}


/* Get bcopy: through the staging ring, unpacked when it came */
static ucs_status_t
uct_cuda_ipc_ns_lane_owner_get_bcopy(uct_cuda_ipc_ns_ep_t *ep,
                                     uct_cuda_ipc_ns_md_rkey_t *key,
                                     uct_unpack_callback_t unpack_cb,
                                     void *arg, size_t length,
                                     uint64_t remote_addr,
                                     uct_completion_t *comp)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_lane_owner_begin(ep, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_copies_get_unpack(
            &uct_cuda_ipc_ns_lane_iface(ep)->copies, &ep->ops, &key->info,
            key->owner_gpu_usable, length, remote_addr, unpack_cb, arg, comp);
    return uct_cuda_ipc_ns_lane_owner_end(ep, key, status, "get (staged)",
                                          length, remote_addr);
}


const uct_cuda_ipc_ns_lane_ops_t uct_cuda_ipc_ns_lane_owner_ops = {
    .zcopy     = uct_cuda_ipc_ns_lane_owner_zcopy,
    .put_now   = uct_cuda_ipc_ns_lane_owner_put_now,
    .get_bcopy = uct_cuda_ipc_ns_lane_owner_get_bcopy
};
