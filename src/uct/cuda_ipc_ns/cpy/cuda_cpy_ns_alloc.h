/*
 * cuda_cpy_ns: allocation of CUDA device memory for UCP (the copy MD's
 * mem_alloc) and for ucx_perftest (cuda_cpy_ns_perftest.c).
 *
 * By default the memory is a VMM allocation created with the POSIX-fd handle
 * type, so that cu_ipc_ns can export it to a process in another PID namespace
 * (docs/ucp.md); cuMemAlloc ("legacy") on request, or separate VMM
 * allocations of the granularity mapped back to back ("chunked"), as
 * PyTorch's expandable segments map memory (docs/framework-memory.md).
 */
#ifndef UCT_CUDA_CPY_NS_ALLOC_H
#define UCT_CUDA_CPY_NS_ALLOC_H

#include <ucs/type/status.h>
#include <cuda.h>
#include <stddef.h>


typedef enum {
    UCT_CUDA_CPY_NS_ALLOC_VMM,    /* cuMemCreate + map, POSIX-fd exportable */
    UCT_CUDA_CPY_NS_ALLOC_LEGACY, /* cuMemAlloc, legacy IPC handles */
    UCT_CUDA_CPY_NS_ALLOC_CHUNKED, /* VMM allocations of the granularity,
                                     back to back in one reservation */
    UCT_CUDA_CPY_NS_ALLOC_POOL,   /* cuMemAllocAsync from the device's
                                   * stream-ordered pool (cudaMallocAsync) */
    UCT_CUDA_CPY_NS_ALLOC_LAST
} uct_cuda_cpy_ns_alloc_mode_t;

/* Names of uct_cuda_cpy_ns_alloc_mode_t for UCS_CONFIG_TYPE_ENUM */
extern const char *uct_cuda_cpy_ns_alloc_mode_names[];


/* One allocation: what uct_cuda_cpy_ns_alloc_free() needs to undo it */
typedef struct uct_cuda_cpy_ns_alloc {
    CUdeviceptr                  ptr;
    size_t                       size;   /* rounded up, mapped length */
    uct_cuda_cpy_ns_alloc_mode_t mode;
    int                          device; /* ordinal */
    CUmemGenericAllocationHandle handle; /* VMM only */
    size_t                       chunk;  /* chunked: size of each one */
} uct_cuda_cpy_ns_alloc_t;


/**
 * Allocate at least @a length bytes of device memory on the device of the
 * calling thread's current context (device 0 when none is current).
 * VMM sizes are rounded up to the allocation granularity.
 *
 * @return UCS_OK, or the driver error as ucs_status_t (logged naming the
 *         call and its CUresult); nothing is left allocated on error.
 */
ucs_status_t uct_cuda_cpy_ns_alloc_mem(uct_cuda_cpy_ns_alloc_mode_t mode,
                                       size_t length,
                                       uct_cuda_cpy_ns_alloc_t *alloc);


/** Undo uct_cuda_cpy_ns_alloc_mem() */
ucs_status_t uct_cuda_cpy_ns_alloc_free(const uct_cuda_cpy_ns_alloc_t *alloc);

#endif
