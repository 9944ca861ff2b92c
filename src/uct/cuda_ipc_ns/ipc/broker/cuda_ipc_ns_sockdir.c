/*
 * cuda_ipc_ns: the directory of pathname broker sockets (see
 * cuda_ipc_ns_sockdir.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_sockdir.h"

#include <ucs/debug/log.h>

#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define UCT_CUDA_IPC_NS_SOCKDIR_OPEN_FLAGS \
    (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)


static int uct_cuda_ipc_ns_sockdir_trusted_uid(uid_t uid, int allowed_uid)
{
    return (uid == 0) || (uid == geteuid()) ||
           ((allowed_uid >= 0) && (uid == (uid_t)allowed_uid));
}


/* A directory above the socket directory: safe_path's rule */
static ucs_status_t uct_cuda_ipc_ns_sockdir_check_parent(int fd, const char *path,
                                                         int allowed_uid)
{
    struct stat st;

    if (fstat(fd, &st) < 0) {
        ucs_error("cuda_ipc_ns: fstat(%s) failed: %m", path);
        return UCS_ERR_IO_ERROR;
    }

    if (!uct_cuda_ipc_ns_sockdir_trusted_uid(st.st_uid, allowed_uid) ||
        ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
        ucs_error("cuda_ipc_ns: refusing socket directory under '%s': owner "
                  "uid %u mode 0%o; every directory above it must be owned by "
                  "root or uid %u and not writable by group/other unless "
                  "sticky", path, (unsigned)st.st_uid,
                  (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}


/* The socket directory itself */
static ucs_status_t uct_cuda_ipc_ns_sockdir_check_final(int fd, const char *dir,
                                                        int create,
                                                        int allowed_uid)
{
    uid_t euid = geteuid();
    struct stat st;

    if (fstat(fd, &st) < 0) {
        ucs_error("cuda_ipc_ns: fstat(%s) failed: %m", dir);
        return UCS_ERR_IO_ERROR;
    }

    if (S_ISLNK(st.st_mode)) {
        ucs_error("cuda_ipc_ns: refusing socket directory '%s': it is a "
                  "symbolic link", dir);
        return UCS_ERR_INVALID_PARAM;
    } else if (!S_ISDIR(st.st_mode)) {
        ucs_error("cuda_ipc_ns: socket directory '%s' is not a directory", dir);
        return UCS_ERR_INVALID_PARAM;
    }

    if (create) {
        if ((st.st_uid != euid) || (st.st_mode & 077)) {
            ucs_error("cuda_ipc_ns: refusing socket directory '%s': owner uid "
                      "%u mode 0%o, need owner uid %u and no group/other "
                      "access (chmod 0700)", dir, (unsigned)st.st_uid,
                      (unsigned)(st.st_mode & 07777), (unsigned)euid);
            return UCS_ERR_INVALID_PARAM;
        }
    } else if (((st.st_uid != euid) &&
                ((allowed_uid < 0) || (st.st_uid != (uid_t)allowed_uid))) ||
               (st.st_mode & (S_IWGRP | S_IWOTH))) {
        ucs_error("cuda_ipc_ns: refusing broker socket directory '%s': owner "
                  "uid %u mode 0%o, need owner uid %u (or the allowed uid %d) "
                  "and no group/other write", dir, (unsigned)st.st_uid,
                  (unsigned)(st.st_mode & 07777), (unsigned)euid, allowed_uid);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}


/* Open every directory of absolute @a path from /, checking each */
static ucs_status_t uct_cuda_ipc_ns_sockdir_walk(const char *path,
                                                 int allowed_uid, int *fd_p)
{
    char walked[PATH_MAX];
    const char *p = path, *end;
    ucs_status_t status;
    size_t walked_len;
    int fd, next;

    fd = open("/", UCT_CUDA_IPC_NS_SOCKDIR_OPEN_FLAGS);
    if (fd < 0) {
        ucs_error("cuda_ipc_ns: open(/) failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    strcpy(walked, "/");
    walked_len = 1;

    for (;;) {
        status = uct_cuda_ipc_ns_sockdir_check_parent(fd, walked, allowed_uid);
        if (status != UCS_OK) {
            goto err_close;
        }

        while (*p == '/') {
            ++p;
        }
        if (*p == '\0') {
            break;
        }
        end = strchrnul(p, '/');
        if (walked_len + 1 + (end - p) >= sizeof(walked)) {
            ucs_error("cuda_ipc_ns: socket directory path '%s' is too long",
                      path);
            status = UCS_ERR_INVALID_PARAM;
            goto err_close;
        }
        walked_len += snprintf(walked + walked_len, sizeof(walked) - walked_len,
                               "%s%.*s", (walked_len > 1) ? "/" : "",
                               (int)(end - p), p);

        next = openat(fd, walked + walked_len - (end - p),
                      UCT_CUDA_IPC_NS_SOCKDIR_OPEN_FLAGS);
        if (next < 0) {
            ucs_error("cuda_ipc_ns: cannot open directory '%s' (of socket "
                      "directory path '%s'): %m", walked, path);
            status = UCS_ERR_IO_ERROR;
            goto err_close;
        }
        close(fd);
        fd = next;
        p  = end;
    }

    *fd_p = fd;
    return UCS_OK;

err_close:
    close(fd);
    return status;
}


/*
 * Split @a dir, "a/b/c//", into its parent "a/b" (@a *parent_path_p) and its
 * last component "c" (@a *base_p), both in @a parent (PATH_MAX bytes).
 */
static ucs_status_t
uct_cuda_ipc_ns_sockdir_split(const char *dir, char *parent,
                              const char **parent_path_p, const char **base_p)
{
    const char *base, *parent_path;
    size_t len;

    len = strlen(dir);
    while ((len > 1) && (dir[len - 1] == '/')) {
        --len;
    }
    if ((len == 0) || (len >= PATH_MAX)) {
        ucs_error("cuda_ipc_ns: invalid socket directory '%s'", dir);
        return UCS_ERR_INVALID_PARAM;
    }
    memcpy(parent, dir, len);
    parent[len] = '\0';
    base        = strrchr(parent, '/');
    if (base == NULL) {
        base        = parent;
        parent_path = ".";
    } else {
        parent_path = (base == parent) ? "/" : parent;
        parent[base - parent] = '\0';
        ++base;
    }
    if ((base[0] == '\0') || !strcmp(base, ".") || !strcmp(base, "..")) {
        ucs_error("cuda_ipc_ns: invalid socket directory '%s' (name a "
                  "directory by its own name)", dir);
        return UCS_ERR_INVALID_PARAM;
    }

    *parent_path_p = parent_path;
    *base_p        = base;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_sockdir_open(const char *dir, int create,
                                          int allowed_uid, int *dirfd_p)
{
    char parent[PATH_MAX], resolved[PATH_MAX];
    const char *base, *parent_path;
    ucs_status_t status;
    int pfd, fd;

    status = uct_cuda_ipc_ns_sockdir_split(dir, parent, &parent_path, &base);
    if (status != UCS_OK) {
        return status;
    }

    /* links above the directory (/var/run -> /run) are resolved once; the
     * result is walked and checked from / without following any link */
    if (realpath(parent_path, resolved) == NULL) {
        ucs_error("cuda_ipc_ns: cannot resolve the parent of socket "
                  "directory '%s': %m", dir);
        return (errno == ENOENT) ? UCS_ERR_UNREACHABLE : UCS_ERR_IO_ERROR;
    }

    status = uct_cuda_ipc_ns_sockdir_walk(resolved, allowed_uid, &pfd);
    if (status != UCS_OK) {
        return status;
    }

    if (create) {
        if (mkdirat(pfd, base, 0700) == 0) {
            ucs_debug("cuda_ipc_ns: created socket directory '%s'", dir);
        } else if (errno != EEXIST) {
            ucs_error("cuda_ipc_ns: cannot create socket directory '%s': %m",
                      dir);
            close(pfd);
            return UCS_ERR_IO_ERROR;
        }
    }

    /* O_PATH|O_NOFOLLOW opens a link itself: the check below refuses it */
    fd = openat(pfd, base, UCT_CUDA_IPC_NS_SOCKDIR_OPEN_FLAGS & ~O_DIRECTORY);
    close(pfd);
    if (fd < 0) {
        ucs_error("cuda_ipc_ns: cannot open socket directory '%s': %m", dir);
        return (errno == ENOENT) ? UCS_ERR_UNREACHABLE : UCS_ERR_IO_ERROR;
    }

    status = uct_cuda_ipc_ns_sockdir_check_final(fd, dir, create, allowed_uid);
    if (status != UCS_OK) {
        close(fd);
        return status;
    }

    *dirfd_p = fd;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_sockdir_addr(int dirfd, const char *name,
                                          struct sockaddr_un *sa,
                                          socklen_t *len_p)
{
    int len;

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    len = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s",
                   dirfd, name);
    if ((len < 0) || (len >= sizeof(sa->sun_path))) {
        ucs_error("cuda_ipc_ns: socket name '%s' is too long", name);
        return UCS_ERR_INVALID_PARAM;
    }

    *len_p = offsetof(struct sockaddr_un, sun_path) + len + 1;
    return UCS_OK;
}


int uct_cuda_ipc_ns_sockdir_is_sock_name(const char *name, int tmp)
{
    static const char prefix[] = "cuda_ipc_ns-";
    const char *p;
    int digits;

    if (tmp && (*name++ != '.')) {
        return 0;
    }
    if (strncmp(name, prefix, sizeof(prefix) - 1)) {
        return 0;
    }
    p = name + sizeof(prefix) - 1;
    for (digits = 0; (*p >= '0') && (*p <= '9'); ++p, ++digits) {
    }
    if ((digits == 0) || (digits > 10) || (*p++ != '-')) {
        return 0;
    }
    for (digits = 0; ((*p >= '0') && (*p <= '9')) || ((*p >= 'a') && (*p <= 'f'));
         ++p, ++digits) {
    }
    return (digits == 16) && !strcmp(p, tmp ? "" : ".sock");
}
