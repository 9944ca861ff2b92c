/*
 * cuda_ipc_ns: the broker's serving loop (docs/security.md, "Broker
 * (server)").
 *
 * One thread polls the wake-up pipe (shutdown), the listening socket and
 * the accepted connections, all nonblocking: it never blocks on a client.
 * A connection carries one request; it is refused at accept when its uid is
 * not allowed, and closed once answered, when its request deadline passes,
 * or, oldest first, when the table is full and a new client arrives. The
 * listening socket is always polled, except for a back-off after accept
 * failed for want of fds or memory (then an idle connection is closed for
 * room only when a client waits); each round serves every ready connection
 * once and accepts a bounded batch, so no client holds the thread.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_SERVE_H
#define UCT_CUDA_IPC_NS_BROKER_SERVE_H

#include "cuda_ipc_ns_broker_registry.h"
#include "cuda_ipc_ns_broker_copy.h"

#include <ucs/datastruct/khash.h>
#include <ucs/time/time.h>
#include <pthread.h>
#include <sys/types.h>


/* Connections read concurrently; the oldest is evicted for a new one */
#define UCT_CUDA_IPC_NS_BROKER_MAX_CONNS     64


KHASH_SET_INIT_INT(uct_cuda_ipc_ns_broker_peers)


typedef struct uct_cuda_ipc_ns_broker_serve_conn {
    int        fd;
    pid_t      pid;        /* SO_PEERCRED, for logs */
    ucs_time_t deadline;   /* closed when no request by then */
} uct_cuda_ipc_ns_broker_serve_conn_t;


/* Requests the brokers of this process served (for tests and benchmarks) */
typedef struct uct_cuda_ipc_ns_broker_serve_stats {
    uint64_t layout_requests;    /* LAYOUT */
    uint64_t chunk_fds_requests; /* GET_CHUNK_FDS: one round trip each */
    uint64_t chunk_fds_sent;     /* fds those requests were answered with */
    uint64_t accept_failures;    /* accept() out of fds or memory */
    uint64_t copies;             /* COPY requests launched by the copiers */
} uct_cuda_ipc_ns_broker_serve_stats_t;


typedef struct uct_cuda_ipc_ns_broker_serve_state {
    /* set before the thread starts */
    const char                        *name;      /* printable address */
    int                               listen_fd;
    int                               wake_fd;    /* readable: stop */
    uct_cuda_ipc_ns_broker_registry_t *registry;
    uid_t                             uid;
    int                               allowed_uid;
    int                               userns_peers; /* cuda_ipc_ns_userns.h */
    ucs_time_t                        req_timeout;

    /* used only by the thread */
    khash_t(uct_cuda_ipc_ns_broker_peers) logged_peers;
    int                               logged_overflow;
    int                               accept_failing;
    int                               logged_accept_failure; /* once */
    ucs_time_t                        accept_backoff;
    ucs_time_t                        accept_resume; /* listen again then */
    /* started by the first COPY request (docs/owner-copies.md) */
    uct_cuda_ipc_ns_broker_copy_t   *copier;
    unsigned                          num_conns;     /* oldest first */
    uct_cuda_ipc_ns_broker_serve_conn_t     conns[UCT_CUDA_IPC_NS_BROKER_MAX_CONNS];

    /* accepted connections not closed yet, for _wait_idle() */
    pthread_mutex_t                   conns_lock;
    pthread_cond_t                    conns_cond;
    unsigned                          open_conns;
} uct_cuda_ipc_ns_broker_serve_t;


void uct_cuda_ipc_ns_broker_serve_init(uct_cuda_ipc_ns_broker_serve_t *server,
                                       const char *name, int listen_fd,
                                       int wake_fd,
                                       uct_cuda_ipc_ns_broker_registry_t *registry,
                                       int allowed_uid, int userns_peers,
                                       double req_timeout);


/* After the thread ended: stop the copier, if one started */
void uct_cuda_ipc_ns_broker_serve_cleanup(uct_cuda_ipc_ns_broker_serve_t *server);


/* The thread: serve until the wake-up fd is readable, then close every
 * connection */
void *uct_cuda_ipc_ns_broker_serve_run(void *arg);


/* What the brokers of this process served so far */
void uct_cuda_ipc_ns_broker_serve_get_stats(uct_cuda_ipc_ns_broker_serve_stats_t *stats);


/* Return once every accepted connection is closed */
void uct_cuda_ipc_ns_broker_serve_wait_idle(uct_cuda_ipc_ns_broker_serve_t *server);

#endif
