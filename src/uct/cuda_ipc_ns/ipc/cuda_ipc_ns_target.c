/*
 * cuda_ipc_ns: the remote range of one op (see cuda_ipc_ns_target.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_target.h"
#include "cuda_ipc_ns_fdx.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <string.h>


void uct_cuda_ipc_ns_target_unpin_regions(uct_cuda_ipc_ns_cache_region_t **regions,
                                          unsigned count)
{
    unsigned i;

    for (i = 0; i < count; ++i) {
        uct_cuda_ipc_ns_cache_unpin(regions[i]);
    }
    ucs_free(regions);
}


void uct_cuda_ipc_ns_target_release(uct_cuda_ipc_ns_target_t *target)
{
    uct_cuda_ipc_ns_cache_unpin(target->region);
    if (target->more != NULL) {
        uct_cuda_ipc_ns_target_unpin_regions(target->more, target->count - 1);
        target->more = NULL;
    }
}


/* Index of the chunk holding @a offset (< the key's length) */
static uint32_t uct_cuda_ipc_ns_target_chunk_index(const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                                   uint32_t count,
                                                   uint64_t offset)
{
    uint32_t low = 0, high = count - 1, mid;

    /* chunks tile the key (checked when learned): the last one whose
     * offset is <= @a offset */
    while (low < high) {
        mid = low + (high - low + 1) / 2;
        if (chunks[mid].offset <= offset) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    return low;
}


ucs_status_t
uct_cuda_ipc_ns_target_memcpy_chunks(const uct_cuda_ipc_ns_target_t *target,
                                     CUdeviceptr local, size_t off,
                                     size_t length, int is_put, int any_memory,
                                     CUstream stream, int *posted_p)
{
    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunk;
    uct_cuda_ipc_ns_cache_region_t *region;
    ucs_status_t status;
    uint64_t pos;
    uint32_t index;
    size_t seg;

    pos   = target->offset + off;
    index = target->first +
            uct_cuda_ipc_ns_target_chunk_index(target->chunks + target->first,
                                               target->count,
                                               pos - target->chunks[target->first].offset);
    while (length > 0) {
        chunk  = &target->chunks[index];
        region = (index == target->first) ? target->region :
                 target->more[index - target->first - 1];
        seg    = ucs_min(length, chunk->offset + chunk->size - pos);
        status = uct_cuda_ipc_ns_target_memcpy_one(
                UCS_PTR_BYTE_OFFSET(region->mapping.addr, pos - chunk->offset),
                local, seg, is_put, any_memory, stream);
        if (status != UCS_OK) {
            return status;
        }
        *posted_p = 1;
        pos      += seg;
        local    += seg;
        length   -= seg;
        ++index;
    }
    return UCS_OK;
}


/* The layout of a key of several allocations, asked of its owner once */
static ucs_status_t
uct_cuda_ipc_ns_target_layout(uct_cuda_ipc_ns_md_rkey_t *key,
                              const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                              const uct_cuda_ipc_ns_broker_proto_chunk_t **chunks_p)
{
    uct_cuda_ipc_ns_broker_proto_chunk_t *chunks, *expected = NULL;
    ucs_status_t status;

    chunks = __atomic_load_n(&key->chunks, __ATOMIC_ACQUIRE);
    if (ucs_likely(chunks != NULL)) {
        *chunks_p = chunks;
        return UCS_OK;
    }

    status = uct_cuda_ipc_ns_fdx_layout(fdx, &key->info, &chunks);
    if (status != UCS_OK) {
        return status;
    }

    /* another thread may have learned it meanwhile: keep the first */
    if (!__atomic_compare_exchange_n(&key->chunks, &expected, chunks, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        ucs_free(chunks);
        chunks = expected;
    }
    *chunks_p = chunks;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_target_map_chunks(uct_cuda_ipc_ns_target_t *target,
                                               uct_cuda_ipc_ns_md_rkey_t *key,
                                               uct_cuda_ipc_ns_cache_peer_t *peer,
                                               int device, uint64_t offset,
                                               size_t length,
                                               const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx)
{
    uint32_t num_chunks = key->info.handle.posix.num_chunks;
    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks;
    uct_cuda_ipc_ns_cache_region_t **regions;
    ucs_status_t status;
    uint32_t last;

    status = uct_cuda_ipc_ns_target_layout(key, fdx, &chunks);
    if (status != UCS_OK) {
        return status;
    }

    target->chunks = chunks;
    target->offset = offset;
    target->first  = uct_cuda_ipc_ns_target_chunk_index(chunks, num_chunks,
                                                        offset);
    last           = uct_cuda_ipc_ns_target_chunk_index(chunks, num_chunks,
                                                        offset + length - 1);
    target->count  = last - target->first + 1;
    if (target->count == 1) {
        return uct_cuda_ipc_ns_cache_map_chunks(peer, &key->info, chunks,
                                                target->first, 1, device, fdx,
                                                &target->region);
    }

    regions = ucs_malloc(sizeof(*regions) * target->count,
                         "cuda_ipc_ns_op_regions");
    if (regions == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate the regions of %u chunks",
                  target->count);
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_ipc_ns_cache_map_chunks(peer, &key->info, chunks,
                                              target->first, target->count,
                                              device, fdx, regions);
    if (status != UCS_OK) {
        ucs_free(regions);
        return status;
    }

    /* the op holds the first region apart, the others in more[] */
    target->region = regions[0];
    memmove(regions, regions + 1, sizeof(*regions) * (target->count - 1));
    target->more   = regions;
    return UCS_OK;
}
