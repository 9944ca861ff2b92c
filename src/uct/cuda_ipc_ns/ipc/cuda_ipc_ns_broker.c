/*
 * cuda_ipc_ns: per-process fd broker (see cuda_ipc_ns_broker.h).
 *
 * Served by a dedicated thread, not by the UCS async context: the broker
 * must answer while the owner is busy in its own code (or blocked in a
 * collective) and never calls progress, and a slow or hostile requester must
 * not delay UCX's async handlers. The thread polls the listening socket, a
 * wake-up pipe (shutdown) and up to UCT_CUDA_IPC_NS_BROKER_MAX_CONNS accepted
 * connections, all nonblocking, each with a deadline: it never blocks on a
 * client.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_scm.h"

#include <ucs/datastruct/khash.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/time/time.h>

#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


/* Connections read concurrently; beyond that the kernel backlog waits */
#define UCT_CUDA_IPC_NS_BROKER_MAX_CONNS     64
#define UCT_CUDA_IPC_NS_BROKER_BACKLOG       64
/* Refused peers remembered to log each once; bounds memory under a flood */
#define UCT_CUDA_IPC_NS_BROKER_MAX_LOGGED    4096


struct uct_cuda_ipc_ns_broker_reg {
    uct_cuda_ipc_ns_broker_reg_t *next;    /* same alloc_id */
    uint64_t                     alloc_id;
    int                          fd;       /* borrowed from the caller */
    uint8_t                      token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
};


KHASH_MAP_INIT_INT64(uct_cuda_ipc_ns_broker_regs, uct_cuda_ipc_ns_broker_reg_t*)
KHASH_SET_INIT_INT(uct_cuda_ipc_ns_broker_peers)


typedef struct {
    int        fd;
    pid_t      pid;        /* SO_PEERCRED, for logs */
    ucs_time_t deadline;   /* close when no request by then */
} uct_cuda_ipc_ns_broker_conn_t;


struct uct_cuda_ipc_ns_broker {
    pid_t           owner_pid;  /* process that started it */
    unsigned        refcount;   /* under the global lock */
    int             listen_fd;
    int             wake_fds[2];
    ino_t           listen_ino; /* to recognize inherited fds after fork */
    ino_t           wake_ino;
    pthread_t       thread;
    double          timeout;
    uid_t           uid;
    int             allowed_uid;
    int             is_pathname;
    uint8_t         addr_len;
    char            addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    char            name[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 2]; /* printable */

    pthread_mutex_t lock;       /* registrations */
    khash_t(uct_cuda_ipc_ns_broker_regs) regs;

    /* used only by the broker thread */
    khash_t(uct_cuda_ipc_ns_broker_peers) logged_peers;
    int             logged_overflow;
    int             logged_emfile;
    unsigned        num_conns;
    uct_cuda_ipc_ns_broker_conn_t conns[UCT_CUDA_IPC_NS_BROKER_MAX_CONNS];

    /* accepted connections not closed yet, for uct_cuda_ipc_ns_broker_wait_idle() */
    pthread_mutex_t conns_lock;
    pthread_cond_t  conns_cond;
    unsigned        open_conns;
};


static pthread_mutex_t uct_cuda_ipc_ns_broker_global_lock =
        PTHREAD_MUTEX_INITIALIZER;
static uct_cuda_ipc_ns_broker_t *uct_cuda_ipc_ns_broker_global = NULL;


/* Count an accepted connection (+1) or one closed (-1) */
static void uct_cuda_ipc_ns_broker_count_conn(uct_cuda_ipc_ns_broker_t *broker,
                                              int delta)
{
    pthread_mutex_lock(&broker->conns_lock);
    broker->open_conns += delta;
    if (broker->open_conns == 0) {
        pthread_cond_broadcast(&broker->conns_cond);
    }
    pthread_mutex_unlock(&broker->conns_lock);
}


static void uct_cuda_ipc_ns_broker_close_conn(uct_cuda_ipc_ns_broker_t *broker,
                                              int fd)
{
    close(fd);
    uct_cuda_ipc_ns_broker_count_conn(broker, -1);
}


/* Compare tokens in time independent of where they differ */
static int uct_cuda_ipc_ns_broker_token_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    int i;

    for (i = 0; i < UCT_CUDA_IPC_NS_TOKEN_SIZE; ++i) {
        diff |= a[i] ^ b[i];
    }
    /* no early exit above; this only turns the result into a boolean */
    return ((diff - 1) >> 8) & 1;
}


static ucs_status_t uct_cuda_ipc_ns_broker_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    ssize_t ret;

    while (len > 0) {
        ret = getrandom(p, len, 0);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            }
            ucs_error("cuda_ipc_ns: getrandom(%zu) failed: %m", len);
            return UCS_ERR_IO_ERROR;
        }
        p   += ret;
        len -= ret;
    }
    return UCS_OK;
}


/* Whether a refusal from @a pid is the first one seen (log it loudly) */
static int uct_cuda_ipc_ns_broker_first_refusal(uct_cuda_ipc_ns_broker_t *broker,
                                                pid_t pid)
{
    int ret;

    if (kh_get(uct_cuda_ipc_ns_broker_peers, &broker->logged_peers, pid) !=
        kh_end(&broker->logged_peers)) {
        return 0;
    }

    if (kh_size(&broker->logged_peers) >= UCT_CUDA_IPC_NS_BROKER_MAX_LOGGED) {
        if (!broker->logged_overflow) {
            broker->logged_overflow = 1;
            ucs_diag("cuda_ipc_ns: broker %s: refused %u peers, not logging "
                     "more refusals", broker->name,
                     UCT_CUDA_IPC_NS_BROKER_MAX_LOGGED);
        }
        return 0;
    }

    kh_put(uct_cuda_ipc_ns_broker_peers, &broker->logged_peers, pid, &ret);
    return ret >= 0;
}


/* ucs_log() evaluates its level more than once: compute it first */
#define uct_cuda_ipc_ns_broker_refusal_log(_broker, _pid, _fmt, ...) \
    do { \
        ucs_log_level_t _level = \
                uct_cuda_ipc_ns_broker_first_refusal(_broker, _pid) ? \
                UCS_LOG_LEVEL_DIAG : UCS_LOG_LEVEL_TRACE; \
        ucs_log(_level, "cuda_ipc_ns: broker %s: refused peer pid %d: " _fmt, \
                (_broker)->name, (int)(_pid), ## __VA_ARGS__); \
    } while (0)


/*
 * Send a reply; with @a fd >= 0 attach it. Nonblocking: the reply is one
 * small message on a fresh connection, so it fits the socket buffer, and the
 * caller may hold the registration lock.
 */
static void uct_cuda_ipc_ns_broker_reply(uct_cuda_ipc_ns_broker_t *broker,
                                         const uct_cuda_ipc_ns_broker_conn_t *conn,
                                         uct_cuda_ipc_ns_broker_status_t status,
                                         uint64_t alloc_id, int fd)
{
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE];

    uct_cuda_ipc_ns_broker_pack_reply(buf, status, alloc_id);
    if (uct_cuda_ipc_ns_scm_send_fd(conn->fd, buf, sizeof(buf), fd,
                                    MSG_DONTWAIT | MSG_NOSIGNAL) != UCS_OK) {
        ucs_debug("cuda_ipc_ns: broker %s: sending reply '%s' to pid %d "
                  "failed", broker->name,
                  uct_cuda_ipc_ns_broker_status_str(status), (int)conn->pid);
    }
}


/* Look up a live registration; send its fd under the lock (see unregister) */
static void uct_cuda_ipc_ns_broker_serve(uct_cuda_ipc_ns_broker_t *broker,
                                         const uct_cuda_ipc_ns_broker_conn_t *conn,
                                         uint64_t alloc_id, const uint8_t *token)
{
    uct_cuda_ipc_ns_broker_reg_t *reg, *found = NULL;
    khiter_t iter;

    pthread_mutex_lock(&broker->lock);
    iter = kh_get(uct_cuda_ipc_ns_broker_regs, &broker->regs, alloc_id);
    if (iter != kh_end(&broker->regs)) {
        /* compare every entry of the chain: timing tells nothing of tokens */
        for (reg = kh_val(&broker->regs, iter); reg != NULL; reg = reg->next) {
            if (uct_cuda_ipc_ns_broker_token_equal(reg->token, token) &&
                (found == NULL)) {
                found = reg;
            }
        }
    }

    if (found != NULL) {
        uct_cuda_ipc_ns_broker_reply(broker, conn,
                                     UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                                     alloc_id, found->fd);
        pthread_mutex_unlock(&broker->lock);
        ucs_debug("cuda_ipc_ns: broker %s: sent fd of alloc_id 0x%" PRIx64
                  " to pid %d", broker->name, alloc_id, (int)conn->pid);
        return;
    }
    pthread_mutex_unlock(&broker->lock);

    uct_cuda_ipc_ns_broker_reply(broker, conn,
                                 UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY,
                                 alloc_id, -1);
    uct_cuda_ipc_ns_broker_refusal_log(broker, conn->pid,
                                       "unknown or released token for "
                                       "alloc_id 0x%" PRIx64, alloc_id);
}


/* @return nonzero when the connection is done and can be closed */
static int uct_cuda_ipc_ns_broker_handle(uct_cuda_ipc_ns_broker_t *broker,
                                         const uct_cuda_ipc_ns_broker_conn_t *conn)
{
    /* one more byte than a request: a longer message shows as too long */
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE + 1];
    uct_cuda_ipc_ns_broker_status_t status;
    uct_cuda_ipc_ns_broker_req_t req;
    ssize_t len;

    /* no control buffer: fds a peer might attach are dropped by the kernel */
    len = recv(conn->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (len < 0) {
        if ((errno == EAGAIN) || (errno == EINTR)) {
            return 0;
        }
        ucs_debug("cuda_ipc_ns: broker %s: recv from pid %d failed: %m",
                  broker->name, (int)conn->pid);
        return 1;
    } else if (len == 0) {
        ucs_debug("cuda_ipc_ns: broker %s: pid %d closed without a request",
                  broker->name, (int)conn->pid);
        return 1;
    }

    status = uct_cuda_ipc_ns_broker_unpack_request(buf, len, &req);
    if (status == UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        uct_cuda_ipc_ns_broker_serve(broker, conn, req.alloc_id, req.token);
        return 1;
    }

    uct_cuda_ipc_ns_broker_reply(broker, conn, status, req.alloc_id, -1);
    if (status == UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION) {
        uct_cuda_ipc_ns_broker_refusal_log(broker, conn->pid,
                                           "protocol version %u, expected %u",
                                           req.version,
                                           UCT_CUDA_IPC_NS_BROKER_VERSION);
    } else if (req.token != NULL) {
        uct_cuda_ipc_ns_broker_refusal_log(broker, conn->pid,
                                           "unknown operation %u", req.op);
    } else {
        uct_cuda_ipc_ns_broker_refusal_log(broker, conn->pid,
                                           "malformed request (%zd bytes)",
                                           len);
    }
    return 1;
}


/*
 * Discard what a refused peer already sent: closing a unix socket with unread
 * data makes the peer's next recv fail with ECONNRESET before our reply.
 */
static void uct_cuda_ipc_ns_broker_drain(int fd)
{
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE + 1];
    int i;

    for (i = 0; i < 4; ++i) {
        if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0) {
            break;
        }
    }
}


static void uct_cuda_ipc_ns_broker_accept(uct_cuda_ipc_ns_broker_t *broker)
{
    uct_cuda_ipc_ns_broker_conn_t conn;
    struct ucred cred;
    socklen_t len;

    while (broker->num_conns < UCT_CUDA_IPC_NS_BROKER_MAX_CONNS) {
        conn.fd = accept4(broker->listen_fd, NULL, NULL,
                          SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (conn.fd < 0) {
            if ((errno == EMFILE) || (errno == ENFILE) || (errno == ENOBUFS) ||
                (errno == ENOMEM)) {
                /* the pending client stays in the backlog and times out */
                if (!broker->logged_emfile) {
                    broker->logged_emfile = 1;
                    ucs_error("cuda_ipc_ns: broker %s: accept failed: %m",
                              broker->name);
                }
            } else if ((errno != EAGAIN) && (errno != EINTR) &&
                       (errno != ECONNABORTED)) {
                ucs_debug("cuda_ipc_ns: broker %s: accept failed: %m",
                          broker->name);
            }
            return;
        }
        uct_cuda_ipc_ns_broker_count_conn(broker, +1);

        len = sizeof(cred);
        if (getsockopt(conn.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            ucs_debug("cuda_ipc_ns: broker %s: SO_PEERCRED failed: %m",
                      broker->name);
            uct_cuda_ipc_ns_broker_close_conn(broker, conn.fd);
            continue;
        }

        conn.pid      = cred.pid;
        conn.deadline = ucs_get_time() + ucs_time_from_sec(broker->timeout);
        if ((cred.uid != broker->uid) &&
            ((broker->allowed_uid < 0) ||
             (cred.uid != (uid_t)broker->allowed_uid))) {
            /* refuse before reading anything from a foreign uid */
            uct_cuda_ipc_ns_broker_reply(broker, &conn,
                                         UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED,
                                         0, -1);
            uct_cuda_ipc_ns_broker_refusal_log(broker, conn.pid,
                                               "uid %u is not allowed (ours "
                                               "is %u)", (unsigned)cred.uid,
                                               (unsigned)broker->uid);
            uct_cuda_ipc_ns_broker_drain(conn.fd);
            uct_cuda_ipc_ns_broker_close_conn(broker, conn.fd);
            continue;
        }

        broker->conns[broker->num_conns++] = conn;
    }
}


static void uct_cuda_ipc_ns_broker_remove_conn(uct_cuda_ipc_ns_broker_t *broker,
                                               unsigned index)
{
    uct_cuda_ipc_ns_broker_close_conn(broker, broker->conns[index].fd);
    broker->conns[index] = broker->conns[--broker->num_conns];
}


static void *uct_cuda_ipc_ns_broker_thread(void *arg)
{
    uct_cuda_ipc_ns_broker_t *broker = arg;
    struct pollfd pfds[2 + UCT_CUDA_IPC_NS_BROKER_MAX_CONNS];
    ucs_time_t now, next_deadline;
    unsigned i, num_conns;
    int timeout_ms, ret;

    ucs_debug("cuda_ipc_ns: broker %s: serving", broker->name);
    for (;;) {
        now           = ucs_get_time();
        next_deadline = UCS_TIME_INFINITY;

        pfds[0].fd     = broker->wake_fds[0];
        pfds[0].events = POLLIN;
        pfds[1].fd     = (broker->num_conns < UCT_CUDA_IPC_NS_BROKER_MAX_CONNS) ?
                         broker->listen_fd : -1;
        pfds[1].events = POLLIN;
        for (i = 0; i < broker->num_conns; ++i) {
            pfds[2 + i].fd     = broker->conns[i].fd;
            pfds[2 + i].events = POLLIN;
            next_deadline      = ucs_min(next_deadline,
                                         broker->conns[i].deadline);
        }
        num_conns = broker->num_conns;

        if (next_deadline == UCS_TIME_INFINITY) {
            timeout_ms = -1;
        } else if (next_deadline <= now) {
            timeout_ms = 0;
        } else {
            timeout_ms = (int)ucs_time_to_msec(next_deadline - now) + 1;
        }

        ret = poll(pfds, 2 + num_conns, timeout_ms);
        if (ret < 0) {
            if (errno != EINTR) {
                ucs_error("cuda_ipc_ns: broker %s: poll failed: %m",
                          broker->name);
                usleep(1000); /* do not spin on a persistent error */
            }
            continue;
        }

        if (pfds[0].revents) {
            break; /* shutdown */
        }

        /* requests, then expired connections; walk backwards since removal
         * moves the last connection into the freed slot */
        now = ucs_get_time();
        for (i = num_conns; i-- > 0;) {
            if (pfds[2 + i].revents &&
                uct_cuda_ipc_ns_broker_handle(broker, &broker->conns[i])) {
                uct_cuda_ipc_ns_broker_remove_conn(broker, i);
            } else if (broker->conns[i].deadline <= now) {
                ucs_debug("cuda_ipc_ns: broker %s: no request from pid %d "
                          "within %.3f s, closing", broker->name,
                          (int)broker->conns[i].pid, broker->timeout);
                uct_cuda_ipc_ns_broker_remove_conn(broker, i);
            }
        }

        if (pfds[1].revents & POLLIN) {
            uct_cuda_ipc_ns_broker_accept(broker);
        }
    }

    while (broker->num_conns > 0) {
        uct_cuda_ipc_ns_broker_remove_conn(broker, broker->num_conns - 1);
    }
    ucs_debug("cuda_ipc_ns: broker %s: stopped", broker->name);
    return NULL;
}


/* The socket directory must be ours and closed to everyone else */
static ucs_status_t uct_cuda_ipc_ns_broker_check_dir(const char *dir)
{
    struct stat st;

    if (mkdir(dir, 0700) == 0) {
        ucs_debug("cuda_ipc_ns: created socket directory '%s'", dir);
    } else if (errno != EEXIST) {
        ucs_error("cuda_ipc_ns: cannot create socket directory '%s': %m", dir);
        return UCS_ERR_IO_ERROR;
    }

    if (stat(dir, &st) < 0) {
        ucs_error("cuda_ipc_ns: stat(%s) failed: %m", dir);
        return UCS_ERR_IO_ERROR;
    }

    if (!S_ISDIR(st.st_mode)) {
        ucs_error("cuda_ipc_ns: socket directory '%s' is not a directory", dir);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((st.st_uid != geteuid()) || (st.st_mode & 077)) {
        ucs_error("cuda_ipc_ns: refusing socket directory '%s': owner uid %u "
                  "mode 0%o, need owner uid %u and no group/other access "
                  "(chmod 0700)", dir, (unsigned)st.st_uid,
                  (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return UCS_ERR_INVALID_PARAM;
    }

    return UCS_OK;
}


/* "cuda_ipc_ns-<pid>-<16 hex digits>.sock": the names brokers bind */
static int uct_cuda_ipc_ns_broker_is_sock_name(const char *name)
{
    static const char prefix[] = "cuda_ipc_ns-";
    const char *p = name + sizeof(prefix) - 1;
    int digits;

    if (strncmp(name, prefix, sizeof(prefix) - 1)) {
        return 0;
    }
    for (digits = 0; (*p >= '0') && (*p <= '9'); ++p, ++digits) {
    }
    if ((digits == 0) || (*p++ != '-')) {
        return 0;
    }
    for (digits = 0; ((*p >= '0') && (*p <= '9')) || ((*p >= 'a') && (*p <= 'f'));
         ++p, ++digits) {
    }
    return (digits == 16) && !strcmp(p, ".sock");
}


/*
 * Remove the sockets that brokers killed without shutdown (SIGKILL, OOM)
 * left in @a dir: only our names, only sockets of our uid, and only when
 * connect() is refused, which means nobody listens on it. A live broker's
 * socket accepts (or its backlog is full: EAGAIN) and is kept; a broker binds
 * under a temporary name and renames only once it listens, so a socket still
 * being set up is never taken for a dead one.
 */
static void uct_cuda_ipc_ns_broker_sweep(const char *dir)
{
    struct sockaddr_un sa;
    struct dirent *entry;
    struct stat st;
    int fd, ret, len;
    DIR *d;

    d = opendir(dir);
    if (d == NULL) {
        ucs_debug("cuda_ipc_ns: opendir(%s) failed: %m", dir);
        return;
    }

    while ((entry = readdir(d)) != NULL) {
        if (!uct_cuda_ipc_ns_broker_is_sock_name(entry->d_name)) {
            continue;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        len = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir,
                       entry->d_name);
        if ((len < 0) || (len >= sizeof(sa.sun_path)) ||
            (lstat(sa.sun_path, &st) < 0) || !S_ISSOCK(st.st_mode) ||
            (st.st_uid != geteuid())) {
            continue;
        }

        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            break;
        }
        ret = connect(fd, (struct sockaddr*)&sa, sizeof(sa));
        if ((ret < 0) && (errno == ECONNREFUSED)) {
            if (unlink(sa.sun_path) == 0) {
                ucs_debug("cuda_ipc_ns: removed %s, left by a broker that "
                          "did not shut down", sa.sun_path);
            }
        }
        close(fd);
    }
    closedir(d);
}


static ucs_status_t uct_cuda_ipc_ns_broker_listen(uct_cuda_ipc_ns_broker_t *broker,
                                                  const char *sock_dir)
{
    struct sockaddr_un sa;
    char final_path[sizeof(sa.sun_path)];
    uint8_t rnd[8];
    char hex[2 * sizeof(rnd) + 1];
    struct stat st;
    ucs_status_t status;
    unsigned i;
    int len;

    status = uct_cuda_ipc_ns_broker_random(rnd, sizeof(rnd));
    if (status != UCS_OK) {
        return status;
    }
    for (i = 0; i < sizeof(rnd); ++i) {
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    }

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if ((sock_dir == NULL) || (sock_dir[0] == '\0')) {
        /* abstract: no file to clean up, vanishes with the socket */
        len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
                       "cuda_ipc_ns-%d-%s", (int)broker->owner_pid, hex);
        broker->is_pathname = 0;
        broker->addr_len    = len + 1;
    } else {
        status = uct_cuda_ipc_ns_broker_check_dir(sock_dir);
        if (status != UCS_OK) {
            return status;
        }
        len = snprintf(sa.sun_path, sizeof(sa.sun_path),
                       "%s/cuda_ipc_ns-%d-%s.sock", sock_dir,
                       (int)broker->owner_pid, hex);
        if ((len < 0) || (len >= sizeof(sa.sun_path))) {
            ucs_error("cuda_ipc_ns: socket directory '%s' is too long for a "
                      "socket path (max %zu bytes)", sock_dir,
                      sizeof(sa.sun_path) - 1);
            return UCS_ERR_INVALID_PARAM;
        }
        broker->is_pathname = 1;
        broker->addr_len    = len;
    }
    memcpy(broker->addr, sa.sun_path, broker->addr_len);
    uct_cuda_ipc_ns_fdx_addr_str(broker->addr, broker->addr_len, broker->name,
                                 sizeof(broker->name));

    broker->listen_fd = socket(AF_UNIX,
                               SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (broker->listen_fd < 0) {
        ucs_error("cuda_ipc_ns: broker socket(AF_UNIX, SOCK_SEQPACKET) "
                  "failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    if (broker->is_pathname) {
        /* bound under a name the sweep ignores, renamed once listening */
        uct_cuda_ipc_ns_broker_sweep(sock_dir);
        memcpy(final_path, sa.sun_path, broker->addr_len + 1);
        len = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.cuda_ipc_ns-%d-%s",
                       sock_dir, (int)broker->owner_pid, hex);
        if ((len < 0) || (len >= sizeof(sa.sun_path))) {
            ucs_error("cuda_ipc_ns: socket directory '%s' is too long for a "
                      "socket path (max %zu bytes)", sock_dir,
                      sizeof(sa.sun_path) - 1);
            goto err_close;
        }
    }

    if (bind(broker->listen_fd, (struct sockaddr*)&sa,
             offsetof(struct sockaddr_un, sun_path) +
             (broker->is_pathname ? strlen(sa.sun_path) : broker->addr_len)) < 0) {
        ucs_error("cuda_ipc_ns: broker bind(%s) failed: %m", broker->name);
        goto err_close;
    }

    if (broker->is_pathname && (chmod(sa.sun_path, 0600) < 0)) {
        ucs_error("cuda_ipc_ns: chmod(%s, 0600) failed: %m", broker->name);
        goto err_unlink;
    }

    if (listen(broker->listen_fd, UCT_CUDA_IPC_NS_BROKER_BACKLOG) < 0) {
        ucs_error("cuda_ipc_ns: broker listen(%s) failed: %m", broker->name);
        goto err_unlink;
    }

    if (broker->is_pathname) {
        if (rename(sa.sun_path, final_path) < 0) {
            ucs_error("cuda_ipc_ns: rename(%s, %s) failed: %m", sa.sun_path,
                      final_path);
            goto err_unlink;
        }
    }

    if (fstat(broker->listen_fd, &st) == 0) {
        broker->listen_ino = st.st_ino;
    }
    return UCS_OK;

err_unlink:
    if (broker->is_pathname) {
        unlink(sa.sun_path);
    }
err_close:
    close(broker->listen_fd);
    broker->listen_fd = -1;
    return UCS_ERR_IO_ERROR;
}


static void uct_cuda_ipc_ns_broker_unlink(uct_cuda_ipc_ns_broker_t *broker)
{
    char path[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 1];

    if (!broker->is_pathname) {
        return;
    }
    memcpy(path, broker->addr, broker->addr_len);
    path[broker->addr_len] = '\0';
    if (unlink(path) < 0) {
        ucs_debug("cuda_ipc_ns: unlink(%s) failed: %m", path);
    }
}


static ucs_status_t uct_cuda_ipc_ns_broker_create(const uct_cuda_ipc_ns_fdx_config_t *cfg,
                                                  uct_cuda_ipc_ns_broker_t **broker_p)
{
    uct_cuda_ipc_ns_broker_t *broker;
    sigset_t all, saved;
    ucs_status_t status;
    struct stat st;
    int ret;

    broker = ucs_calloc(1, sizeof(*broker), "cuda_ipc_ns_broker");
    if (broker == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate the broker");
        return UCS_ERR_NO_MEMORY;
    }

    broker->owner_pid   = getpid();
    broker->refcount    = 1;
    broker->listen_fd   = -1;
    broker->timeout     = (cfg->timeout > 0) ? cfg->timeout : 1.0;
    broker->uid         = geteuid();
    broker->allowed_uid = cfg->allowed_uid;
    pthread_mutex_init(&broker->lock, NULL);
    pthread_mutex_init(&broker->conns_lock, NULL);
    pthread_cond_init(&broker->conns_cond, NULL);
    kh_init_inplace(uct_cuda_ipc_ns_broker_regs, &broker->regs);
    kh_init_inplace(uct_cuda_ipc_ns_broker_peers, &broker->logged_peers);

    status = uct_cuda_ipc_ns_broker_listen(broker, cfg->sock_dir);
    if (status != UCS_OK) {
        goto err_free;
    }

    if (pipe2(broker->wake_fds, O_CLOEXEC | O_NONBLOCK) < 0) {
        ucs_error("cuda_ipc_ns: broker pipe2() failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err_close_listen;
    }
    if (fstat(broker->wake_fds[0], &st) == 0) {
        broker->wake_ino = st.st_ino;
    }

    /* the thread takes no signals: they belong to the application */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    ret = pthread_create(&broker->thread, NULL, uct_cuda_ipc_ns_broker_thread,
                         broker);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (ret != 0) {
        ucs_error("cuda_ipc_ns: failed to start the broker thread: %s",
                  strerror(ret));
        status = UCS_ERR_IO_ERROR;
        goto err_close_pipe;
    }

    ucs_debug("cuda_ipc_ns: pid %d started broker %s (timeout %.3f s, "
              "uid %u, extra allowed uid %d)", (int)broker->owner_pid,
              broker->name, broker->timeout, (unsigned)broker->uid,
              broker->allowed_uid);
    *broker_p = broker;
    return UCS_OK;

err_close_pipe:
    close(broker->wake_fds[0]);
    close(broker->wake_fds[1]);
err_close_listen:
    uct_cuda_ipc_ns_broker_unlink(broker);
    close(broker->listen_fd);
err_free:
    kh_destroy_inplace(uct_cuda_ipc_ns_broker_regs, &broker->regs);
    kh_destroy_inplace(uct_cuda_ipc_ns_broker_peers, &broker->logged_peers);
    pthread_mutex_destroy(&broker->lock);
    pthread_mutex_destroy(&broker->conns_lock);
    pthread_cond_destroy(&broker->conns_cond);
    ucs_free(broker);
    return status;
}


static void uct_cuda_ipc_ns_broker_destroy(uct_cuda_ipc_ns_broker_t *broker)
{
    uct_cuda_ipc_ns_broker_reg_t *reg, *next;
    ssize_t ret;
    char c = 0;

    do {
        ret = write(broker->wake_fds[1], &c, 1);
    } while ((ret < 0) && (errno == EINTR));
    if (ret < 0) {
        ucs_error("cuda_ipc_ns: broker %s: cannot wake the thread: %m",
                  broker->name);
    }
    pthread_join(broker->thread, NULL);

    uct_cuda_ipc_ns_broker_unlink(broker);
    close(broker->listen_fd);
    close(broker->wake_fds[0]);
    close(broker->wake_fds[1]);

    /* registrations left behind by the caller: their fds are not ours */
    if (kh_size(&broker->regs) > 0) {
        ucs_debug("cuda_ipc_ns: broker %s: %u allocation ids still registered "
                  "at shutdown", broker->name, kh_size(&broker->regs));
    }
    kh_foreach_value(&broker->regs, reg, {
        for (; reg != NULL; reg = next) {
            next = reg->next;
            ucs_free(reg);
        }
    })
    kh_destroy_inplace(uct_cuda_ipc_ns_broker_regs, &broker->regs);
    kh_destroy_inplace(uct_cuda_ipc_ns_broker_peers, &broker->logged_peers);
    pthread_mutex_destroy(&broker->lock);
    pthread_mutex_destroy(&broker->conns_lock);
    pthread_cond_destroy(&broker->conns_cond);
    ucs_debug("cuda_ipc_ns: broker %s destroyed", broker->name);
    ucs_free(broker);
}


static void uct_cuda_ipc_ns_broker_close_inherited(int fd, ino_t ino)
{
    struct stat st;

    /* close only if the number still holds the inherited object */
    if ((fd >= 0) && (fstat(fd, &st) == 0) && (st.st_ino == ino)) {
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
              "pid %d", (int)getpid(), broker->name, (int)broker->owner_pid);
    uct_cuda_ipc_ns_broker_close_inherited(broker->listen_fd, broker->listen_ino);
    uct_cuda_ipc_ns_broker_close_inherited(broker->wake_fds[0], broker->wake_ino);
    uct_cuda_ipc_ns_broker_close_inherited(broker->wake_fds[1], broker->wake_ino);
}


ucs_status_t uct_cuda_ipc_ns_broker_get(const uct_cuda_ipc_ns_fdx_config_t *cfg,
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
        if (want_pathname != broker->is_pathname) {
            ucs_diag("cuda_ipc_ns: fd broker %s is already running; socket "
                     "directory '%s' is ignored", broker->name,
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
    *len_p = broker->addr_len;
    return broker->addr;
}


ucs_status_t uct_cuda_ipc_ns_broker_register(uct_cuda_ipc_ns_broker_t *broker,
                                             int fd, uint64_t alloc_id,
                                             uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                             uct_cuda_ipc_ns_broker_reg_t **reg_p)
{
    uct_cuda_ipc_ns_broker_reg_t *reg;
    ucs_status_t status;
    khiter_t iter;
    int ret;

    if (fd < 0) {
        ucs_error("cuda_ipc_ns: broker %s: cannot register fd %d",
                  broker->name, fd);
        return UCS_ERR_INVALID_PARAM;
    }

    reg = ucs_calloc(1, sizeof(*reg), "cuda_ipc_ns_broker_reg");
    if (reg == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a broker registration");
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_ipc_ns_broker_random(reg->token, sizeof(reg->token));
    if (status != UCS_OK) {
        ucs_free(reg);
        return status;
    }
    reg->alloc_id = alloc_id;
    reg->fd       = fd;

    pthread_mutex_lock(&broker->lock);
    iter = kh_put(uct_cuda_ipc_ns_broker_regs, &broker->regs, alloc_id, &ret);
    if (ret < 0) {
        pthread_mutex_unlock(&broker->lock);
        ucs_free(reg);
        ucs_error("cuda_ipc_ns: broker %s: failed to add alloc_id 0x%" PRIx64,
                  broker->name, alloc_id);
        return UCS_ERR_NO_MEMORY;
    }
    reg->next                     = (ret == 0) ? kh_val(&broker->regs, iter) :
                                                 NULL;
    kh_val(&broker->regs, iter)   = reg;
    pthread_mutex_unlock(&broker->lock);

    memcpy(token, reg->token, sizeof(reg->token));
    ucs_trace("cuda_ipc_ns: broker %s: registered fd %d alloc_id 0x%" PRIx64,
              broker->name, fd, alloc_id);
    *reg_p = reg;
    return UCS_OK;
}


void uct_cuda_ipc_ns_broker_unregister(uct_cuda_ipc_ns_broker_t *broker,
                                       uct_cuda_ipc_ns_broker_reg_t *reg)
{
    uct_cuda_ipc_ns_broker_reg_t **pp;
    khiter_t iter;

    pthread_mutex_lock(&broker->lock);
    iter = kh_get(uct_cuda_ipc_ns_broker_regs, &broker->regs, reg->alloc_id);
    if (iter != kh_end(&broker->regs)) {
        for (pp = &kh_val(&broker->regs, iter); *pp != NULL;
             pp = &(*pp)->next) {
            if (*pp == reg) {
                *pp = reg->next;
                break;
            }
        }
        if (kh_val(&broker->regs, iter) == NULL) {
            kh_del(uct_cuda_ipc_ns_broker_regs, &broker->regs, iter);
        }
    }
    pthread_mutex_unlock(&broker->lock);

    ucs_trace("cuda_ipc_ns: broker %s: unregistered fd %d alloc_id 0x%" PRIx64,
              broker->name, reg->fd, reg->alloc_id);
    /* wipe the secret before the memory goes back to the heap */
    memset(reg->token, 0, sizeof(reg->token));
    ucs_free(reg);
}


void uct_cuda_ipc_ns_broker_wait_idle(void)
{
    uct_cuda_ipc_ns_broker_t *broker;

    /* the thread never takes the global lock: holding it keeps the broker */
    pthread_mutex_lock(&uct_cuda_ipc_ns_broker_global_lock);
    broker = uct_cuda_ipc_ns_broker_global;
    if ((broker != NULL) && (broker->owner_pid == getpid())) {
        pthread_mutex_lock(&broker->conns_lock);
        while (broker->open_conns > 0) {
            pthread_cond_wait(&broker->conns_cond, &broker->conns_lock);
        }
        pthread_mutex_unlock(&broker->conns_lock);
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_broker_global_lock);
}
