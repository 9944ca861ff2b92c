/*
 * cuda_ipc_ns: mapping a peer's allocation into this process
 * (docs/architecture.md, "Remote mapping cache").
 *
 *  - legacy IPC handle: cuIpcOpenMemHandle in the primary context of the
 *    local device, with lazy peer access;
 *  - VMM POSIX fd: the fd is imported through the fd exchange, then
 *    cuMemImportFromShareableHandle; the allocation must be the key's
 *    (exportable device memory of exactly the key's length, or refused);
 *    then cuMemAddressReserve + cuMemMap + cuMemSetAccess for the local
 *    device; the handle and the fd are released at once (the mapping keeps
 *    the memory);
 *  - pool allocation: the pool's fd is imported through the fd exchange,
 *    then the allocation from the pool (cuda_ipc_ns_pool_map.h).
 */
#ifndef UCT_CUDA_IPC_NS_MAP_H
#define UCT_CUDA_IPC_NS_MAP_H

#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_broker_proto.h"

#include <cuda.h>


typedef struct uct_cuda_ipc_ns_map_entry {
    void      *addr;        /* where the allocation base is mapped here */
    size_t    length;
    uint8_t   handle_type;  /* uct_cuda_ipc_ns_rkey_handle_type_t */
    int       device;       /* local device ordinal */
    CUmemoryPool pool;      /* pool keys: the pool imported for it */
} uct_cuda_ipc_ns_map_t;


/**
 * Map @a key's allocation for local @a device, importing a POSIX fd through
 * the fd exchange configured by @a fdx.
 *
 * @param owner_pidfd_p  NULL, or with UCS_OK the owner's pidfd the fd import
 *                       checked (cuda_ipc_ns_fdx.h), -1 when none.
 */
ucs_status_t uct_cuda_ipc_ns_map(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 int device, uct_cuda_ipc_ns_map_t *mapping,
                                 int *owner_pidfd_p);

/**
 * Map @a key's allocation (one VMM allocation, or a chunk of a key of
 * several) for local @a device from @a fd, an fd of it the caller imported;
 * @a fd is closed in any case. The allocation must be the key's, as for
 * uct_cuda_ipc_ns_map().
 */
ucs_status_t uct_cuda_ipc_ns_map_fd_of(const uct_cuda_ipc_ns_rkey_info_t *key,
                                       int device, int fd,
                                       uct_cuda_ipc_ns_map_t *mapping);

/** Undo uct_cuda_ipc_ns_map() and uct_cuda_ipc_ns_map_fd_of() */
void uct_cuda_ipc_ns_map_unmap(uct_cuda_ipc_ns_map_t *mapping);


#endif
