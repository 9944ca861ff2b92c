/*
 * cuda_ipc_ns: the broker's listening socket (see cuda_ipc_ns_broker_sock.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker_sock.h"
#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_broker_registry.h"
#include "cuda_ipc_ns_sockdir.h"

#include <ucs/debug/log.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


/* Connections the kernel queues before the broker accepts them */
#define UCT_CUDA_IPC_NS_BROKER_BACKLOG  128


/*
 * Remove the sockets that brokers killed without shutdown (SIGKILL, OOM)
 * left in the directory: only our names, only sockets of our uid, and only
 * when connect() is refused, which means nobody listens on it. A live
 * broker's socket accepts (or its backlog is full: EAGAIN) and is kept; a
 * broker binds under a temporary name and renames only once it listens, so
 * a socket still being set up is never taken for a dead one.
 */
static void uct_cuda_ipc_ns_broker_sock_sweep(int dir_fd, const char *dir)
{
    struct sockaddr_un sa;
    struct dirent *entry;
    struct stat st;
    socklen_t len;
    int fd, ret;
    DIR *d;

    fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d  = (fd < 0) ? NULL : fdopendir(fd);
    if (d == NULL) {
        ucs_debug("cuda_ipc_ns: cannot list socket directory '%s': %m", dir);
        if (fd >= 0) {
            close(fd);
        }
        return;
    }

    while ((entry = readdir(d)) != NULL) {
        if (!uct_cuda_ipc_ns_sockdir_is_sock_name(entry->d_name, 0) ||
            (fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) ||
            !S_ISSOCK(st.st_mode) || (st.st_uid != geteuid()) ||
            (uct_cuda_ipc_ns_sockdir_addr(dir_fd, entry->d_name, &sa, &len) !=
             UCS_OK)) {
            continue;
        }

        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            break;
        }
        ret = connect(fd, (struct sockaddr*)&sa, len);
        if ((ret < 0) && (errno == ECONNREFUSED)) {
            if (unlinkat(dir_fd, entry->d_name, 0) == 0) {
                ucs_debug("cuda_ipc_ns: removed %s/%s, left by a broker that "
                          "did not shut down", dir, entry->d_name);
            }
        }
        close(fd);
    }
    closedir(d);
}


/* Bind @a sock->fd to @a name in the socket directory, listening when done */
static ucs_status_t
uct_cuda_ipc_ns_broker_sock_bind_path(uct_cuda_ipc_ns_broker_sock_t *sock,
                                      const char *sock_dir, const char *name)
{
    char tmp_name[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    struct sockaddr_un sa;
    ucs_status_t status;
    socklen_t len;

    uct_cuda_ipc_ns_broker_sock_sweep(sock->dir_fd, sock_dir);

    /* bound under a name the sweep ignores, renamed once listening */
    snprintf(tmp_name, sizeof(tmp_name), ".%.*s", (int)(strlen(name) - 5),
             name);
    status = uct_cuda_ipc_ns_sockdir_addr(sock->dir_fd, tmp_name, &sa, &len);
    if (status != UCS_OK) {
        return status;
    }

    if (bind(sock->fd, (struct sockaddr*)&sa, len) < 0) {
        ucs_error("cuda_ipc_ns: broker bind(%s/%s) failed: %m", sock_dir,
                  tmp_name);
        return UCS_ERR_IO_ERROR;
    }

    if (fchmodat(sock->dir_fd, tmp_name, 0600, 0) < 0) {
        ucs_error("cuda_ipc_ns: chmod(%s/%s, 0600) failed: %m", sock_dir,
                  tmp_name);
        goto err_unlink;
    }

    if (listen(sock->fd, UCT_CUDA_IPC_NS_BROKER_BACKLOG) < 0) {
        ucs_error("cuda_ipc_ns: broker listen(%s) failed: %m", sock->name);
        goto err_unlink;
    }

    if (renameat(sock->dir_fd, tmp_name, sock->dir_fd, name) < 0) {
        ucs_error("cuda_ipc_ns: rename(%s/%s, %s) failed: %m", sock_dir,
                  tmp_name, name);
        goto err_unlink;
    }
    return UCS_OK;

err_unlink:
    unlinkat(sock->dir_fd, tmp_name, 0);
    return UCS_ERR_IO_ERROR;
}


static ucs_status_t
uct_cuda_ipc_ns_broker_sock_bind_abstract(uct_cuda_ipc_ns_broker_sock_t *sock)
{
    struct sockaddr_un sa;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, sock->addr, sock->addr_len);
    if (bind(sock->fd, (struct sockaddr*)&sa,
             offsetof(struct sockaddr_un, sun_path) + sock->addr_len) < 0) {
        ucs_error("cuda_ipc_ns: broker bind(%s) failed: %m", sock->name);
        return UCS_ERR_IO_ERROR;
    }

    if (listen(sock->fd, UCT_CUDA_IPC_NS_BROKER_BACKLOG) < 0) {
        ucs_error("cuda_ipc_ns: broker listen(%s) failed: %m", sock->name);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}


/*
 * A new name for the socket of @a owner_pid (@a name, of
 * UCT_CUDA_IPC_NS_BROKER_ADDR_MAX bytes) and the address keys carry: a path
 * in @a sock_dir, whose directory @a sock->dir_fd is opened, or abstract.
 */
static ucs_status_t
uct_cuda_ipc_ns_broker_sock_address(uct_cuda_ipc_ns_broker_sock_t *sock,
                                    pid_t owner_pid, const char *sock_dir,
                                    char *name)
{
    int is_pathname = (sock_dir != NULL) && (sock_dir[0] != '\0');
    ucs_status_t status;
    uint8_t rnd[8];
    int len;

    status = uct_cuda_ipc_ns_broker_registry_random(rnd, sizeof(rnd));
    if (status != UCS_OK) {
        return status;
    }
    snprintf(name, UCT_CUDA_IPC_NS_BROKER_ADDR_MAX,
             "cuda_ipc_ns-%d-%02x%02x%02x%02x%02x%02x%02x%02x%s",
             (int)owner_pid, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
             rnd[6], rnd[7], is_pathname ? ".sock" : "");

    if (is_pathname) {
        /* what keys carry: the path as configured, which peers resolve and
         * check themselves */
        len = snprintf(sock->addr, sizeof(sock->addr), "%s/%s", sock_dir,
                       name);
        if ((len < 0) || (len >= sizeof(sock->addr))) {
            ucs_error("cuda_ipc_ns: socket directory '%s' is too long for a "
                      "socket path (max %zu bytes)", sock_dir,
                      sizeof(sock->addr) - 1);
            return UCS_ERR_INVALID_PARAM;
        }
        status = uct_cuda_ipc_ns_sockdir_open(sock_dir, 1, -1, &sock->dir_fd);
        if (status != UCS_OK) {
            return status;
        }
    } else {
        /* abstract: a leading NUL, not NUL-terminated */
        sock->addr[0] = '\0';
        len           = snprintf(sock->addr + 1, sizeof(sock->addr) - 1, "%s",
                                 name) + 1;
    }
    sock->addr_len = len;
    uct_cuda_ipc_ns_broker_proto_addr_str(sock->addr, sock->addr_len, sock->name,
                                          sizeof(sock->name));
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_broker_sock_listen(uct_cuda_ipc_ns_broker_sock_t *sock,
                                                pid_t owner_pid,
                                                const char *sock_dir)
{
    char name[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    int is_pathname = (sock_dir != NULL) && (sock_dir[0] != '\0');
    ucs_status_t status;

    sock->fd     = -1;
    sock->dir_fd = -1;

    status = uct_cuda_ipc_ns_broker_sock_address(sock, owner_pid, sock_dir,
                                                 name);
    if (status != UCS_OK) {
        return status;
    }

    sock->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock->fd < 0) {
        ucs_error("cuda_ipc_ns: broker socket(AF_UNIX, SOCK_SEQPACKET) "
                  "failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err;
    }

    status = is_pathname ?
             uct_cuda_ipc_ns_broker_sock_bind_path(sock, sock_dir, name) :
             uct_cuda_ipc_ns_broker_sock_bind_abstract(sock);
    if (status != UCS_OK) {
        goto err;
    }
    return UCS_OK;

err:
    if (sock->fd >= 0) {
        close(sock->fd);
    }
    if (sock->dir_fd >= 0) {
        close(sock->dir_fd);
    }
    sock->fd = sock->dir_fd = -1;
    return status;
}


void uct_cuda_ipc_ns_broker_sock_close(uct_cuda_ipc_ns_broker_sock_t *sock)
{
    const char *name;

    if (sock->dir_fd >= 0) {
        name = strrchr(sock->name, '/') + 1;
        if (unlinkat(sock->dir_fd, name, 0) < 0) {
            ucs_debug("cuda_ipc_ns: unlink(%s) failed: %m", sock->name);
        }
        close(sock->dir_fd);
        sock->dir_fd = -1;
    }
    if (sock->fd >= 0) {
        close(sock->fd);
        sock->fd = -1;
    }
}
