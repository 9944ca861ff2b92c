/*
 * cuda_ipc_ns: the broker's registry of exported fds (docs/security.md).
 *
 * Each registration is an fd (borrowed from the memory domain), the
 * allocation id it exports and a 16-byte random token; a requester gets the
 * fd only by presenting both. Several registrations may share an allocation
 * id (one per registered range). Thread-safe: the memory domain adds and
 * removes registrations while the broker thread hands fds out.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_REGISTRY_H
#define UCT_CUDA_IPC_NS_BROKER_REGISTRY_H

#include "cuda_ipc_ns_rkey.h"

#include <ucs/datastruct/khash.h>
#include <ucs/type/status.h>
#include <pthread.h>
#include <stdint.h>


typedef struct uct_cuda_ipc_ns_broker_reg uct_cuda_ipc_ns_broker_reg_t;

KHASH_MAP_INIT_INT64(uct_cuda_ipc_ns_broker_regs, uct_cuda_ipc_ns_broker_reg_t*)


typedef struct uct_cuda_ipc_ns_broker_registry {
    pthread_mutex_t                      lock;
    khash_t(uct_cuda_ipc_ns_broker_regs) regs; /* alloc_id -> chain */
} uct_cuda_ipc_ns_broker_registry_t;


/**
 * Send @a fd, the registered fd of a request, to the requester; called with
 * the registry locked, so that the fd is not released meanwhile.
 */
typedef void (*uct_cuda_ipc_ns_broker_send_fd_func_t)(void *arg, int fd);


/* @a len random bytes from the kernel (tokens, socket names) */
ucs_status_t uct_cuda_ipc_ns_broker_random(void *buf, size_t len);


void uct_cuda_ipc_ns_broker_registry_init(uct_cuda_ipc_ns_broker_registry_t *registry);


/* Free what is left; the fds are the callers' and stay open */
void uct_cuda_ipc_ns_broker_registry_cleanup(uct_cuda_ipc_ns_broker_registry_t *registry,
                                             const char *name);


/* Add @a fd for @a alloc_id under a fresh random token (returned) */
ucs_status_t
uct_cuda_ipc_ns_broker_registry_add(uct_cuda_ipc_ns_broker_registry_t *registry,
                                    int fd, uint64_t alloc_id,
                                    uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                    uct_cuda_ipc_ns_broker_reg_t **reg_p);


/* Remove and free @a reg; once this returns its fd is never sent again */
void uct_cuda_ipc_ns_broker_registry_remove(uct_cuda_ipc_ns_broker_registry_t *registry,
                                            uct_cuda_ipc_ns_broker_reg_t *reg);


/**
 * Find the registration of (@a alloc_id, @a token), comparing every token
 * of the allocation in constant time, and pass its fd to @a send under the
 * lock. @return nonzero when found (and sent).
 */
int uct_cuda_ipc_ns_broker_registry_hand_out(uct_cuda_ipc_ns_broker_registry_t *registry,
                                             uint64_t alloc_id,
                                             const uint8_t *token,
                                             uct_cuda_ipc_ns_broker_send_fd_func_t send,
                                             void *arg);

#endif
