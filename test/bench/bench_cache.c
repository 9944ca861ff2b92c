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
#include "bench_stats.h"

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


/* The mapping stub: the cache's calls land here instead of the driver */
ucs_status_t uct_cuda_ipc_ns_map(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 int device, uct_cuda_ipc_ns_map_t *mapping,
                                 int *owner_pidfd_p)
{
    *owner_pidfd_p = -1;
    mapping->addr        = (void*)(uintptr_t)key->base;
    mapping->length      = key->length;
    mapping->handle_type = key->handle_type;
    mapping->device      = device;
    return UCS_OK;
}


void uct_cuda_ipc_ns_map_unmap(uct_cuda_ipc_ns_map_t *mapping)
{
}


/* Cache with @a count regions of one peer (mapping stub) */
static uct_cuda_ipc_ns_cache_peer_t *bench_cache_fill(uint64_t peer_pid, unsigned count)
{
    uct_cuda_ipc_ns_nsid_identity_t id = {1, 2, peer_pid, 4};
    uct_cuda_ipc_ns_rkey_info_t key;
    uct_cuda_ipc_ns_cache_region_t *region;
    uct_cuda_ipc_ns_cache_peer_t *peer;
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
 * cached, spread evenly over them, in batches of 1,000; @a lookups at least,
 * for at least @a min_time seconds; *done_p: how many */
static double bench_cache_hits(uct_cuda_ipc_ns_cache_peer_t *peer, unsigned count,
                               unsigned span, long lookups, double min_time,
                               long *done_p)
{
    uct_cuda_ipc_ns_rkey_info_t key;
    uct_cuda_ipc_ns_cache_region_t *region;
    uint64_t seed = 12345;
    static bench_samples_t batches;
    double t, t0, elapsed;
    unsigned i;
    long it = 0, batch;

    memset(&key, 0, sizeof(key));
    key.handle_type = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    key.length      = 1ul << 21;
    t               = bench_time_now();
    do {
        t0 = bench_time_now();
        for (batch = 0; batch < 1000; ++batch, ++it) {
            seed                      = seed * 6364136223846793005ull + 1;
            i                         = ((seed >> 33) % span) * (count / span);
            key.base                  = (uint64_t)(i + 1) << 21;
            key.handle.posix.alloc_id = i;
            uct_cuda_ipc_ns_cache_map(peer, &key, 0, NULL, &region);
            uct_cuda_ipc_ns_cache_unpin(region);
        }
        elapsed = bench_time_now();
        bench_samples_add(&batches, elapsed - t0);
        elapsed -= t;
    } while ((it < lookups) || (elapsed < min_time));
    *done_p = it;
    /* the median batch of 1,000: a batch preempted by another process is
     * an outlier */
    return bench_samples_median(&batches) / 1000 * 1e9;
}


/*
 * Rounds that alternate the two sizes (same machine state), each at least
 * 200,000 lookups and BENCH_MIN_TIME / rounds seconds, after a warm-up pass
 * over every cached region of both, for lookups over a working set of 1,000
 * regions (the algorithm: what a bigger cache costs a lookup) and over every
 * cached region (the memory system too: 100,000 regions do not fit the CPU
 * caches). Prints the ratio large/small per round: median and range.
 */
static void bench_cache(unsigned span, const char *name)
{
    uct_cuda_ipc_ns_cache_config_t config = {1, UINT_MAX, SIZE_MAX};
    const int rounds = bench_rounds();
    const double round_time = bench_round_time();
    double s[BENCH_MAX_ROUNDS], l[BENCH_MAX_ROUNDS], ratio[BENCH_MAX_ROUNDS];
    double n_s[BENCH_MAX_ROUNDS], n_l[BENCH_MAX_ROUNDS];
    uct_cuda_ipc_ns_cache_stats_t before, after;
    uct_cuda_ipc_ns_cache_peer_t *small, *large;
    bench_range_t rs, rl, is, il;
    long done;
    int round;

    BENCH_CHECK(uct_cuda_ipc_ns_cache_get(&config) == UCS_OK,
                "cache");
    small = bench_cache_fill(1000, 1000);
    large = bench_cache_fill(100000, 100000);
    bench_cache_hits(small, 1000, 1000, 1000, 0, &done);
    bench_cache_hits(large, 100000, 100000, 100000, 0, &done);
    uct_cuda_ipc_ns_cache_get_stats(&before);
    for (round = 0; round < rounds; ++round) {
        s[round]     = bench_cache_hits(small, 1000, 1000, 200000, round_time,
                                        &done);
        n_s[round]   = done;
        l[round]     = bench_cache_hits(large, 100000, span ? span : 100000,
                                        200000, round_time, &done);
        n_l[round]   = done;
        ratio[round] = l[round] / s[round];
    }
    uct_cuda_ipc_ns_cache_get_stats(&after);
    BENCH_CHECK(after.misses == before.misses, "every lookup a hit");
    rs = bench_range(s, rounds);
    rl = bench_range(l, rounds);
    is = bench_range(n_s, rounds);
    il = bench_range(n_l, rounds);
    printf("mapping cache hit, %s: %.1f ns (%.1f-%.1f) with 1,000 cached, "
           "%.1f ns (%.1f-%.1f) with 100,000 cached; %d rounds of %.0f-%.0f "
           "and %.0f-%.0f lookups\n", span ? "1,000 regions in use" :
           "every cached region in use", rs.med, rs.min, rs.max, rl.med,
           rl.min, rl.max, rounds, is.min, is.max, il.min, il.max);
    bench_print_ratio(name, ratio, rounds);

    uct_cuda_ipc_ns_cache_peer_put(small);
    uct_cuda_ipc_ns_cache_peer_put(large);
    uct_cuda_ipc_ns_cache_put();
}


int main(int argc, char **argv)
{
    bench_print_settings("bench_cache");
    bench_cache(1000, "cache hit 100,000 / 1,000 regions");
    bench_cache(0, "cache hit every region in use 100,000 / 1,000");
    return 0;
}
