/*
 * cuda_ipc_ns: mapping cache figures as ratios measured in one run
 * (docs/architecture.md, "Performance"): the cost of a hit (map + unpin)
 * with 100,000 vs 1,000 cached regions (goal <= 2x).
 *
 * The cache alone: this program links its own copy of the cache
 * (ipc/cuda_ipc_ns_cache.c, see Makefile.am) with the mapping stub below in
 * place of ipc/cuda_ipc_ns_map.c, so no driver call is made and the library
 * carries no test seam.
 *
 * Usage: bench_cache
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_cache.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define BENCH_CHECK(_cond, _what) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "bench_cache: %s failed (%s:%d)\n", _what, \
                    __FILE__, __LINE__); \
            exit(1); \
        } \
    } while (0)


static double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* The mapping stub: the cache's calls land here instead of the driver */
ucs_status_t uct_cuda_ipc_ns_map(const uct_cuda_ipc_ns_fdx_config_t *fdx,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 int device, uct_cuda_ipc_ns_mapping_t *mapping,
                                 int *owner_pidfd_p)
{
    *owner_pidfd_p = -1;
    mapping->addr        = (void*)(uintptr_t)key->base;
    mapping->length      = key->length;
    mapping->handle_type = key->handle_type;
    mapping->device      = device;
    return UCS_OK;
}


void uct_cuda_ipc_ns_unmap(uct_cuda_ipc_ns_mapping_t *mapping)
{
}


/* Cache with @a count regions of one peer (mapping stub) */
static uct_cuda_ipc_ns_peer_t *bench_cache_fill(uint64_t peer_pid, unsigned count)
{
    uct_cuda_ipc_ns_identity_t id = {1, 2, peer_pid, 4};
    uct_cuda_ipc_ns_rkey_info_t key;
    uct_cuda_ipc_ns_region_t *region;
    uct_cuda_ipc_ns_peer_t *peer;
    unsigned i;

    BENCH_CHECK(uct_cuda_ipc_ns_cache_peer_get(&id, &peer) == UCS_OK, "peer");
    memset(&key, 0, sizeof(key));
    key.handle_type = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    key.length      = 1ul << 21;
    for (i = 0; i < count; ++i) {
        key.base                  = (uint64_t)(i + 1) << 21;
        key.handle.posix.alloc_id = i;
        BENCH_CHECK(uct_cuda_ipc_ns_cache_map(peer, &key, 0, NULL, &region) ==
                    UCS_OK, "insert");
        uct_cuda_ipc_ns_cache_unpin(region);
    }
    return peer;
}


/* ns per hit (map + unpin) on random regions among @a span of the @a count
 * cached, spread evenly over them */
static double bench_cache_hits(uct_cuda_ipc_ns_peer_t *peer, unsigned count,
                               unsigned span, int lookups)
{
    uct_cuda_ipc_ns_rkey_info_t key;
    uct_cuda_ipc_ns_region_t *region;
    uint64_t seed = 12345;
    double t;
    unsigned i;
    int it;

    memset(&key, 0, sizeof(key));
    key.handle_type = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    key.length      = 1ul << 21;
    t               = bench_now();
    for (it = 0; it < lookups; ++it) {
        seed                      = seed * 6364136223846793005ull + 1;
        i                         = ((seed >> 33) % span) * (count / span);
        key.base                  = (uint64_t)(i + 1) << 21;
        key.handle.posix.alloc_id = i;
        uct_cuda_ipc_ns_cache_map(peer, &key, 0, NULL, &region);
        uct_cuda_ipc_ns_cache_unpin(region);
    }
    return (bench_now() - t) / lookups * 1e9;
}


static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}


/*
 * Median over rounds that alternate the two sizes (same machine state), for
 * lookups over a working set of 1,000 regions (the algorithm: what a bigger
 * cache costs a lookup) and over every cached region (the memory system too:
 * 100,000 regions do not fit the CPU caches).
 */
static void bench_cache(unsigned span, double *small_p, double *large_p)
{
    uct_cuda_ipc_ns_cache_config_t config = {1, UINT_MAX, SIZE_MAX};
    uct_cuda_ipc_ns_cache_stats_t before, after;
    uct_cuda_ipc_ns_peer_t *small, *large;
    double s[9], l[9];
    int round;

    BENCH_CHECK(uct_cuda_ipc_ns_cache_get(&config) == UCS_OK,
                "cache");
    small = bench_cache_fill(1000, 1000);
    large = bench_cache_fill(100000, 100000);
    uct_cuda_ipc_ns_cache_get_stats(&before);
    for (round = 0; round < 9; ++round) {
        s[round] = bench_cache_hits(small, 1000, 1000, 200000);
        l[round] = bench_cache_hits(large, 100000, span ? span : 100000,
                                    200000);
    }
    uct_cuda_ipc_ns_cache_get_stats(&after);
    BENCH_CHECK(after.misses == before.misses, "every lookup a hit");
    qsort(s, 9, sizeof(double), bench_cmp_double);
    qsort(l, 9, sizeof(double), bench_cmp_double);
    *small_p = s[4];
    *large_p = l[4];

    uct_cuda_ipc_ns_cache_peer_put(small);
    uct_cuda_ipc_ns_cache_peer_put(large);
    uct_cuda_ipc_ns_cache_put();
}


int main(int argc, char **argv)
{
    double small, large, small_all, large_all;

    bench_cache(1000, &small, &large);
    bench_cache(0, &small_all, &large_all);
    printf("mapping cache hit, 1,000 regions in use: %.1f ns with 1,000 "
           "cached, %.1f ns with 100,000 cached; ratio %.3f (goal <= 2)\n",
           small, large, large / small);
    printf("mapping cache hit, every cached region in use: %.1f ns with "
           "1,000, %.1f ns with 100,000; ratio %.3f (memory-bound: 100,000 "
           "regions exceed the CPU caches)\n", small_all, large_all,
           large_all / small_all);
    return 0;
}
