/*
 * cuda_ipc_ns: mapping a peer's allocation (see cuda_ipc_ns_map.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_map.h"
#include "cuda_ipc_ns_fd_map.h"
#include "cuda_ipc_ns_pool_map.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_legacy_direct.h"
#include "cuda_ipc_ns_nsid.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/sys/string.h>

#include <inttypes.h>
#include <string.h>
#include <unistd.h>


/*
 * A legacy key: the driver opens its handle in our PID namespace, and in
 * another one unless it takes us for the exporter or refuses such opens
 * (cuda_ipc_ns_legacy_direct.h). A failed open of another PID namespace's
 * key is reported there, once per owner when its keys fall back to the
 * owner's copies.
 */
static ucs_status_t
uct_cuda_ipc_ns_map_legacy(const uct_cuda_ipc_ns_rkey_info_t *key, int device,
                           uct_cuda_ipc_ns_map_t *mapping)
{
    CUipcMemHandle handle;
    CUdeviceptr dptr;
    ucs_status_t status;
    CUresult res;
    int pushed;

    status = uct_cuda_ipc_ns_ctx_push(NULL, device, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    memcpy(&handle, key->handle.legacy, sizeof(handle));
    res = uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
            &dptr, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    uct_cuda_ipc_ns_ctx_pop(pushed);
    if (res == CUDA_SUCCESS) {
        mapping->addr = (void*)dptr;
        return UCS_OK;
    }

    status = uct_cuda_ipc_ns_driver_status(res);
    if (key->pid_ns != uct_cuda_ipc_ns_nsid_self()->pid_ns) {
        ucs_debug("cuda_ipc_ns: cuIpcOpenMemHandle() of allocation 0x%" PRIx64
                  " of pid %u in PID namespace %" PRIu64 " failed: %s",
                  key->base, key->pid, key->pid_ns,
                  uct_cuda_ipc_ns_driver_error_name(res));
        (void)uct_cuda_ipc_ns_legacy_direct_failed(
                key, uct_cuda_ipc_ns_driver_error_name(res));
        return status;
    }

    ucs_error("cuda_ipc_ns: cuIpcOpenMemHandle() failed: %s: cannot open the "
              "IPC handle of allocation 0x%" PRIx64 " (%" PRIu64 " bytes) of "
              "pid %u", uct_cuda_ipc_ns_driver_error_name(res), key->base,
              key->length, key->pid);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_map_fd_of(const uct_cuda_ipc_ns_rkey_info_t *key,
                                       int device, int fd,
                                       uct_cuda_ipc_ns_map_t *mapping)
{
    char what[64];
    CUdeviceptr dptr;
    ucs_status_t status;

    mapping->length      = key->length;
    mapping->handle_type = key->handle_type;
    mapping->device      = device;
    mapping->pool        = NULL;

    ucs_snprintf_safe(what, sizeof(what), "allocation 0x%" PRIx64 " of pid %u",
                      key->base, key->pid);
    if (key->handle_type == UCT_CUDA_IPC_NS_HANDLE_POOL) {
        status = uct_cuda_ipc_ns_pool_map(key, device, fd, &mapping->pool,
                                          &dptr);
    } else {
        status = uct_cuda_ipc_ns_fd_map_import(fd, key->length, device, what, &dptr);
    }
    /* the driver holds the memory through the mapping now */
    close(fd);
    if (status != UCS_OK) {
        return status;
    }

    mapping->addr = (void*)dptr;
    ucs_debug("cuda_ipc_ns: mapped allocation 0x%" PRIx64 "/%" PRIu64 " of "
              "pid %u (type %d) at %p for device %d", key->base, key->length,
              key->pid, key->handle_type, mapping->addr, device);
    return UCS_OK;
}


static ucs_status_t
uct_cuda_ipc_ns_map_posix_fd(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                             const uct_cuda_ipc_ns_rkey_info_t *key,
                             int device, uct_cuda_ipc_ns_map_t *mapping,
                             int *owner_pidfd_p)
{
    ucs_status_t status;
    int fd;

    status = uct_cuda_ipc_ns_fdx_import(fdx, key, &fd, owner_pidfd_p);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: cannot import the fd of allocation 0x%"
                  PRIx64 " of pid %u (PID namespace %" PRIu64 "): %s",
                  key->base, key->pid, key->pid_ns, ucs_status_string(status));
        return status;
    }

    status = uct_cuda_ipc_ns_map_fd_of(key, device, fd, mapping);
    if ((status != UCS_OK) && (owner_pidfd_p != NULL) &&
        (*owner_pidfd_p >= 0)) {
        close(*owner_pidfd_p);
        *owner_pidfd_p = -1;
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_map(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                 const uct_cuda_ipc_ns_rkey_info_t *key,
                                 int device, uct_cuda_ipc_ns_map_t *mapping,
                                 int *owner_pidfd_p)
{
    ucs_status_t status;

    if (owner_pidfd_p != NULL) {
        *owner_pidfd_p = -1;
    }

    if (key->handle_type != UCT_CUDA_IPC_NS_HANDLE_LEGACY) {
        return uct_cuda_ipc_ns_map_posix_fd(fdx, key, device, mapping,
                                            owner_pidfd_p);
    }

    mapping->length      = key->length;
    mapping->handle_type = key->handle_type;
    mapping->device      = device;
    status               = uct_cuda_ipc_ns_map_legacy(key, device, mapping);
    if (status == UCS_OK) {
        ucs_debug("cuda_ipc_ns: mapped allocation 0x%" PRIx64 "/%" PRIu64
                  " of pid %u (legacy) at %p for device %d", key->base,
                  key->length, key->pid, mapping->addr, device);
    }
    return status;
}


void uct_cuda_ipc_ns_map_unmap(uct_cuda_ipc_ns_map_t *mapping)
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
    } else if (mapping->handle_type == UCT_CUDA_IPC_NS_HANDLE_POOL) {
        uct_cuda_ipc_ns_pool_map_unmap(mapping->pool, dptr, mapping->device);
    } else {
        (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, dptr, mapping->length);
        (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, dptr, mapping->length);
    }
}

