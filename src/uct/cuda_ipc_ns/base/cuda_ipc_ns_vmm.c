/*
 * cuda_ipc_ns: one VMM allocation of our own (see cuda_ipc_ns_vmm.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_vmm.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/sys/math.h>


static void uct_cuda_ipc_ns_vmm_prop(int device, CUmemAllocationProp *prop)
{
    *prop                      = (CUmemAllocationProp){};
    prop->type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id          = device;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}


ucs_status_t uct_cuda_ipc_ns_vmm_granularity(int device, size_t *granularity_p)
{
    CUmemAllocationProp prop;

    uct_cuda_ipc_ns_vmm_prop(device, &prop);
    return UCT_CUDA_IPC_NS_CU(cuMemGetAllocationGranularity, granularity_p,
                              &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}


ucs_status_t uct_cuda_ipc_ns_vmm_alloc(int device, size_t length,
                                       uct_cuda_ipc_ns_vmm_t *vmm)
{
    CUmemAccessDesc access = {};
    CUmemAllocationProp prop;
    size_t granularity;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_vmm_granularity(device, &granularity);
    if (status != UCS_OK) {
        return status;
    }

    uct_cuda_ipc_ns_vmm_prop(device, &prop);
    vmm->ptr  = 0;
    /* rounded up to the granularity (ucs_align_up moved between UCX
     * headers, the arithmetic did not) */
    vmm->size = ((ucs_max(length, 1) + granularity - 1) / granularity) *
                granularity;
    status    = UCT_CUDA_IPC_NS_CU(cuMemCreate, &vmm->handle, vmm->size, &prop,
                                   0);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &vmm->ptr, vmm->size,
                                granularity, 0, 0);
    if (status != UCS_OK) {
        goto err_release;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemMap, vmm->ptr, vmm->size, 0, vmm->handle,
                                0);
    if (status != UCS_OK) {
        goto err_address_free;
    }

    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status          = UCT_CUDA_IPC_NS_CU(cuMemSetAccess, vmm->ptr, vmm->size,
                                         &access, 1);
    if (status != UCS_OK) {
        goto err_unmap;
    }
    return UCS_OK;

err_unmap:
    (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, vmm->ptr, vmm->size);
err_address_free:
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, vmm->ptr, vmm->size);
err_release:
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, vmm->handle);
    vmm->ptr = 0;
    return status;
}


ucs_status_t uct_cuda_ipc_ns_vmm_free(const uct_cuda_ipc_ns_vmm_t *vmm)
{
    ucs_status_t status;

    status = UCT_CUDA_IPC_NS_CU(cuMemUnmap, vmm->ptr, vmm->size);
    if (status == UCS_OK) {
        status = UCT_CUDA_IPC_NS_CU(cuMemAddressFree, vmm->ptr, vmm->size);
    }
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, vmm->handle);
    return status;
}
