/*
 * cuda_ipc_ns: the remote range of one op, mapped here and pinned — one
 * allocation, or the chunks of a key of several allocations — and the
 * copies between it and a local buffer, split at chunk boundaries
 * (docs/framework-memory.md, "Split at chunk boundaries").
 */
#ifndef UCT_CUDA_IPC_NS_TARGET_H
#define UCT_CUDA_IPC_NS_TARGET_H

#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_driver.h"

#include <cuda.h>


/* A remote range mapped here, pinned, and the context to copy in */
typedef struct {
    uct_cuda_ipc_ns_cache_region_t             *region;  /* the first (or only) one */
    void                                       *remote;  /* one allocation: the mapped
                                               address of remote_addr */
    CUcontext                                  ctx;      /* of the local buffer */
    /* a key of several allocations (chunks != NULL): the range touches its
     * chunks first..first+count-1; region maps the first, more[] the
     * others (heap, count - 1 entries) */
    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks;
    uint64_t                                   offset;   /* of remote_addr in the key */
    uint32_t                                   first;
    uint32_t                                   count;
    uct_cuda_ipc_ns_cache_region_t             **more;
} uct_cuda_ipc_ns_target_t;


/* Unpin @a count regions and free their array (a target's more[]) */
void uct_cuda_ipc_ns_target_unpin_regions(uct_cuda_ipc_ns_cache_region_t **regions,
                                          unsigned count);

/* Unpin everything @a target holds */
void uct_cuda_ipc_ns_target_release(uct_cuda_ipc_ns_target_t *target);

/*
 * Map and pin the chunks of @a key that [offset, offset + length) touches
 * into @a target, each one a region of the cache of its own, the ones not
 * mapped yet imported in batches (uct_cuda_ipc_ns_cache_map_chunks()); the
 * key's layout is asked of its owner once (through @a fdx) and kept in it.
 */
ucs_status_t uct_cuda_ipc_ns_target_map_chunks(uct_cuda_ipc_ns_target_t *target,
                                               uct_cuda_ipc_ns_md_rkey_t *key,
                                               uct_cuda_ipc_ns_cache_peer_t *peer,
                                               int device, uint64_t offset,
                                               size_t length,
                                               const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx);

/* The copies of a target of several chunks (uct_cuda_ipc_ns_target_memcpy) */
ucs_status_t
uct_cuda_ipc_ns_target_memcpy_chunks(const uct_cuda_ipc_ns_target_t *target,
                                     CUdeviceptr local, size_t off,
                                     size_t length, int is_put, int any_memory,
                                     CUstream stream, int *posted_p);


/* One copy on @a stream; @a any_memory: the local side may be host memory */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cuda_ipc_ns_target_memcpy_one(void *remote, CUdeviceptr local,
                                  size_t length, int is_put, int any_memory,
                                  CUstream stream)
{
    CUdeviceptr dst = is_put ? (CUdeviceptr)remote : local;
    CUdeviceptr src = is_put ? local : (CUdeviceptr)remote;

    return any_memory ?
           UCT_CUDA_IPC_NS_CU(cuMemcpyAsync, dst, src, length, stream) :
           UCT_CUDA_IPC_NS_CU(cuMemcpyDtoDAsync, dst, src, length, stream);
}


/*
 * Copy @a length bytes between @a local and the target's range at @a off
 * (from remote_addr). A key of several allocations is copied chunk by chunk,
 * each chunk through its own mapping. *posted_p is set once a copy was
 * enqueued.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cuda_ipc_ns_target_memcpy(const uct_cuda_ipc_ns_target_t *target,
                              CUdeviceptr local, size_t off, size_t length,
                              int is_put, int any_memory, CUstream stream,
                              int *posted_p)
{
    ucs_status_t status;

    if (ucs_likely(target->chunks == NULL)) {
        status = uct_cuda_ipc_ns_target_memcpy_one(
                UCS_PTR_BYTE_OFFSET(target->remote, off), local, length,
                is_put, any_memory, stream);
        *posted_p |= (status == UCS_OK);
        return status;
    }

    return uct_cuda_ipc_ns_target_memcpy_chunks(target, local, off, length,
                                                is_put, any_memory, stream,
                                                posted_p);
}

#endif
