/*
 * cuda_ipc_ns: liveness of the mapping cache's peers (docs/architecture.md,
 * "Peer failure").
 *
 * Each peer's pidfd (cuda_ipc_ns_watch.h) is polled by every check and put
 * on UCX's async loop, so that a peer that exits while nothing asks about it
 * still has its mappings released. A peer whose last reference goes on
 * UCX's async thread waits on the set's reap list for an application
 * thread to destroy it: removing the last handler of UCX's async loop joins
 * its thread, which that thread cannot do itself.
 *
 * The set shares the cache's lock, which guards every field below; the
 * cache lends its peers through the set's operations.
 */
#ifndef UCT_CUDA_IPC_NS_LIVENESS_H
#define UCT_CUDA_IPC_NS_LIVENESS_H

#include "cuda_ipc_ns_nsid.h"

#include <ucs/datastruct/list.h>
#include <pthread.h>


typedef struct uct_cuda_ipc_ns_liveness uct_cuda_ipc_ns_liveness_t;


/* What the set asks of the peer that embeds a liveness */
typedef struct uct_cuda_ipc_ns_liveness_ops {
    /* with the lock: take a reference unless the last one went (0) */
    int  (*hold)(uct_cuda_ipc_ns_liveness_t *live);
    /* with the lock: drop a reference; 1 when it was the last, the peer
     * then out of the cache's table */
    int  (*drop)(uct_cuda_ipc_ns_liveness_t *live);
    /* without the lock: drop a reference, destroying on the last */
    void (*put)(uct_cuda_ipc_ns_liveness_t *live);
    /* without the lock: the peer exited */
    void (*exited)(uct_cuda_ipc_ns_liveness_t *live);
    /* without the lock: destroy an unreferenced peer */
    void (*destroy)(uct_cuda_ipc_ns_liveness_t *live);
} uct_cuda_ipc_ns_liveness_ops_t;


typedef struct uct_cuda_ipc_ns_liveness_set {
    pthread_mutex_t                      *lock;  /* the cache's */
    const uct_cuda_ipc_ns_liveness_ops_t *ops;
    /* peers whose pidfd is on UCX's async loop, in or out of the table */
    ucs_list_link_t                      watched;
    /* peers whose last reference went on UCX's async thread */
    ucs_list_link_t                      reap;
} uct_cuda_ipc_ns_liveness_set_t;


#define UCT_CUDA_IPC_NS_LIVENESS_SET_INITIALIZER(_set, _lock, _ops) \
    { \
        .lock    = (_lock), \
        .ops     = (_ops), \
        .watched = UCS_LIST_INITIALIZER(&(_set).watched, &(_set).watched), \
        .reap    = UCS_LIST_INITIALIZER(&(_set).reap, &(_set).reap) \
    }


struct uct_cuda_ipc_ns_liveness {
    uct_cuda_ipc_ns_liveness_set_t        *set;
    const uct_cuda_ipc_ns_nsid_identity_t *id;    /* the peer's */
    int                                   fd;     /* pidfd, -1: none yet */
    int                                   async;  /* fd is on UCX's async loop */
    ucs_list_link_t                       watched; /* in set->watched */
    ucs_list_link_t                       reap;    /* in set->reap */
};


void uct_cuda_ipc_ns_liveness_init(uct_cuda_ipc_ns_liveness_t *live,
                                   uct_cuda_ipc_ns_liveness_set_t *set,
                                   const uct_cuda_ipc_ns_nsid_identity_t *id);

/**
 * With the lock, for a new peer: open its pidfd when it lives in our PID
 * namespace and its start time is known (else the first import from its
 * broker may tell). Returns whether it has one: then call
 * uct_cuda_ipc_ns_liveness_start() once the lock is released.
 */
int uct_cuda_ipc_ns_liveness_open(uct_cuda_ipc_ns_liveness_t *live);

/**
 * Put the pidfd on UCX's async loop, edge-triggered: one call when the peer
 * exits. Without the lock (the handler takes it, and adding a handler waits
 * for the async thread), by a thread that holds a reference.
 */
void uct_cuda_ipc_ns_liveness_start(uct_cuda_ipc_ns_liveness_t *live);

/* Take @a fd (a checked pidfd of the peer, or -1) unless the peer has one;
 * without the lock */
void uct_cuda_ipc_ns_liveness_adopt(uct_cuda_ipc_ns_liveness_t *live, int fd);

/* Whether the peer is known to have exited (a poll of its pidfd); without
 * the lock */
int uct_cuda_ipc_ns_liveness_exited(uct_cuda_ipc_ns_liveness_t *live);

/* Take the pidfd off UCX's async loop and close it, for the peer's
 * destruction; without the lock, never from the handler */
void uct_cuda_ipc_ns_liveness_close(uct_cuda_ipc_ns_liveness_t *live);

/* Destroy the peers on the reap list; without the lock, not from UCX's
 * async thread */
void uct_cuda_ipc_ns_liveness_reap(uct_cuda_ipc_ns_liveness_set_t *set);

/**
 * Take every peer's pidfd off UCX's async loop (@a why: for the log); with
 * @a users, only while *users (read with the lock) stays 0. Returns once no
 * call of the handler runs and the dead peers are destroyed; the live ones
 * stay, unwatched (their next use still checks them).
 */
void uct_cuda_ipc_ns_liveness_unwatch_all(uct_cuda_ipc_ns_liveness_set_t *set,
                                          const unsigned *users,
                                          const char *why);

#endif
