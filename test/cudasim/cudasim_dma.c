/*
 * cudasim: how a copy engine writes memory. A GPU's copy engine reads and
 * writes device memory, never a CPU cache; a memmove by the stream's worker
 * leaves the destination dirty in that CPU's caches, so the next copy's
 * speed would depend on which CPU ran the last one and what it left there
 * (on the 2-core VM, a 16 MiB copy ran at 0.6 or 1.6 times another of the
 * same size with the order of the operations before it). Copies of
 * CUDASIM_DMA_MIN bytes and more are made with non-temporal stores, which go
 * to memory and leave no line of the destination in any cache: every copy
 * starts from the same cache state, as on a GPU (README.md, "Copies").
 * Overlapping ranges, other architectures, short copies and the sanitizer
 * builds use memmove (ASan and TSan check memmove's ranges, not the
 * intrinsics' stores).
 */
#include "cudasim_internal.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#  define CUDASIM_DMA_STREAM_STORES 1
#  include <emmintrin.h>
#endif

/* below this a copy fits the caches of one CPU and its handoff dominates */
#define CUDASIM_DMA_MIN (64ul << 10)


void cudasim_dma_copy(void *dst, const void *src, size_t len)
{
#ifdef CUDASIM_DMA_STREAM_STORES
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head;

    if ((len < CUDASIM_DMA_MIN) || ((d < s + len) && (s < d + len))) {
        memmove(dst, src, len);
        return;
    }
    /* the stores must be 16-byte aligned; the loads need not be */
    head = (16 - ((uintptr_t)d & 15)) & 15;
    memcpy(d, s, head);
    d   += head;
    s   += head;
    len -= head;
    for (; len >= 64; len -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i*)s);
        __m128i b = _mm_loadu_si128((const __m128i*)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i*)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i*)(s + 48));
        _mm_stream_si128((__m128i*)d, a);
        _mm_stream_si128((__m128i*)(d + 16), b);
        _mm_stream_si128((__m128i*)(d + 32), c);
        _mm_stream_si128((__m128i*)(d + 48), e);
    }
    memcpy(d, s, len);
    /* non-temporal stores are weakly ordered: visible before completion */
    _mm_sfence();
#else
    memmove(dst, src, len);
#endif
}


/*
 * Exported for the benchmarks (test/bench/bench_cpu_cache.h): write back
 * and evict the lines of device memory [addr, addr + len) from every CPU's
 * caches, through the emulator's aliases (clflush works on the physical
 * line, through any mapping of it, on every CPU), so that each timed copy
 * starts from memory as a GPU's copy engine does. The application's address
 * itself is PROT_NONE. Host memory and unknown addresses are left alone.
 */
CUDASIM_API void cudasim_cache_evict(const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr, end = (uintptr_t)addr + len, line;
    size_t avail;
    char *alias;

    cudasim_registry_rdlock();
    while (a < end) {
        alias = cudasim_region_alias(a, &avail);
        if (alias == NULL) {
            break;
        }
        avail = ((end - a) < avail) ? (end - a) : avail;
        for (line = (uintptr_t)alias & ~(uintptr_t)63;
             line < (uintptr_t)alias + avail; line += 64) {
#if defined(__x86_64__) || defined(__i386__)
            __asm__ volatile("clflush (%0)" : : "r"(line) : "memory");
#elif defined(__aarch64__)
            __asm__ volatile("dc civac, %0" : : "r"(line) : "memory");
#endif
        }
        a += avail;
    }
    cudasim_registry_unlock();
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("mfence" : : : "memory");
#elif defined(__aarch64__)
    __asm__ volatile("dsb sy" : : : "memory");
#endif
}
