/*
 * cuda_ipc_ns: liveness of the mapping cache's peers (see
 * cuda_ipc_ns_liveness.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_liveness.h"
#include "cuda_ipc_ns_watch.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>

#include <inttypes.h>
#include <sched.h>
#include <unistd.h>


void uct_cuda_ipc_ns_liveness_init(uct_cuda_ipc_ns_liveness_t *live,
                                   uct_cuda_ipc_ns_liveness_set_t *set,
                                   const uct_cuda_ipc_ns_nsid_identity_t *id)
{
    live->set   = set;
    live->id    = id;
    live->fd    = -1;
    live->async = 0;
}


int uct_cuda_ipc_ns_liveness_open(uct_cuda_ipc_ns_liveness_t *live)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    const uct_cuda_ipc_ns_nsid_identity_t *id   = live->id;

    if ((id->pid_ns != self->pid_ns) || (id->start_time == 0) ||
        (id->system_id != self->system_id)) {
        return 0; /* not here: the first import from its broker may tell */
    }

    if (uct_cuda_ipc_ns_watch_pid(id->pid, id->start_time, &live->fd) !=
        UCS_OK) {
        ucs_debug("cuda_ipc_ns: cannot watch peer pid %u", id->pid);
        live->fd = -1;
    }
    return live->fd >= 0;
}


/* Drop the async handler's reference: a peer it leaves unreferenced waits
 * on the reap list */
static void uct_cuda_ipc_ns_liveness_put_async(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_liveness_set_t *set = live->set;

    pthread_mutex_lock(set->lock);
    if (set->ops->drop(live)) {
        ucs_list_add_tail(&set->reap, &live->reap);
    }
    pthread_mutex_unlock(set->lock);
}


/*
 * The peer's pidfd turned readable: it exited. Runs on UCX's async thread,
 * so that a peer nobody asks about any more (its endpoint destroyed while
 * its exit was not yet reported, no later op or import) still has its
 * mappings released (docs/architecture.md, "Peer failure").
 */
static void uct_cuda_ipc_ns_liveness_cb(int fd, ucs_event_set_types_t events,
                                        void *arg)
{
    uct_cuda_ipc_ns_liveness_t *live    = arg;
    uct_cuda_ipc_ns_liveness_set_t *set = live->set;
    int alive;

    pthread_mutex_lock(set->lock);
    alive = set->ops->hold(live);
    pthread_mutex_unlock(set->lock);
    if (!alive) {
        return; /* being destroyed: its removal of this handler waits */
    }

    if (uct_cuda_ipc_ns_watch_exited(fd)) {
        set->ops->exited(live);
    }
    uct_cuda_ipc_ns_liveness_put_async(live);
}


void uct_cuda_ipc_ns_liveness_start(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_liveness_set_t *set = live->set;
    ucs_status_t status;

    status = ucs_async_set_event_handler(UCS_ASYNC_MODE_THREAD_MUTEX,
                                         live->fd,
                                         UCS_EVENT_SET_EVREAD |
                                         UCS_EVENT_SET_EDGE_TRIGGERED,
                                         uct_cuda_ipc_ns_liveness_cb, live,
                                         NULL);
    if (status != UCS_OK) {
        /* the checks at each op, endpoint and import still read it */
        ucs_diag("cuda_ipc_ns: cannot watch peer pid %u on UCX's async "
                 "loop (ucs_async_set_event_handler: %s): its mappings go "
                 "at the next use of that peer", live->id->pid,
                 ucs_status_string(status));
        return;
    }

    pthread_mutex_lock(set->lock);
    live->async = 1;
    ucs_list_add_tail(&set->watched, &live->watched);
    pthread_mutex_unlock(set->lock);
}


void uct_cuda_ipc_ns_liveness_adopt(uct_cuda_ipc_ns_liveness_t *live, int fd)
{
    if (fd < 0) {
        return;
    }

    pthread_mutex_lock(live->set->lock);
    if (live->fd < 0) {
        __atomic_store_n(&live->fd, fd, __ATOMIC_RELEASE);
        fd = -1;
        ucs_debug("cuda_ipc_ns: watching peer pid %u (PID namespace %" PRIu64
                  ") through its broker", live->id->pid, live->id->pid_ns);
    }
    pthread_mutex_unlock(live->set->lock);

    if (fd >= 0) {
        close(fd);
    } else {
        uct_cuda_ipc_ns_liveness_start(live);
    }
}


int uct_cuda_ipc_ns_liveness_exited(uct_cuda_ipc_ns_liveness_t *live)
{
    int exited;

    pthread_mutex_lock(live->set->lock);
    exited = (live->fd >= 0) && uct_cuda_ipc_ns_watch_exited(live->fd);
    pthread_mutex_unlock(live->set->lock);
    return exited;
}


/*
 * Take the pidfd off UCX's async loop, if still on it (the peer's own
 * destruction and the module's unload race for it). Waits for a call of the
 * handler in progress, so never called from the handler (see
 * uct_cuda_ipc_ns_liveness_put_async()); called without the lock, which the
 * handler takes.
 */
static void uct_cuda_ipc_ns_liveness_unwatch(uct_cuda_ipc_ns_liveness_t *live)
{
    int watched;

    pthread_mutex_lock(live->set->lock);
    watched = live->async;
    if (watched) {
        live->async = 0;
        ucs_list_del(&live->watched);
    }
    pthread_mutex_unlock(live->set->lock);

    if (watched) {
        ucs_async_remove_handler(live->fd, 1);
    }
}


void uct_cuda_ipc_ns_liveness_close(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_liveness_unwatch(live);
    if (live->fd >= 0) {
        close(live->fd);
        live->fd = -1;
    }
}


void uct_cuda_ipc_ns_liveness_reap(uct_cuda_ipc_ns_liveness_set_t *set)
{
    uct_cuda_ipc_ns_liveness_t *live, *tmp;
    UCS_LIST_HEAD(dead);

    pthread_mutex_lock(set->lock);
    ucs_list_splice_tail(&dead, &set->reap);
    ucs_list_head_init(&set->reap);
    pthread_mutex_unlock(set->lock);

    ucs_list_for_each_safe(live, tmp, &dead, reap) {
        set->ops->destroy(live);
    }
}


void uct_cuda_ipc_ns_liveness_unwatch_all(uct_cuda_ipc_ns_liveness_set_t *set,
                                          const unsigned *users,
                                          const char *why)
{
    uct_cuda_ipc_ns_liveness_t *live;

    for (;;) {
        uct_cuda_ipc_ns_liveness_reap(set);
        pthread_mutex_lock(set->lock);
        if (ucs_list_is_empty(&set->watched) ||
            ((users != NULL) && (*users > 0))) {
            pthread_mutex_unlock(set->lock);
            return;
        }
        live = ucs_list_head(&set->watched, uct_cuda_ipc_ns_liveness_t,
                             watched);
        if (!set->ops->hold(live)) {
            /* on its way to destruction (reap list): the next turn, or the
             * thread that reaped it, takes it off */
            pthread_mutex_unlock(set->lock);
            sched_yield();
            continue;
        }
        /* the reference makes it outlive its unwatching */
        pthread_mutex_unlock(set->lock);

        ucs_debug("cuda_ipc_ns: %s: no more watching peer pid %u", why,
                  live->id->pid);
        uct_cuda_ipc_ns_liveness_unwatch(live);
        set->ops->put(live);
    }
}
