/*
 * cuda_ipc_ns: host memory two processes share for copies by the owner
 * (docs/owner-copies.md, "The pinned host ring"): a memfd the importer
 * creates and seals against shrinking, mapped by both sides and registered
 * with the driver on both, so that each side's copy engine reads or writes
 * it (pods whose GPUs cannot see each other).
 */
#ifndef UCT_CUDA_IPC_NS_HOST_MEM_H
#define UCT_CUDA_IPC_NS_HOST_MEM_H

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


typedef struct uct_cuda_ipc_ns_host_mem {
    void     *ptr;   /* NULL: none */
    size_t   size;
    int      fd;     /* the creator's memfd; -1 where it was mapped */
    uint64_t id;     /* the memfd's inode: names it to the peer */
} uct_cuda_ipc_ns_host_mem_t;


/**
 * Create @a size bytes of shared host memory: a memfd, its pages allocated
 * now, sealed against shrinking and growing, mapped read-write and
 * registered with the driver (portable: every context) in the current
 * context. Errors name the system or driver call.
 */
ucs_status_t uct_cuda_ipc_ns_host_mem_create(size_t size,
                                             uct_cuda_ipc_ns_host_mem_t *mem);


/**
 * Map and register the peer's memory from @a fd (hostile until checked: a
 * regular file of exactly @a size bytes, all of them allocated (the peer
 * pays for them, not us), sealed with F_SEAL_SHRINK, so that the peer
 * cannot truncate it under our copies). @a fd is the caller's.
 * UCS_ERR_INVALID_PARAM with a log line naming @a what when it is not such
 * memory.
 */
ucs_status_t uct_cuda_ipc_ns_host_mem_map(int fd, size_t size, const char *what,
                                          uct_cuda_ipc_ns_host_mem_t *mem);


/* Undo uct_cuda_ipc_ns_host_mem_create() or _map(); nothing may still copy
 * to or from it */
void uct_cuda_ipc_ns_host_mem_free(uct_cuda_ipc_ns_host_mem_t *mem);

#endif
