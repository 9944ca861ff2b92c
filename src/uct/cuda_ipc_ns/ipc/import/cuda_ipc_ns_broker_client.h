/*
 * cuda_ipc_ns: the importer's connection to an owner's broker.
 *
 * A call of the client connects to the broker the key names (an abstract
 * name as it is, a pathname only through its checked socket directory,
 * cuda_ipc_ns_sockdir.h), checks that the broker is the key's owner
 * (cuda_ipc_ns_owner.h) before sending anything, then sends one request
 * and receives its reply with its fds: one request per connection, the
 * broker closes after answering. Everything from the connect to the last
 * fd has one deadline, cfg->timeout from the client's start (1 s when not
 * positive). Requests that keep their connection (COPY) take a connected
 * and checked socket instead.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_CLIENT_H
#define UCT_CUDA_IPC_NS_BROKER_CLIENT_H

#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_rkey.h"

#include <ucs/time/time.h>
#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


/* seconds, when cfg->timeout is not positive */
#define UCT_CUDA_IPC_NS_BROKER_CLIENT_TIMEOUT 1.0


typedef struct uct_cuda_ipc_ns_broker_client {
    const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg;
    const uct_cuda_ipc_ns_rkey_info_t               *key;
    double                                          timeout;  /* seconds */
    ucs_time_t                                      deadline;
    /* the broker's printable address, for the logs */
    char                                            name[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 2];
} uct_cuda_ipc_ns_broker_client_t;


/* Start a client of @a key's broker: its deadline runs from now */
void uct_cuda_ipc_ns_broker_client_start(uct_cuda_ipc_ns_broker_client_t *client,
                                         const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                         const uct_cuda_ipc_ns_rkey_info_t *key);

/**
 * A socket connected to the broker and checked as the key's owner.
 *
 * @param [out] pidfd_p  the owner's pidfd when known, else -1 (the caller's).
 *
 * @return UCS_OK with *sock_p (the caller closes it), or the statuses of
 *         uct_cuda_ipc_ns_fdx_import() for the connect and the owner check.
 */
ucs_status_t
uct_cuda_ipc_ns_broker_client_connect(uct_cuda_ipc_ns_broker_client_t *client,
                                      int *sock_p, int *pidfd_p);

/**
 * One request @a req and its reply (at most @a reply_max bytes and
 * @a max_fds fds, more are refused) on a connection of its own.
 *
 * @param [out] pidfd_p  as for uct_cuda_ipc_ns_broker_client_connect().
 */
ucs_status_t
uct_cuda_ipc_ns_broker_client_call(uct_cuda_ipc_ns_broker_client_t *client,
                                   const uint8_t *req, size_t req_len,
                                   uint8_t *reply, size_t reply_max,
                                   size_t *len_p, int *fds, unsigned max_fds,
                                   unsigned *num_fds_p, int *pidfd_p);

/* Log a call that ended with @a status, when it is the deadline's */
void uct_cuda_ipc_ns_broker_client_log(const uct_cuda_ipc_ns_broker_client_t *client,
                                       ucs_status_t status);

#endif
