/*
 * cuda_ipc_ns: one VMM allocation of our own, exportable as a POSIX fd and
 * mapped read-write for its device: the copy component's default device
 * memory (cpy/cuda_cpy_ns_alloc.c) and an importer's staging ring
 * (ipc/import/cuda_ipc_ns_staging.c).
 */
#ifndef UCT_CUDA_IPC_NS_VMM_H
#define UCT_CUDA_IPC_NS_VMM_H

#include <ucs/type/status.h>
#include <cuda.h>
#include <stddef.h>


/* What uct_cuda_ipc_ns_vmm_free() needs */
typedef struct uct_cuda_ipc_ns_vmm {
    CUmemGenericAllocationHandle handle;
    CUdeviceptr                  ptr;
    size_t                       size; /* rounded up, mapped length */
} uct_cuda_ipc_ns_vmm_t;


/**
 * The allocation granularity of POSIX-fd exportable memory on @a device.
 */
ucs_status_t uct_cuda_ipc_ns_vmm_granularity(int device, size_t *granularity_p);


/**
 * cuMemCreate (POSIX-fd handle type) of at least @a length bytes on
 * @a device, rounded up to the granularity, reserved, mapped and made
 * read-write for the device, in the calling thread's current context;
 * undone in reverse on error (each failing call logged with its CUresult).
 */
ucs_status_t uct_cuda_ipc_ns_vmm_alloc(int device, size_t length,
                                       uct_cuda_ipc_ns_vmm_t *vmm);


/**
 * Undo uct_cuda_ipc_ns_vmm_alloc(). The address stays reserved when the
 * unmap fails: a later allocation must not land on memory still mapped.
 */
ucs_status_t uct_cuda_ipc_ns_vmm_free(const uct_cuda_ipc_ns_vmm_t *vmm);

#endif
