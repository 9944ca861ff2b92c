/*
 * cuda_ipc_ns: what the lanes share of an endpoint (see cuda_ipc_ns_lane.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_lane.h"
#include "cuda_ipc_ns_compat.h"

#include <uct/base/uct_iface.h>


static unsigned uct_cuda_ipc_ns_lane_err_progress(void *arg)
{
    uct_cuda_ipc_ns_ep_t *ep = arg;

    uct_iface_handle_ep_err(ep->super.super.super.iface, &ep->super.super.super,
                            UCS_ERR_CONNECTION_RESET);
    return 1;
}


static int uct_cuda_ipc_ns_lane_is_err_cb(const ucs_callbackq_elem_t *elem,
                                          void *arg)
{
    return (elem->cb == uct_cuda_ipc_ns_lane_err_progress) && (elem->arg == arg);
}


void uct_cuda_ipc_ns_lane_set_failed(uct_cuda_ipc_ns_ep_t *ep)
{
    uct_cuda_ipc_ns_iface_t *iface = uct_cuda_ipc_ns_lane_iface(ep);

    if (ep->failed) {
        return;
    }

    ep->failed = 1;
    ucs_debug("cuda_ipc_ns: ep %p: peer pid %u (PID namespace %" PRIu64
              ") failed", ep, ep->super.remote_iface.pid,
              ep->super.remote_iface.pid_ns);
    uct_cuda_ipc_ns_compat_oneshot_add(
            &iface->super.super.worker->super.progress_q, ep,
            uct_cuda_ipc_ns_lane_err_progress, ep);
}


void uct_cuda_ipc_ns_lane_cleanup(uct_cuda_ipc_ns_ep_t *ep)
{
    uct_cuda_ipc_ns_compat_oneshot_remove(
            &uct_cuda_ipc_ns_lane_iface(ep)->super.super.worker->super.progress_q,
            ep, uct_cuda_ipc_ns_lane_is_err_cb, ep);
}


ucs_status_t uct_cuda_ipc_ns_lane_key_peer(uct_cuda_ipc_ns_ep_t *ep,
                                           uct_cuda_ipc_ns_md_rkey_t *key,
                                           uct_cuda_ipc_ns_cache_peer_t **peer_p)
{
    const uct_cuda_ipc_ns_nsid_identity_t *id = uct_cuda_ipc_ns_cache_peer_id(ep->peer);
    uct_cuda_ipc_ns_nsid_identity_t key_id;

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


ucs_status_t uct_cuda_ipc_ns_lane_post_failed(uct_cuda_ipc_ns_ep_t *ep,
                                              uct_cuda_ipc_ns_cache_peer_t *peer,
                                              ucs_status_t status)
{
    if ((uct_cuda_ipc_ns_cache_peer_check(peer) != UCS_OK) &&
        (peer == ep->peer)) {
        uct_cuda_ipc_ns_lane_set_failed(ep);
        return UCS_ERR_CONNECTION_RESET;
    }
    return status;
}
