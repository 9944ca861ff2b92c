/*
 * cuda_ipc_ns: the directory of pathname broker sockets, checked and held
 * open (docs/security.md, "Socket directory").
 *
 * A path is only a name: whoever can rename a directory on it, or swap a
 * symbolic link in it, decides where a bind or a connect lands. So the
 * directory is opened once, without following a link in its last
 * component, every directory above it is checked as OpenSSH's safe_path
 * does (owned by root or a trusted uid; not writable by group or others
 * unless sticky), and sockets are bound and connected through the open
 * directory (/proc/self/fd/N/name): a rename after the check changes
 * nothing.
 */
#ifndef UCT_CUDA_IPC_NS_SOCKDIR_H
#define UCT_CUDA_IPC_NS_SOCKDIR_H

#include <ucs/type/status.h>
#include <sys/socket.h>
#include <sys/un.h>


/**
 * Open socket directory @a dir (O_PATH, O_CLOEXEC).
 *
 * @param create       nonzero for the broker: the directory is created
 *                     (mode 0700) when absent, and must be owned by our
 *                     effective uid with no group/other permission.
 *                     Zero for an importer: it must be owned by our
 *                     effective uid or by @a allowed_uid (the broker's)
 *                     and writable by no one else.
 * @param allowed_uid  a uid trusted besides ours and root's, or -1.
 *
 * @return UCS_OK with *dirfd_p; UCS_ERR_INVALID_PARAM when a check fails
 *         (logged with the path and the reason); UCS_ERR_IO_ERROR or
 *         UCS_ERR_UNREACHABLE (no such directory) otherwise.
 */
ucs_status_t uct_cuda_ipc_ns_sockdir_open(const char *dir, int create,
                                          int allowed_uid, int *dirfd_p);


/**
 * Address of socket @a name inside the directory open as @a dirfd, through
 * /proc/self/fd. @return UCS_OK with *sa and *len_p, or
 * UCS_ERR_INVALID_PARAM when it does not fit.
 */
ucs_status_t uct_cuda_ipc_ns_sockdir_addr(int dirfd, const char *name,
                                          struct sockaddr_un *sa,
                                          socklen_t *len_p);


/**
 * Whether @a name is a name brokers bind, "cuda_ipc_ns-<pid>-<16 hex
 * digits>.sock"; with @a tmp, the temporary name ".cuda_ipc_ns-<pid>-<16
 * hex digits>" a socket has until it listens.
 */
int uct_cuda_ipc_ns_sockdir_is_sock_name(const char *name, int tmp);

#endif
