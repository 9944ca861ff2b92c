/*
 * cuda_ipc_ns: mapping a peer's allocation (see cuda_ipc_ns_map.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_map.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>

#include <inttypes.h>
#include <string.h>
#include <unistd.h>


static ucs_status_t
uct_cuda_ipc_ns_map_legacy(const uct_cuda_ipc_ns_rkey_info_t *key, int device,
                           uct_cuda_ipc_ns_mapping_t *mapping)
{
    CUipcMemHandle handle;
    CUdeviceptr dptr;
    ucs_status_t status;
    CUcontext ctx;
    int pushed;

    status = uct_cuda_ipc_ns_primary_ctx(device, &ctx);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_ctx_push(ctx, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    memcpy(&handle, key->handle.legacy, sizeof(handle));
    status = UCT_CUDA_IPC_NS_CU(cuIpcOpenMemHandle, &dptr, handle,
                                CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: cannot open the IPC handle of allocation "
                  "0x%" PRIx64 " (%" PRIu64 " bytes) of pid %u: %s",
                  key->base, key->length, key->pid, ucs_status_string(status));
        return status;
    }

    mapping->addr = (void*)dptr;
    return UCS_OK;
}


static ucs_status_t
uct_cuda_ipc_ns_map_posix_fd(const uct_cuda_ipc_ns_fdx_config_t *fdx,
                             const uct_cuda_ipc_ns_rkey_info_t *key,
                             int device, uct_cuda_ipc_ns_mapping_t *mapping)
{
    CUmemGenericAllocationHandle handle;
    CUmemAccessDesc access = {};
    CUdeviceptr dptr;
    ucs_status_t status;
    int fd;

    status = uct_cuda_ipc_ns_fdx_import(fdx, key, &fd);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: cannot import the fd of allocation 0x%"
                  PRIx64 " of pid %u (PID namespace %" PRIu64 "): %s",
                  key->base, key->pid, key->pid_ns, ucs_status_string(status));
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemImportFromShareableHandle, &handle,
                                (void*)(uintptr_t)fd,
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    /* the driver holds the memory through the handle now */
    close(fd);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &dptr, key->length, 0, 0,
                                0);
    if (status != UCS_OK) {
        goto out_release;
    }

    /* a mapping longer than the memory behind the fd fails here, so an fd
     * that is not the allocation of the key is refused */
    status = UCT_CUDA_IPC_NS_CU(cuMemMap, dptr, key->length, 0, handle, 0);
    if (status != UCS_OK) {
        goto err_free_va;
    }

    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = device;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = UCT_CUDA_IPC_NS_CU(cuMemSetAccess, dptr, key->length, &access, 1);
    if (status != UCS_OK) {
        goto err_unmap;
    }

    mapping->addr = (void*)dptr;
    goto out_release;

err_unmap:
    (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, dptr, key->length);
err_free_va:
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, dptr, key->length);
out_release:
    /* the mapping keeps the memory alive */
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_map(const uct_cuda_ipc_ns_fdx_config_t *fdx,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 int device, uct_cuda_ipc_ns_mapping_t *mapping)
{
    ucs_status_t status;

    mapping->length      = key->length;
    mapping->handle_type = key->handle_type;
    mapping->device      = device;
    if (key->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) {
        status = uct_cuda_ipc_ns_map_legacy(key, device, mapping);
    } else {
        status = uct_cuda_ipc_ns_map_posix_fd(fdx, key, device, mapping);
    }

    if (status == UCS_OK) {
        ucs_debug("cuda_ipc_ns: mapped allocation 0x%" PRIx64 "/%" PRIu64
                  " of pid %u (type %d) at %p for device %d", key->base,
                  key->length, key->pid, key->handle_type, mapping->addr,
                  device);
    }
    return status;
}


void uct_cuda_ipc_ns_unmap(uct_cuda_ipc_ns_mapping_t *mapping)
{
    CUdeviceptr dptr = (CUdeviceptr)mapping->addr;
    CUcontext ctx;
    int pushed;

    ucs_debug("cuda_ipc_ns: unmapping %p (%zu bytes, type %d)", mapping->addr,
              mapping->length, mapping->handle_type);
    if (mapping->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) {
        if ((uct_cuda_ipc_ns_primary_ctx(mapping->device, &ctx) == UCS_OK) &&
            (uct_cuda_ipc_ns_ctx_push(ctx, &pushed) == UCS_OK)) {
            (void)UCT_CUDA_IPC_NS_CU(cuIpcCloseMemHandle, dptr);
            uct_cuda_ipc_ns_ctx_pop(pushed);
        }
    } else {
        (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, dptr, mapping->length);
        (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, dptr, mapping->length);
    }
}

