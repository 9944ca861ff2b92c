/*
 * cuda_ipc_ns: an fd of a VMM allocation mapped here (see
 * cuda_ipc_ns_fd_map.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_fd_map.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>

#include <stdint.h>


/*
 * The allocation behind an imported fd must be the one expected: device
 * memory, and exactly @a length bytes long. A mapping of that length fails
 * when it is shorter; a mapping one granule longer must fail, or it is
 * longer (the driver maps only from offset 0, so the end is probed with a
 * longer mapping in a scratch reservation). Its handle types are not
 * checked: the driver reports none for an imported allocation (driver 580,
 * docs/testing.md "What a GPU showed"); that it came as a POSIX fd says it
 * was exportable as one.
 */
static ucs_status_t
uct_cuda_ipc_ns_map_check_handle(size_t length, const char *what,
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
        (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE)) {
        ucs_error("cuda_ipc_ns: the fd imported for %s is not device memory "
                  "(type %d, location %d): refused", what, (int)prop.type,
                  (int)prop.location.type);
        return UCS_ERR_INVALID_PARAM;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemGetAllocationGranularity, &gran, &prop,
                                CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (status != UCS_OK) {
        return status;
    }

    probe_length = length + gran;
    status = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &probe, probe_length, 0,
                                0, 0);
    if (status != UCS_OK) {
        return status;
    }

    /* expected to fail, only a debug line: driver 580 answers
     * CUDA_ERROR_NOT_SUPPORTED, cuda.h suggests CUDA_ERROR_INVALID_VALUE;
     * any other failure is the driver's and fails the import */
    status = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuMemMap, probe,
                                     probe_length, 0, handle, 0);
    if (status == UCS_OK) {
        (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, probe, probe_length);
        ucs_error("cuda_ipc_ns: the fd imported for %s holds more than the "
                  "expected %zu bytes: refused", what, length);
        status = UCS_ERR_INVALID_PARAM;
    } else if ((status == UCS_ERR_UNSUPPORTED) ||
               (status == UCS_ERR_INVALID_PARAM)) {
        status = UCS_OK; /* not longer than expected */
    } else {
        ucs_error("cuda_ipc_ns: cuMemMap of %zu bytes to check the length of "
                  "%s failed: %s", probe_length, what,
                  ucs_status_string(status));
    }
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, probe, probe_length);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_fd_map_import(int fd, size_t length, int device,
                                           const char *what, CUdeviceptr *dptr_p)
{
    CUmemGenericAllocationHandle handle;
    CUmemAccessDesc access = {};
    CUdeviceptr dptr;
    ucs_status_t status;

    status = UCT_CUDA_IPC_NS_CU(cuMemImportFromShareableHandle, &handle,
                                (void*)(uintptr_t)fd,
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_map_check_handle(length, what, handle);
    if (status != UCS_OK) {
        goto err_release;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &dptr, length, 0, 0, 0);
    if (status != UCS_OK) {
        goto err_release;
    }

    /* fails when the memory behind the fd is shorter than expected */
    status = UCT_CUDA_IPC_NS_CU(cuMemMap, dptr, length, 0, handle, 0);
    if (status != UCS_OK) {
        goto err_free_va;
    }

    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = device;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = UCT_CUDA_IPC_NS_CU(cuMemSetAccess, dptr, length, &access, 1);
    if (status != UCS_OK) {
        goto err_unmap;
    }

    /* the mapping keeps the memory alive */
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
    *dptr_p = dptr;
    return UCS_OK;

err_unmap:
    (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, dptr, length);
err_free_va:
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, dptr, length);
err_release:
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, handle);
    return status;
}
