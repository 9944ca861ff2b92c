/*
 * cuda_ipc_ns: the broker's listening socket (docs/security.md).
 *
 * An abstract name with a random part by default (no file; it vanishes with
 * the socket; reachable from our network namespace only), or a pathname in
 * a socket directory opened and checked once (cuda_ipc_ns_sockdir.h),
 * bound under a temporary name and renamed once it listens, so that the
 * sweep of dead brokers' sockets never takes it for a dead one.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_SOCK_H
#define UCT_CUDA_IPC_NS_BROKER_SOCK_H

#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>
#include <sys/types.h>
#include <stdint.h>


typedef struct uct_cuda_ipc_ns_broker_sock {
    int     fd;         /* listening, nonblocking */
    int     dir_fd;     /* socket directory (O_PATH), -1: abstract */
    uint8_t addr_len;
    char    addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];      /* for keys */
    char    name[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 2];  /* printable */
} uct_cuda_ipc_ns_broker_sock_t;


/**
 * Listen for the broker of process @a owner_pid: abstract when @a sock_dir
 * is NULL or "", else in that directory (created 0700 when absent, refused
 * unless safe). @return UCS_OK or an error, logged.
 */
ucs_status_t uct_cuda_ipc_ns_broker_sock_listen(uct_cuda_ipc_ns_broker_sock_t *sock,
                                                pid_t owner_pid,
                                                const char *sock_dir);


/* Remove the socket's name (pathname) and close it */
void uct_cuda_ipc_ns_broker_sock_close(uct_cuda_ipc_ns_broker_sock_t *sock);

#endif
