/*
 * cuda_ipc_ns: per-process fd broker, the server side of the fd exchange.
 *
 * One broker per process, shared by all MDs (refcounted). It listens on an
 * AF_UNIX SOCK_SEQPACKET socket (abstract name by default, or a pathname in
 * a 0700 directory) and hands a registered fd by SCM_RIGHTS to a requester
 * that (1) has our effective uid or the configured extra uid (SO_PEERCRED),
 * and (2) presents the 16-byte secret token of a live registration together
 * with its allocation id. Everything else is refused, logged once per peer.
 * Messages: cuda_ipc_ns_broker_proto.h; the rules: docs/security.md.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_H
#define UCT_CUDA_IPC_NS_BROKER_H

#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_broker_registry.h"

#include <ucs/type/status.h>
#include <stdint.h>


typedef struct uct_cuda_ipc_ns_broker uct_cuda_ipc_ns_broker_t;


/**
 * Get the broker of this process, starting it on first use. The first
 * caller's configuration (sock_dir, req_timeout, allowed_uid) is the one
 * used.
 * After fork() the child never uses the parent's broker: it starts its own.
 */
ucs_status_t uct_cuda_ipc_ns_broker_get(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                        uct_cuda_ipc_ns_broker_t **broker_p);


/* Drop a reference; the last one stops the thread and removes the socket */
void uct_cuda_ipc_ns_broker_put(uct_cuda_ipc_ns_broker_t *broker);


/**
 * Address to put in remote keys: the sun_path bytes (abstract names start
 * with '\0', not NUL-terminated), *len_p <= 108.
 */
const char *uct_cuda_ipc_ns_broker_addr(uct_cuda_ipc_ns_broker_t *broker,
                                        uint8_t *len_p);


/**
 * Register @a fd (borrowed: the caller keeps it open until unregister) for
 * allocation @a alloc_id, with a fresh random token returned in @a token.
 */
ucs_status_t uct_cuda_ipc_ns_broker_register(uct_cuda_ipc_ns_broker_t *broker,
                                             int fd, uint64_t alloc_id,
                                             uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                             uct_cuda_ipc_ns_broker_registry_reg_t **reg_p);


/**
 * Register the layout of a range of @a num_chunks allocations mapped back to
 * back from @a base (copied) under @a reg_id, with a fresh random token. No
 * fd is held: the broker exports a chunk when a requester asks for it, and
 * only while the allocation mapped there is still the chunk's
 * (docs/framework-memory.md).
 */
ucs_status_t uct_cuda_ipc_ns_broker_register_chunks(uct_cuda_ipc_ns_broker_t *broker,
                                                    uint64_t reg_id, uint64_t base,
                                                    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                                    uint32_t num_chunks,
                                                    uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                                    uct_cuda_ipc_ns_broker_registry_reg_t **reg_p);


/**
 * Register @a length bytes at @a base (context @a ctx of @a device) that
 * importers which cannot map them ask the broker to copy to and from
 * (docs/owner-copies.md), under @a reg_id and a fresh random token.
 */
ucs_status_t uct_cuda_ipc_ns_broker_register_range(uct_cuda_ipc_ns_broker_t *broker,
                                                   uint64_t reg_id, uint64_t base,
                                                   uint64_t length, CUcontext ctx,
                                                   int device,
                                                   uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                                   uct_cuda_ipc_ns_broker_registry_reg_t **reg_p);


/**
 * Release a registration. Once this returns the broker never hands out that
 * fd again (a request being served finishes before, under the same lock), so
 * the caller may close it; a range's copies running finish first.
 */
void uct_cuda_ipc_ns_broker_unregister(uct_cuda_ipc_ns_broker_t *broker,
                                       uct_cuda_ipc_ns_broker_registry_reg_t *reg);


/**
 * For tests: return once the broker of this process (if one runs) has closed
 * every connection it accepted (a COPY session included: its copier closes
 * it once the client closed and its copies ended). A client gets its reply before the broker
 * closes its end, on the broker's thread; a test counting this process's fds
 * waits here instead of polling. A connection whose client stays silent is
 * closed at its deadline (UCX_CUDA_IPC_NS_SOCK_REQ_TIMEOUT).
 */
void uct_cuda_ipc_ns_broker_wait_idle(void);

#endif
