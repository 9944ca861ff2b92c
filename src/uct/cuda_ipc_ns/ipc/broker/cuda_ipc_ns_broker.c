/*
 * cuda_ipc_ns: per-process fd broker (see cuda_ipc_ns_broker.h).
 *
 * Served by a dedicated thread, not by the UCS async context: the broker
 * must answer while the owner is busy in its own code (or blocked in a
 * collective) and never calls progress, and a slow or hostile requester must
 * not delay UCX's async handlers. Its parts: the listening socket
 * (cuda_ipc_ns_broker_sock.h), the registry of exported fds
 * (cuda_ipc_ns_broker_registry.h) and the serving loop
 * (cuda_ipc_ns_broker_serve.h); this file starts, shares and stops them.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_broker_serve.h"
#include "cuda_ipc_ns_broker_sock.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>

#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>


struct uct_cuda_ipc_ns_broker {
    pid_t                             owner_pid;  /* process that started it */
    unsigned                          refcount;   /* under the global lock */
    uct_cuda_ipc_ns_broker_sock_t     sock;
    int                               wake_fds[2];
    /* to recognize inherited fds after fork: listening socket, socket
     * directory, wake-up pipe */
    ino_t                             inherited_ino[3];
    pthread_t                         thread;
    uct_cuda_ipc_ns_broker_registry_t registry;
    uct_cuda_ipc_ns_broker_serve_t   server;
};


static pthread_mutex_t uct_cuda_ipc_ns_broker_global_lock =
        PTHREAD_MUTEX_INITIALIZER;
static uct_cuda_ipc_ns_broker_t *uct_cuda_ipc_ns_broker_global = NULL;


static ino_t uct_cuda_ipc_ns_broker_fd_ino(int fd)
{
    struct stat st;

    return ((fd >= 0) && (fstat(fd, &st) == 0)) ? st.st_ino : 0;
}


/* The thread that serves @a broker; it takes no signals: they belong to the
 * application */
static ucs_status_t
uct_cuda_ipc_ns_broker_start_thread(uct_cuda_ipc_ns_broker_t *broker)
{
    sigset_t all, saved;
    int ret;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    ret = pthread_create(&broker->thread, NULL,
                         uct_cuda_ipc_ns_broker_serve_run, &broker->server);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (ret != 0) {
        ucs_error("cuda_ipc_ns: failed to start the broker thread: %s",
                  strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    /* "cuda_ipc_ns_brk" in ps/top, and for tests that measure its CPU time */
    (void)pthread_setname_np(broker->thread, "cuda_ipc_ns_brk");
    return UCS_OK;
}


static ucs_status_t uct_cuda_ipc_ns_broker_create(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                                  uct_cuda_ipc_ns_broker_t **broker_p)
{
    double req_timeout = (cfg->req_timeout > 0) ? cfg->req_timeout : 0.5;
    uct_cuda_ipc_ns_broker_t *broker;
    ucs_status_t status;

    broker = ucs_calloc(1, sizeof(*broker), "cuda_ipc_ns_broker");
    if (broker == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate the broker");
        return UCS_ERR_NO_MEMORY;
    }

    broker->owner_pid = getpid();
    broker->refcount  = 1;
    uct_cuda_ipc_ns_broker_registry_init(&broker->registry);

    status = uct_cuda_ipc_ns_broker_sock_listen(&broker->sock,
                                                broker->owner_pid,
                                                cfg->sock_dir);
    if (status != UCS_OK) {
        goto err_free;
    }

    if (pipe2(broker->wake_fds, O_CLOEXEC | O_NONBLOCK) < 0) {
        ucs_error("cuda_ipc_ns: broker pipe2() failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err_close_sock;
    }
    broker->inherited_ino[0] = uct_cuda_ipc_ns_broker_fd_ino(broker->sock.fd);
    broker->inherited_ino[1] = uct_cuda_ipc_ns_broker_fd_ino(broker->sock.dir_fd);
    broker->inherited_ino[2] = uct_cuda_ipc_ns_broker_fd_ino(broker->wake_fds[0]);

    uct_cuda_ipc_ns_broker_serve_init(&broker->server, broker->sock.name,
                                      broker->sock.fd, broker->wake_fds[0],
                                      &broker->registry, cfg->allowed_uid,
                                      cfg->userns_peers,
                                      req_timeout);

    status = uct_cuda_ipc_ns_broker_start_thread(broker);
    if (status != UCS_OK) {
        goto err_cleanup_server;
    }

    ucs_debug("cuda_ipc_ns: pid %d started broker %s (request timeout %.3f "
              "s, uid %u, extra allowed uid %d)", (int)broker->owner_pid,
              broker->sock.name, req_timeout, (unsigned)geteuid(),
              cfg->allowed_uid);
    *broker_p = broker;
    return UCS_OK;

err_cleanup_server:
    uct_cuda_ipc_ns_broker_serve_cleanup(&broker->server);
    close(broker->wake_fds[0]);
    close(broker->wake_fds[1]);
err_close_sock:
    uct_cuda_ipc_ns_broker_sock_close(&broker->sock);
err_free:
    uct_cuda_ipc_ns_broker_registry_cleanup(&broker->registry, "(none)");
    ucs_free(broker);
    return status;
}


static void uct_cuda_ipc_ns_broker_destroy(uct_cuda_ipc_ns_broker_t *broker)
{
    ssize_t ret;
    char c = 0;

    do {
        ret = write(broker->wake_fds[1], &c, 1);
    } while ((ret < 0) && (errno == EINTR));
    if (ret < 0) {
        ucs_error("cuda_ipc_ns: broker %s: cannot wake the thread: %m",
                  broker->sock.name);
    }
    pthread_join(broker->thread, NULL);

    uct_cuda_ipc_ns_broker_serve_cleanup(&broker->server);
    close(broker->wake_fds[0]);
    close(broker->wake_fds[1]);
    ucs_debug("cuda_ipc_ns: broker %s destroyed", broker->sock.name);
    uct_cuda_ipc_ns_broker_registry_cleanup(&broker->registry,
                                            broker->sock.name);
    uct_cuda_ipc_ns_broker_sock_close(&broker->sock);
    ucs_free(broker);
}


static void uct_cuda_ipc_ns_broker_close_inherited(int fd, ino_t ino)
{
    /* close only if the number still holds the inherited object */
    if ((fd >= 0) && (ino != 0) && (uct_cuda_ipc_ns_broker_fd_ino(fd) == ino)) {
        close(fd);
    }
}


/*
 * A forked child inherits the parent's broker object but not its thread.
 * Drop the inherited fds (the listening socket must not stay referenced by
 * the child) and leave the memory alone: its lock and table may have been
 * caught mid-update by the fork.
 */
static void uct_cuda_ipc_ns_broker_abandon(uct_cuda_ipc_ns_broker_t *broker)
{
    ucs_debug("cuda_ipc_ns: pid %d: not using broker %s inherited from "
              "pid %d", (int)getpid(), broker->sock.name,
              (int)broker->owner_pid);
    uct_cuda_ipc_ns_broker_close_inherited(broker->sock.fd,
                                           broker->inherited_ino[0]);
    uct_cuda_ipc_ns_broker_close_inherited(broker->sock.dir_fd,
                                           broker->inherited_ino[1]);
    uct_cuda_ipc_ns_broker_close_inherited(broker->wake_fds[0],
                                           broker->inherited_ino[2]);
    uct_cuda_ipc_ns_broker_close_inherited(broker->wake_fds[1],
                                           broker->inherited_ino[2]);
}


ucs_status_t uct_cuda_ipc_ns_broker_get(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                        uct_cuda_ipc_ns_broker_t **broker_p)
{
    uct_cuda_ipc_ns_broker_t *broker;
    ucs_status_t status;
    int want_pathname;

    pthread_mutex_lock(&uct_cuda_ipc_ns_broker_global_lock);
    broker = uct_cuda_ipc_ns_broker_global;
    if ((broker != NULL) && (broker->owner_pid != getpid())) {
        uct_cuda_ipc_ns_broker_abandon(broker);
        uct_cuda_ipc_ns_broker_global = broker = NULL;
    }

    if (broker != NULL) {
        want_pathname = (cfg->sock_dir != NULL) && (cfg->sock_dir[0] != '\0');
        if (want_pathname != (broker->sock.dir_fd >= 0)) {
            ucs_diag("cuda_ipc_ns: fd broker %s is already running; socket "
                     "directory '%s' is ignored", broker->sock.name,
                     (cfg->sock_dir != NULL) ? cfg->sock_dir : "");
        }
        ++broker->refcount;
        status = UCS_OK;
    } else {
        status = uct_cuda_ipc_ns_broker_create(cfg, &broker);
        if (status == UCS_OK) {
            uct_cuda_ipc_ns_broker_global = broker;
        }
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_broker_global_lock);

    if (status == UCS_OK) {
        *broker_p = broker;
    }
    return status;
}


void uct_cuda_ipc_ns_broker_put(uct_cuda_ipc_ns_broker_t *broker)
{
    int destroy = 0;

    pthread_mutex_lock(&uct_cuda_ipc_ns_broker_global_lock);
    if (broker->owner_pid != getpid()) {
        /* the parent's broker, reached through an inherited object */
        pthread_mutex_unlock(&uct_cuda_ipc_ns_broker_global_lock);
        return;
    }

    ucs_assert(broker->refcount > 0);
    if (--broker->refcount == 0) {
        if (uct_cuda_ipc_ns_broker_global == broker) {
            uct_cuda_ipc_ns_broker_global = NULL;
        }
        destroy = 1;
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_broker_global_lock);

    if (destroy) {
        uct_cuda_ipc_ns_broker_destroy(broker);
    }
}


const char *uct_cuda_ipc_ns_broker_addr(uct_cuda_ipc_ns_broker_t *broker,
                                        uint8_t *len_p)
{
    *len_p = broker->sock.addr_len;
    return broker->sock.addr;
}


ucs_status_t uct_cuda_ipc_ns_broker_register(uct_cuda_ipc_ns_broker_t *broker,
                                             int fd, uint64_t alloc_id,
                                             uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                             uct_cuda_ipc_ns_broker_registry_reg_t **reg_p)
{
    ucs_status_t status;

    if (fd < 0) {
        ucs_error("cuda_ipc_ns: broker %s: cannot register fd %d",
                  broker->sock.name, fd);
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_cuda_ipc_ns_broker_registry_add(&broker->registry, fd,
                                                 alloc_id, token, reg_p);
    if (status == UCS_OK) {
        ucs_trace("cuda_ipc_ns: broker %s: registered fd %d alloc_id 0x%"
                  PRIx64, broker->sock.name, fd, alloc_id);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_broker_register_chunks(uct_cuda_ipc_ns_broker_t *broker,
                                                    uint64_t reg_id, uint64_t base,
                                                    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                                    uint32_t num_chunks,
                                                    uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                                    uct_cuda_ipc_ns_broker_registry_reg_t **reg_p)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_broker_registry_add_chunks(&broker->registry,
                                                        reg_id, base, chunks,
                                                        num_chunks, token,
                                                        reg_p);
    if (status == UCS_OK) {
        ucs_trace("cuda_ipc_ns: broker %s: registered %u chunks at 0x%"
                  PRIx64 " as 0x%" PRIx64, broker->sock.name, num_chunks,
                  base, reg_id);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_broker_register_range(uct_cuda_ipc_ns_broker_t *broker,
                                                   uint64_t reg_id, uint64_t base,
                                                   uint64_t length, CUcontext ctx,
                                                   int device,
                                                   uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                                   uct_cuda_ipc_ns_broker_registry_reg_t **reg_p)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_broker_registry_add_range(&broker->registry,
                                                       reg_id, base, length,
                                                       ctx, device, token,
                                                       reg_p);
    if (status == UCS_OK) {
        ucs_trace("cuda_ipc_ns: broker %s: registered 0x%" PRIx64 "/%" PRIu64
                  " for copies as 0x%" PRIx64, broker->sock.name, base,
                  length, reg_id);
    }
    return status;
}


void uct_cuda_ipc_ns_broker_unregister(uct_cuda_ipc_ns_broker_t *broker,
                                       uct_cuda_ipc_ns_broker_registry_reg_t *reg)
{
    uct_cuda_ipc_ns_broker_registry_remove(&broker->registry, reg);
}


void uct_cuda_ipc_ns_broker_wait_idle(void)
{
    uct_cuda_ipc_ns_broker_t *broker;

    /* the thread never takes the global lock: holding it keeps the broker */
    pthread_mutex_lock(&uct_cuda_ipc_ns_broker_global_lock);
    broker = uct_cuda_ipc_ns_broker_global;
    if ((broker != NULL) && (broker->owner_pid == getpid())) {
        uct_cuda_ipc_ns_broker_serve_wait_idle(&broker->server);
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_broker_global_lock);
}
