/*
 * cuda_ipc_ns: an fd of another process's VMM allocation mapped here, once
 * it is shown to be the allocation expected (docs/security.md): the
 * importer maps an owner's allocation with it (cuda_ipc_ns_map.h), the
 * owner's copier an importer's buffer (docs/owner-copies.md).
 */
#ifndef UCT_CUDA_IPC_NS_FD_MAP_H
#define UCT_CUDA_IPC_NS_FD_MAP_H

#include <ucs/type/status.h>
#include <cuda.h>
#include <stddef.h>


/**
 * Import @a fd (borrowed) with the driver and map it for @a device: it must
 * be exportable device memory of exactly @a length bytes (@a what names it
 * in error lines). The mapping keeps the memory; unmap with cuMemUnmap and
 * cuMemAddressFree of @a length bytes.
 */
ucs_status_t uct_cuda_ipc_ns_fd_map_import(int fd, size_t length, int device,
                                           const char *what, CUdeviceptr *dptr_p);

#endif
