/*
 * cuda_ipc_ns: what the driver says about a pointer, for both memory domains
 * (docs/architecture.md, "Shared layer"): one cuPointerGetAttributes call
 * classifies an address, and mem_query answers UCP with it.
 */
#ifndef UCT_CUDA_IPC_NS_PTR_H
#define UCT_CUDA_IPC_NS_PTR_H

#include "cuda_ipc_ns_compat.h"

#include <uct/api/uct.h>
#include <cuda.h>


/* What the driver says about one address */
typedef struct uct_cuda_ipc_ns_ptr_info {
    int         is_cuda; /* device memory known to the driver */
    int         device;  /* its device ordinal */
    CUdeviceptr base;    /* its allocation: the cuMemAlloc range or the VMM
                          * mapping, never a whole reservation */
    size_t      size;
} uct_cuda_ipc_ns_ptr_info_t;


/**
 * Classify @a address with one driver call (cuPointerGetAttributes). Host and
 * unknown memory give is_cuda == 0; a failing driver call is logged at debug
 * level and classifies the address as host memory.
 */
void uct_cuda_ipc_ns_ptr_query(const void *address,
                               uct_cuda_ipc_ns_ptr_info_t *info);


/**
 * mem_query of both memory domains: CUDA memory type and the allocation that
 * holds @a address; UCS_ERR_INVALID_ADDR for non-CUDA memory (UCP then asks
 * the next MD, then assumes host memory).
 */
ucs_status_t uct_cuda_ipc_ns_ptr_mem_query(uct_md_h md, const void *address,
                                           size_t length,
                                           uct_cuda_ipc_ns_compat_mem_attr_t *mem_attr);


/* Attributes of the allocation holding an address */
typedef struct {
    CUmemorytype memory_type;
    int          device;
    CUcontext    context;
    CUdeviceptr  base;           /* the allocation: the cuMemAlloc range or the
                                  * VMM mapping, never a whole reservation */
    size_t       size;
    int          legacy_capable;
    uint64_t     handle_types;   /* the allocation's own shareable handle
                                  * types (ALLOWED_HANDLE_TYPES); none for
                                  * memory of a stream-ordered pool */
    uint64_t     alloc_id;       /* BUFFER_ID of legacy memory, the
                                  * MEMORY_BLOCK_ID of a VMM mapping */
    CUmemoryPool pool;           /* the stream-ordered pool of the memory,
                                  * NULL for none (MEMPOOL_HANDLE) */
} uct_cuda_ipc_ns_ptr_attr_t;


/**
 * The allocation holding @a address, in one cuPointerGetAttributes call.
 *
 * @return UCS_OK for device memory; UCS_ERR_INVALID_ADDR for memory the
 *         driver does not know as device memory; the call's error otherwise.
 */
ucs_status_t uct_cuda_ipc_ns_ptr_attr_get(const void *address,
                                          uct_cuda_ipc_ns_ptr_attr_t *attr);


/**
 * Export the VMM allocation @a handle as a POSIX fd, close-on-exec, which the
 * caller closes; errors logged at @a log_level.
 */
ucs_status_t uct_cuda_ipc_ns_ptr_export_handle(CUmemGenericAllocationHandle handle,
                                               ucs_log_level_t log_level,
                                               int *fd_p);


/**
 * Export the VMM allocation at @a base (created with the POSIX-fd handle
 * type) as a POSIX fd, close-on-exec, which the caller closes; errors logged at
 * @a log_level.
 */
ucs_status_t uct_cuda_ipc_ns_ptr_export_fd(CUdeviceptr base,
                                           ucs_log_level_t log_level,
                                           int *fd_p);


/* An allocation of a stream-ordered pool, exported (docs/driver-contract.md) */
typedef struct {
    int                    fd;   /* the pool's shareable handle */
    CUdeviceptr            base; /* the allocation (cuMemGetAddressRange) */
    size_t                 size;
    CUmemPoolPtrExportData data; /* cuMemPoolExportPointer of base */
} uct_cuda_ipc_ns_ptr_pool_export_t;


/**
 * Export the allocation holding @a address, memory of the stream-ordered
 * pool @a attr->pool: the pool as a POSIX fd (close-on-exec; the caller
 * closes it) and the allocation's export data.
 *
 * @return UCS_OK; UCS_ERR_UNSUPPORTED, logged at debug level, when the pool
 *         does not export as a POSIX fd (no such handle type: the default
 *         pool, cudaMallocAsync's); another error logged at @a log_level.
 */
ucs_status_t uct_cuda_ipc_ns_ptr_export_pool(const void *address,
                                             const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                             ucs_log_level_t log_level,
                                             uct_cuda_ipc_ns_ptr_pool_export_t *exp);

#endif
