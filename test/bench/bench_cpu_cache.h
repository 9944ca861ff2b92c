/*
 * cuda_ipc_ns benchmarks: every bandwidth operation starts with its buffers
 * out of the CPU caches (docs/architecture.md, "Performance").
 *
 * On the emulator a copy is a memmove by some thread of the process that
 * runs it (a stream's worker), so its speed depends on which CPU's caches
 * hold the lines that the previous operation touched: measured on the
 * 2-core VM at 16 MiB (which fits a cache, 64 MiB does not), a get ran at
 * 0.65 of a put and an in-process copy in the get's direction at 1.6 times
 * the put's, from one run to the next, only because of the order in which
 * the interleaved operations ran on which CPU. A GPU's copy engine reads and
 * writes device memory, never a CPU cache. So, before each timed operation,
 * the benchmark writes back and evicts both of its buffers (clflush works
 * on the physical line, through any mapping of it, on every CPU): each
 * operation then copies from memory to memory, as every other one, and the
 * ratio compares the transport with the copy alone.
 *
 * Only the emulator's device memory passes through CPU caches, and the
 * application may not touch it (a CPU access of a device pointer faults,
 * on a GPU and on the emulator: docs/driver-contract.md): the emulator
 * evicts it through its own aliases (cudasim_cache_evict). On a GPU no CPU
 * cache holds device memory and nothing is evicted.
 *
 * BENCH_CACHE=keep leaves the caches as the previous operation left them
 * (the figures of earlier versions).
 */
#ifndef CUDA_IPC_NS_BENCH_CPU_CACHE_H_
#define CUDA_IPC_NS_BENCH_CPU_CACHE_H_

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef void (*bench_cache_evict_fn_t)(const void *addr, size_t len);


/* the emulator's eviction of device memory; NULL on a GPU's driver */
static inline bench_cache_evict_fn_t bench_cache_evictor(void)
{
    static bench_cache_evict_fn_t evict;
    static int looked_up;
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
    void *dl;

    if (!looked_up) {
        dl = dlopen((path != NULL) ? path : "libcuda.so.1",
                    RTLD_NOW | RTLD_NOLOAD);
        if (dl != NULL) {
            evict = (bench_cache_evict_fn_t)dlsym(dl, "cudasim_cache_evict");
            dlclose(dl);
        }
        looked_up = 1;
    }
    return evict;
}


/* whether operations start with their buffers out of the caches */
static inline int bench_cache_flush_enabled(void)
{
    const char *v = getenv("BENCH_CACHE");

    return (bench_cache_evictor() != NULL) &&
           ((v == NULL) || (strcmp(v, "keep") != 0));
}


/* what the figures' caption says about the caches */
static inline const char *bench_cache_mode(void)
{
    return bench_cache_flush_enabled() ?
           "each operation starts with its buffers out of the CPU caches "
           "(BENCH_CACHE=keep: as the previous operation left them)" :
           (bench_cache_evictor() == NULL) ?
           "device memory, in no CPU cache" :
           "the CPU caches as the previous operation left them";
}


/* write back and evict device memory [p, p + len) from every CPU's caches,
 * on the emulator */
static inline void bench_cache_evict(const void *p, size_t len)
{
    if (bench_cache_flush_enabled()) {
        bench_cache_evictor()(p, len);
    }
}

#endif
