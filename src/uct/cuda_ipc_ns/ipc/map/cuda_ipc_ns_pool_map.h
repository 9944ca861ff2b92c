/*
 * cuda_ipc_ns: an allocation of another process's stream-ordered pool
 * mapped here (docs/driver-contract.md, "Stream-ordered pools"): the pool's
 * fd imports as a pool of ours, from which the key's export data imports
 * the allocation (cuMemPoolImportFromShareableHandle,
 * cuMemPoolImportPointer), once it is shown to be the key's.
 */
#ifndef UCT_CUDA_IPC_NS_POOL_MAP_H
#define UCT_CUDA_IPC_NS_POOL_MAP_H

#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>
#include <cuda.h>


/**
 * Import the pool of @a fd (borrowed) and from it the allocation of pool key
 * @a key, which must be exactly the key's length, accessible to @a device.
 * With UCS_OK, *pool_p holds the allocation; release both with
 * uct_cuda_ipc_ns_pool_map_unmap().
 */
ucs_status_t uct_cuda_ipc_ns_pool_map(const uct_cuda_ipc_ns_rkey_info_t *key,
                                      int device, int fd, CUmemoryPool *pool_p,
                                      CUdeviceptr *dptr_p);


/** Free the imported allocation @a dptr, then its imported pool */
void uct_cuda_ipc_ns_pool_map_unmap(CUmemoryPool pool, CUdeviceptr dptr,
                                    int device);

#endif
