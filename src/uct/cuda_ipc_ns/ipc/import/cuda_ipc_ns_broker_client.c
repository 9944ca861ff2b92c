/*
 * cuda_ipc_ns: the importer's connection to an owner's broker (see
 * cuda_ipc_ns_broker_client.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker_client.h"
#include "cuda_ipc_ns_owner.h"
#include "cuda_ipc_ns_scm.h"
#include "cuda_ipc_ns_sockdir.h"

#include <ucs/debug/log.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>


void uct_cuda_ipc_ns_broker_client_start(uct_cuda_ipc_ns_broker_client_t *client,
                                         const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                         const uct_cuda_ipc_ns_rkey_info_t *key)
{
    client->cfg      = cfg;
    client->key      = key;
    client->timeout  = (cfg->timeout > 0) ? cfg->timeout :
                       UCT_CUDA_IPC_NS_BROKER_CLIENT_TIMEOUT;
    client->deadline = ucs_get_time() + ucs_time_from_sec(client->timeout);
    snprintf(client->name, sizeof(client->name), "(none)");
}


void uct_cuda_ipc_ns_broker_client_log(const uct_cuda_ipc_ns_broker_client_t *client,
                                       ucs_status_t status)
{
    if (status == UCS_ERR_TIMED_OUT) {
        ucs_debug("cuda_ipc_ns: broker %s (owner pid %u) did not answer "
                  "within %.3f s", client->name, client->key->pid,
                  client->timeout);
    }
}


/* Set a socket timeout to what is left until @a deadline */
static ucs_status_t uct_cuda_ipc_ns_broker_client_timeout(int sock, int optname,
                                                      ucs_time_t deadline)
{
    ucs_time_t now = ucs_get_time();
    struct timeval tv;
    double left;

    if (now >= deadline) {
        return UCS_ERR_TIMED_OUT;
    }

    left       = ucs_time_to_sec(deadline - now);
    tv.tv_sec  = (time_t)left;
    tv.tv_usec = (suseconds_t)((left - tv.tv_sec) * 1e6);
    if ((tv.tv_sec == 0) && (tv.tv_usec == 0)) {
        tv.tv_usec = 1; /* zero would mean "no timeout" */
    }

    if (setsockopt(sock, SOL_SOCKET, optname, &tv, sizeof(tv)) < 0) {
        ucs_error("cuda_ipc_ns: setsockopt(%s) failed: %m",
                  (optname == SO_RCVTIMEO) ? "SO_RCVTIMEO" : "SO_SNDTIMEO");
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


static ucs_status_t uct_cuda_ipc_ns_broker_client_errno_status(int err)
{
    switch (err) {
    case EAGAIN:
    case ETIMEDOUT:
        return UCS_ERR_TIMED_OUT;
    case ECONNREFUSED:
    case ENOENT:
    case ENOTDIR:
    case EACCES:
    case EPERM:
        return UCS_ERR_UNREACHABLE;
    case EPIPE:
    case ECONNRESET:
        return UCS_ERR_CONNECTION_RESET;
    default:
        return UCS_ERR_IO_ERROR;
    }
}


/*
 * The address to connect to for @a key: its abstract name as it is, or its
 * pathname through the socket directory, opened and checked (*dir_fd_p: to
 * close once connected, -1 for an abstract name).
 */
static ucs_status_t
uct_cuda_ipc_ns_broker_client_addr(const uct_cuda_ipc_ns_broker_client_t *client,
                                   struct sockaddr_un *sa, socklen_t *len_p,
                                   int *dir_fd_p)
{
    const uct_cuda_ipc_ns_rkey_info_t *key = client->key;
    char path[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 1];
    ucs_status_t status;
    char *base;

    *dir_fd_p = -1;
    if (key->broker_addr[0] == '\0') {
        memset(sa, 0, sizeof(*sa));
        sa->sun_family = AF_UNIX;
        memcpy(sa->sun_path, key->broker_addr, key->broker_addr_len);
        *len_p = offsetof(struct sockaddr_un, sun_path) + key->broker_addr_len;
        return UCS_OK;
    }

    /* a path from the key: only a broker's socket name in a directory */
    memcpy(path, key->broker_addr, key->broker_addr_len);
    path[key->broker_addr_len] = '\0';
    base = strrchr(path, '/');
    if ((base == NULL) || (base == path) || (strlen(path) != key->broker_addr_len) ||
        !uct_cuda_ipc_ns_sockdir_is_sock_name(base + 1, 0)) {
        ucs_error("cuda_ipc_ns: broker address %s of owner pid %u is not a "
                  "broker socket in a directory", client->name, key->pid);
        return UCS_ERR_INVALID_PARAM;
    }
    *base = '\0';

    status = uct_cuda_ipc_ns_sockdir_open(path, 0, client->cfg->allowed_uid,
                                          dir_fd_p);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_sockdir_addr(*dir_fd_p, base + 1, sa, len_p);
    if (status != UCS_OK) {
        close(*dir_fd_p);
        *dir_fd_p = -1;
    }
    return status;
}


/* A socket connected to the broker of the key (not checked yet) */
static ucs_status_t
uct_cuda_ipc_ns_broker_client_socket(uct_cuda_ipc_ns_broker_client_t *client,
                                     int *sock_p)
{
    const uct_cuda_ipc_ns_rkey_info_t *key = client->key;
    struct sockaddr_un sa;
    ucs_status_t status;
    int sock, ret, err, dir_fd;
    socklen_t len;

    if ((key->broker_addr_len == 0) ||
        (key->broker_addr_len > UCT_CUDA_IPC_NS_BROKER_ADDR_MAX)) {
        ucs_debug("cuda_ipc_ns: owner pid %u (pid_ns %" PRIu64 ") has no "
                  "broker address in its key", key->pid, key->pid_ns);
        return UCS_ERR_UNREACHABLE;
    }

    uct_cuda_ipc_ns_broker_proto_addr_str(key->broker_addr, key->broker_addr_len,
                                          client->name, sizeof(client->name));
    status = uct_cuda_ipc_ns_broker_client_addr(client, &sa, &len, &dir_fd);
    if (status != UCS_OK) {
        return status;
    }

    sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        ucs_error("cuda_ipc_ns: socket(AF_UNIX, SOCK_SEQPACKET) failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto out;
    }

    /* connect waits for room in the broker's backlog at most SO_SNDTIMEO */
    status = uct_cuda_ipc_ns_broker_client_timeout(sock, SO_SNDTIMEO,
                                                   client->deadline);
    if (status != UCS_OK) {
        goto err_close;
    }
    do {
        ret = connect(sock, (struct sockaddr*)&sa, len);
    } while ((ret < 0) && (errno == EINTR));
    if (ret < 0) {
        err    = errno;
        status = uct_cuda_ipc_ns_broker_client_errno_status(err);
        ucs_debug("cuda_ipc_ns: connect to broker %s (owner pid %u, pid_ns %"
                  PRIu64 ") failed: %s%s", client->name, key->pid, key->pid_ns,
                  strerror(err),
                  ((status == UCS_ERR_UNREACHABLE) &&
                   (key->broker_addr[0] == '\0')) ?
                  " (abstract sockets are not shared across network "
                  "namespaces; set UCX_CUDA_IPC_NS_SOCK_DIR to a shared "
                  "directory)" : "");
        goto err_close;
    }

    *sock_p = sock;
    goto out;

err_close:
    close(sock);
out:
    if (dir_fd >= 0) {
        close(dir_fd);
    }
    return status;
}


/* Nothing is sent to, or believed from, a broker before it is checked as
 * the key's owner */
ucs_status_t
uct_cuda_ipc_ns_broker_client_connect(uct_cuda_ipc_ns_broker_client_t *client,
                                      int *sock_p, int *pidfd_p)
{
    ucs_status_t status;
    int sock;

    *pidfd_p = -1;
    status = uct_cuda_ipc_ns_broker_client_socket(client, &sock);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_owner_check(sock, client->name, client->key,
                                         client->cfg->allowed_uid,
                                         client->cfg->userns_peers, pidfd_p);
    if (status != UCS_OK) {
        close(sock);
        return status;
    }

    *sock_p = sock;
    return UCS_OK;
}


/* Send the request @a req and receive the reply (at most @a reply_max
 * bytes), with its fds if any (at most @a max_fds, more are refused) */
static ucs_status_t
uct_cuda_ipc_ns_broker_client_exchange(const uct_cuda_ipc_ns_broker_client_t *client,
                                       int sock, const uint8_t *req,
                                       size_t req_len, uint8_t *reply,
                                       size_t reply_max, size_t *len_p,
                                       int *fds, unsigned max_fds,
                                       unsigned *num_fds_p)
{
    const uct_cuda_ipc_ns_rkey_info_t *key = client->key;
    const char *name                       = client->name;
    ucs_time_t deadline                    = client->deadline;
    const char *what;
    ucs_status_t status;

    what   = "send";
    status = uct_cuda_ipc_ns_broker_client_timeout(sock, SO_SNDTIMEO, deadline);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_cuda_ipc_ns_scm_send_fd(sock, req, req_len, -1,
                                         MSG_NOSIGNAL);
    /* on a reset the broker closed after refusing us: its reply may be
     * waiting, read it */
    if ((status != UCS_OK) && (status != UCS_ERR_CONNECTION_RESET)) {
        goto err;
    }

    what   = "recv";
    status = uct_cuda_ipc_ns_broker_client_timeout(sock, SO_RCVTIMEO, deadline);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_cuda_ipc_ns_scm_recv_fds(sock, reply, reply_max, 0, len_p,
                                          fds, max_fds, num_fds_p);
    if (status == UCS_ERR_CONNECTION_RESET) {
        /* a broker that refused us before reading our request closes with
         * it unread: the kernel reports ECONNRESET ahead of the reply that
         * is already queued */
        status = uct_cuda_ipc_ns_scm_recv_fds(sock, reply, reply_max, 0,
                                              len_p, fds, max_fds, num_fds_p);
    }
    if (status == UCS_OK) {
        return UCS_OK;
    } else if ((status == UCS_ERR_MESSAGE_TRUNCATED) ||
               (status == UCS_ERR_INVALID_PARAM)) {
        ucs_error("cuda_ipc_ns: broker %s (owner pid %u) sent a malformed "
                  "reply (%s)", name, key->pid, ucs_status_string(status));
        return UCS_ERR_IO_ERROR;
    }

err:
    ucs_debug("cuda_ipc_ns: %s to broker %s (owner pid %u, pid_ns %" PRIu64
              ") failed: %s", what, name, key->pid, key->pid_ns,
              ucs_status_string(status));
    return status;
}


ucs_status_t
uct_cuda_ipc_ns_broker_client_call(uct_cuda_ipc_ns_broker_client_t *client,
                                   const uint8_t *req, size_t req_len,
                                   uint8_t *reply, size_t reply_max,
                                   size_t *len_p, int *fds, unsigned max_fds,
                                   unsigned *num_fds_p, int *pidfd_p)
{
    ucs_status_t status;
    int sock;

    status = uct_cuda_ipc_ns_broker_client_connect(client, &sock, pidfd_p);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_broker_client_exchange(client, sock, req,
                                                    req_len, reply, reply_max,
                                                    len_p, fds, max_fds,
                                                    num_fds_p);
    close(sock);
    return status;
}
