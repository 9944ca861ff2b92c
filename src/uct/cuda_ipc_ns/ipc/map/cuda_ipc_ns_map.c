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
    int pushed;

    status = uct_cuda_ipc_ns_ctx_push(NULL, device, &pushed);
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


/*
 * The allocation behind an imported fd must be the key's: device memory
 * exportable as a POSIX fd, and exactly as long as the key says. A mapping
 * of the key's length fails when it is shorter; a mapping one granule longer
 * must fail, or it is longer (the driver maps only from offset 0, so the
 * end is probed with a longer mapping in a scratch reservation).
 */
static ucs_status_t
uct_cuda_ipc_ns_map_check_handle(const uct_cuda_ipc_ns_rkey_info_t *key,
                                 CUmemGenericAllocationHandle handle)
{
    CUmemAllocationProp prop;
    CUdeviceptr probe;
    ucs_status_t status;
    size_t gran, probe_length;

    status = UCT_CUDA_IPC_NS_CU(cuMemGetAllocationPropertiesFromHandle, &prop,
                                handle);
    if (status != UCS_OK) {
        return status;
    }

    if ((prop.type != CU_MEM_ALLOCATION_TYPE_PINNED) ||
        (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE) ||
        !(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        ucs_error("cuda_ipc_ns: the fd imported for allocation 0x%" PRIx64
                  " of pid %u is not exportable device memory (type %d, "
                  "location %d, handle types 0x%x): refused", key->base,
                  key->pid, (int)prop.type, (int)prop.location.type,
                  (unsigned)prop.requestedHandleTypes);
        return UCS_ERR_INVALID_PARAM;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemGetAllocationGranularity, &gran, &prop,
                                CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (status != UCS_OK) {
        return status;
    }

    probe_length = key->length + gran;
    status = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &probe, probe_length, 0,
                                0, 0);
    if (status != UCS_OK) {
        return status;
    }

    /* expected to fail with CUDA_ERROR_INVALID_VALUE (only a debug line);
     * any other failure is the driver's and fails the import */
    status = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuMemMap, probe,
                                     probe_length, 0, handle, 0);
    if (status == UCS_OK) {
        (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, probe, probe_length);
        ucs_error("cuda_ipc_ns: the fd imported for allocation 0x%" PRIx64
                  " of pid %u holds more than the key's %" PRIu64 " bytes: "
                  "refused", key->base, key->pid, key->length);
        status = UCS_ERR_INVALID_PARAM;
    } else if (status == UCS_ERR_INVALID_PARAM) {
        status = UCS_OK; /* not longer than the key */
    } else {
        ucs_error("cuda_ipc_ns: cuMemMap of %zu bytes to check the length of "
                  "allocation 0x%" PRIx64 " of pid %u failed: %s",
                  probe_length, key->base, key->pid, ucs_status_string(status));
    }
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, probe, probe_length);
    return status;
}


static ucs_status_t
uct_cuda_ipc_ns_map_posix_fd(const uct_cuda_ipc_ns_fdx_config_t *fdx,
                             const uct_cuda_ipc_ns_rkey_info_t *key,
                             int device, uct_cuda_ipc_ns_mapping_t *mapping,
                             int *owner_pidfd_p)
{
    CUmemGenericAllocationHandle handle;
    CUmemAccessDesc access = {};
    CUdeviceptr dptr;
    ucs_status_t status;
    int fd;

    status = uct_cuda_ipc_ns_fdx_import(fdx, key, &fd, owner_pidfd_p);
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
        goto err_close_pidfd;
    }

    status = uct_cuda_ipc_ns_map_check_handle(key, handle);
    if (status != UCS_OK) {
        goto err_release;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &dptr, key->length, 0, 0,
                                0);
    if (status != UCS_OK) {
        goto err_release;
    }

    /* fails when the memory behind the fd is shorter than the key's */
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

    /* the mapping keeps the memory alive */
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
    mapping->addr = (void*)dptr;
    return UCS_OK;

err_unmap:
    (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, dptr, key->length);
err_free_va:
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, dptr, key->length);
err_release:
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
err_close_pidfd:
    if ((owner_pidfd_p != NULL) && (*owner_pidfd_p >= 0)) {
        close(*owner_pidfd_p);
        *owner_pidfd_p = -1;
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_map(const uct_cuda_ipc_ns_fdx_config_t *fdx,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 int device, uct_cuda_ipc_ns_mapping_t *mapping,
                                 int *owner_pidfd_p)
{
    ucs_status_t status;

    if (owner_pidfd_p != NULL) {
        *owner_pidfd_p = -1;
    }

    mapping->length      = key->length;
    mapping->handle_type = key->handle_type;
    mapping->device      = device;
    if (key->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) {
        status = uct_cuda_ipc_ns_map_legacy(key, device, mapping);
    } else {
        status = uct_cuda_ipc_ns_map_posix_fd(fdx, key, device, mapping,
                                              owner_pidfd_p);
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
    int pushed;

    ucs_debug("cuda_ipc_ns: unmapping %p (%zu bytes, type %d)", mapping->addr,
              mapping->length, mapping->handle_type);
    if (mapping->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) {
        if (uct_cuda_ipc_ns_ctx_push(NULL, mapping->device, &pushed) ==
            UCS_OK) {
            (void)UCT_CUDA_IPC_NS_CU(cuIpcCloseMemHandle, dptr);
            uct_cuda_ipc_ns_ctx_pop(pushed);
        }
    } else {
        (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, dptr, mapping->length);
        (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, dptr, mapping->length);
    }
}

