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
