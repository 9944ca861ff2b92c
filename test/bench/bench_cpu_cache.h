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
 * Only the emulator's device memory is CPU memory: on a GPU a CPU access of
 * a device pointer faults (cuda.h; docs/driver-contract.md), and no CPU
 * cache holds device memory, so nothing is evicted there.
 *
 * BENCH_CACHE=keep leaves the caches as the previous operation left them
 * (the figures of earlier versions).
 */
#ifndef CUDA_IPC_NS_BENCH_CPU_CACHE_H_
#define CUDA_IPC_NS_BENCH_CPU_CACHE_H_

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_CACHE_LINE 64


/* whether the loaded driver is the emulator, whose device memory is CPU
 * memory (its marker symbol, test/cudasim) */
static inline int bench_device_memory_is_cpu_memory(void)
{
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
    void *dl;
    int found;

    dl = dlopen((path != NULL) ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (dl == NULL) {
        return 0;
    }
    found = dlsym(dl, "cudasim_is_emulator") != NULL;
    dlclose(dl);
    return found;
}


/* whether operations start with their buffers out of the caches */
static inline int bench_cache_flush_enabled(void)
{
    static int device_in_cpu_caches = -1;
    const char *v                   = getenv("BENCH_CACHE");

    if (device_in_cpu_caches < 0) {
        device_in_cpu_caches = bench_device_memory_is_cpu_memory();
    }
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
    return device_in_cpu_caches && ((v == NULL) || (strcmp(v, "keep") != 0));
#else
    (void)v;
    return 0;
#endif
}


/* what the figures' caption says about the caches */
static inline const char *bench_cache_mode(void)
{
    return bench_cache_flush_enabled() ?
           "each operation starts with its buffers out of the CPU caches "
           "(BENCH_CACHE=keep: as the previous operation left them)" :
           !bench_device_memory_is_cpu_memory() ?
           "device memory, in no CPU cache" :
           "the CPU caches as the previous operation left them";
}


/* write back and evict the lines of [p, p + len) from every CPU's caches */
static inline void bench_cache_evict(const void *p, size_t len)
{
    uintptr_t a   = (uintptr_t)p & ~(uintptr_t)(BENCH_CACHE_LINE - 1);
    uintptr_t end = (uintptr_t)p + len;

    if (!bench_cache_flush_enabled()) {
        return;
    }
    for (; a < end; a += BENCH_CACHE_LINE) {
#if defined(__x86_64__) || defined(__i386__)
        __asm__ volatile("clflush (%0)" : : "r"(a) : "memory");
#elif defined(__aarch64__)
        __asm__ volatile("dc civac, %0" : : "r"(a) : "memory");
#endif
    }
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("mfence" : : : "memory");
#elif defined(__aarch64__)
    __asm__ volatile("dsb sy" : : : "memory");
#endif
}

#endif
