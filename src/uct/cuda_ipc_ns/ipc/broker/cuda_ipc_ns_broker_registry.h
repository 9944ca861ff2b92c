/*
 * cuda_ipc_ns: the broker's registry of exported fds (docs/security.md).
 *
 * Each registration is an fd (borrowed from the memory domain), the
 * allocation id it exports and a 16-byte random token; a requester gets the
 * fd only by presenting both. Several registrations may share an allocation
 * id (one per registered range). A registration of several allocations
 * (docs/framework-memory.md) holds no fd: its layout (base, chunks) is
 * registered under its registration id, and a chunk is exported when a
 * requester asks for it. Thread-safe: the memory domain adds and
 * removes registrations while the broker thread hands fds out.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_REGISTRY_H
#define UCT_CUDA_IPC_NS_BROKER_REGISTRY_H

#include "cuda_ipc_ns_broker_proto.h"

#include <ucs/datastruct/khash.h>
#include <cuda.h>
#include <ucs/type/status.h>
#include <pthread.h>
#include <stdint.h>


typedef struct uct_cuda_ipc_ns_broker_reg uct_cuda_ipc_ns_broker_registry_reg_t;

KHASH_MAP_INIT_INT64(uct_cuda_ipc_ns_broker_regs, uct_cuda_ipc_ns_broker_registry_reg_t*)


typedef struct uct_cuda_ipc_ns_broker_registry {
    pthread_mutex_t                      lock;
    pthread_cond_t                       copies_done; /* a range's copies */
    khash_t(uct_cuda_ipc_ns_broker_regs) regs; /* alloc_id -> chain */
} uct_cuda_ipc_ns_broker_registry_t;


/* Where a copy of a range registration reads or writes, pinned until
 * uct_cuda_ipc_ns_broker_registry_copy_end() */
typedef struct uct_cuda_ipc_ns_broker_registry_range {
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    uint64_t                     addr;   /* base + offset, in the owner */
    CUcontext                    ctx;    /* the memory's context */
    int                          device;
} uct_cuda_ipc_ns_broker_registry_range_t;


/**
 * Send @a fd, the registered fd of a request, to the requester; called with
 * the registry locked, so that the fd is not released meanwhile.
 */
typedef void (*uct_cuda_ipc_ns_broker_registry_send_fd_func_t)(void *arg, int fd);


/**
 * Export the chunk at @a addr (@a size bytes, allocation id @a alloc_id) for
 * the requester; called with the registry locked, so that the registration
 * is not released meanwhile.
 */
typedef void (*uct_cuda_ipc_ns_broker_registry_export_chunk_func_t)(void *arg,
                                                                    uint64_t addr,
                                                                    uint64_t size,
                                                                    uint64_t alloc_id);


/* @a len random bytes from the kernel (tokens, socket names) */
ucs_status_t uct_cuda_ipc_ns_broker_registry_random(void *buf, size_t len);


void uct_cuda_ipc_ns_broker_registry_init(uct_cuda_ipc_ns_broker_registry_t *registry);


/* Free what is left; the fds are the callers' and stay open */
void uct_cuda_ipc_ns_broker_registry_cleanup(uct_cuda_ipc_ns_broker_registry_t *registry,
                                             const char *name);


/* Add @a fd for @a alloc_id under a fresh random token (returned) */
ucs_status_t
uct_cuda_ipc_ns_broker_registry_add(uct_cuda_ipc_ns_broker_registry_t *registry,
                                    int fd, uint64_t alloc_id,
                                    uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                    uct_cuda_ipc_ns_broker_registry_reg_t **reg_p);


/**
 * Add a registration of @a num_chunks allocations mapped back to back from
 * @a base (@a chunks is copied) under @a reg_id and a fresh random token
 * (returned). It holds no fd.
 */
ucs_status_t
uct_cuda_ipc_ns_broker_registry_add_chunks(uct_cuda_ipc_ns_broker_registry_t *registry,
                                           uint64_t reg_id, uint64_t base,
                                           const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                           uint32_t num_chunks,
                                           uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                           uct_cuda_ipc_ns_broker_registry_reg_t **reg_p);


/**
 * Copy at most UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX chunks of the registration
 * of (@a reg_id, @a token), from index @a first, to @a chunks.
 * @return nonzero when found and @a first is one of its chunks (then
 *         *count_p and *total_p are set).
 */
int uct_cuda_ipc_ns_broker_registry_layout(uct_cuda_ipc_ns_broker_registry_t *registry,
                                           uint64_t reg_id, const uint8_t *token,
                                           uint32_t first,
                                           uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                           uint32_t *count_p, uint32_t *total_p);


/**
 * Find chunks @a first..first+count-1 of the registration of (@a reg_id,
 * @a token) and pass each one's address, size and allocation id, in order,
 * to @a export_chunk under the lock.
 * @return nonzero when found and all @a count are its chunks (then each was
 *         passed).
 */
int uct_cuda_ipc_ns_broker_registry_hand_out_chunks(uct_cuda_ipc_ns_broker_registry_t *registry,
                                                    uint64_t reg_id,
                                                    const uint8_t *token,
                                                    uint32_t first,
                                                    uint32_t count,
                                                    uct_cuda_ipc_ns_broker_registry_export_chunk_func_t export_chunk,
                                                    void *arg);


/**
 * Add memory the broker copies to and from for importers (legacy memory,
 * VMM without a POSIX-fd handle type: docs/owner-copies.md): @a length
 * bytes at @a base in context @a ctx of @a device, under @a reg_id and a
 * fresh random token (returned). It holds no fd.
 */
ucs_status_t
uct_cuda_ipc_ns_broker_registry_add_range(uct_cuda_ipc_ns_broker_registry_t *registry,
                                          uint64_t reg_id, uint64_t base,
                                          uint64_t length, CUcontext ctx,
                                          int device,
                                          uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                          uct_cuda_ipc_ns_broker_registry_reg_t **reg_p);


/**
 * Find the range registration of (@a reg_id, @a token) and check that
 * [@a offset, @a offset + @a length) lies within it; then pin it in
 * @a range until uct_cuda_ipc_ns_broker_registry_copy_end().
 *
 * @return UCT_CUDA_IPC_NS_BROKER_STATUS_OK, NO_ENTRY (no such range
 *         registration, or another token) or RANGE.
 */
uct_cuda_ipc_ns_broker_proto_status_t
uct_cuda_ipc_ns_broker_registry_copy_begin(uct_cuda_ipc_ns_broker_registry_t *registry,
                                           uint64_t reg_id, const uint8_t *token,
                                           uint64_t offset, uint64_t length,
                                           uct_cuda_ipc_ns_broker_registry_range_t *range);


/* The copy of @a range is done: its registration may be removed */
void uct_cuda_ipc_ns_broker_registry_copy_end(uct_cuda_ipc_ns_broker_registry_t *registry,
                                              const uct_cuda_ipc_ns_broker_registry_range_t *range);


/* Remove and free @a reg; once this returns its fd is never sent again and
 * no copy of it runs */
void uct_cuda_ipc_ns_broker_registry_remove(uct_cuda_ipc_ns_broker_registry_t *registry,
                                            uct_cuda_ipc_ns_broker_registry_reg_t *reg);


/**
 * Find the registration of (@a alloc_id, @a token), comparing every token
 * of the allocation in constant time, and pass its fd to @a send under the
 * lock. @return nonzero when found (and sent).
 */
int uct_cuda_ipc_ns_broker_registry_hand_out(uct_cuda_ipc_ns_broker_registry_t *registry,
                                             uint64_t alloc_id,
                                             const uint8_t *token,
                                             uct_cuda_ipc_ns_broker_registry_send_fd_func_t send,
                                             void *arg);

#endif
