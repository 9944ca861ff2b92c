/*
 * cuda_ipc_ns: the staging ring of a copy session (see
 * cuda_ipc_ns_copy_staging.h, docs/owner-copies.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_copy_staging.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_ptr.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <string.h>


ucs_status_t uct_cuda_ipc_ns_staging_check_config(unsigned num_slots,
                                                  size_t slot_size)
{
    if ((num_slots == 0) || (num_slots > UCT_CUDA_IPC_NS_STAGING_SLOTS_MAX)) {
        ucs_error("cuda_ipc_ns: UCX_CUDA_IPC_NS_OWNER_COPY_STAGING_SLOTS=%u "
                  "must be 1 to %u", num_slots,
                  UCT_CUDA_IPC_NS_STAGING_SLOTS_MAX);
        return UCS_ERR_INVALID_PARAM;
    }

    /* UCS_MEMUNITS_INF and _AUTO are above the bound too */
    if ((slot_size == 0) || (slot_size > UCT_CUDA_IPC_NS_STAGING_SLOT_SIZE_MAX)) {
        ucs_error("cuda_ipc_ns: UCX_CUDA_IPC_NS_OWNER_COPY_STAGING_SLOT_SIZE "
                  "must be 1 byte to %lu MiB (rounded up to the allocation "
                  "granularity)", UCT_CUDA_IPC_NS_STAGING_SLOT_SIZE_MAX >> 20);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_staging_alloc(int device, unsigned num_slots,
                                           size_t slot_size,
                                           uct_cuda_ipc_ns_staging_t *staging)
{
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    uct_cuda_ipc_ns_ptr_attr_t attr;
    size_t granularity;
    ucs_status_t status;
    int pushed;

    memset(staging, 0, sizeof(*staging));
    status = uct_cuda_ipc_ns_primary_ctx(device, &staging->ctx);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_ctx_push(staging->ctx, device, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    status = UCT_CUDA_IPC_NS_CU(cuMemGetAllocationGranularity, &granularity,
                                &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (status != UCS_OK) {
        goto out_pop;
    }

    staging->device    = device;
    staging->num_slots = num_slots;
    staging->slot_size = ucs_align_up(slot_size, granularity);
    staging->size      = staging->slot_size * num_slots;
    status = UCT_CUDA_IPC_NS_CU(cuMemCreate, &staging->handle, staging->size,
                                &prop, 0);
    if (status != UCS_OK) {
        goto out_pop;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemAddressReserve, &staging->base,
                                staging->size, granularity, 0, 0);
    if (status != UCS_OK) {
        goto err_release;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemMap, staging->base, staging->size, 0,
                                staging->handle, 0);
    if (status != UCS_OK) {
        goto err_address_free;
    }

    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = UCT_CUDA_IPC_NS_CU(cuMemSetAccess, staging->base, staging->size,
                                &access, 1);
    if (status != UCS_OK) {
        goto err_unmap;
    }

    /* the owner knows the ring by the id of its allocation, as any buffer */
    status = uct_cuda_ipc_ns_ptr_attr_get((void*)staging->base, &attr);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: the staging ring 0x%llx is not known as device "
                  "memory: %s", (unsigned long long)staging->base,
                  ucs_status_string(status));
        goto err_unmap;
    }
    staging->buf_id = attr.buffer_id;

    ucs_debug("cuda_ipc_ns: staging ring of %u slots of %zu bytes at 0x%llx "
              "on device %d", num_slots, staging->slot_size,
              (unsigned long long)staging->base, device);
    goto out_pop;

err_unmap:
    (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, staging->base, staging->size);
err_address_free:
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, staging->base, staging->size);
err_release:
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, staging->handle);
    staging->base = 0;
out_pop:
    uct_cuda_ipc_ns_ctx_pop(pushed);
    return status;
}


void uct_cuda_ipc_ns_staging_free(uct_cuda_ipc_ns_staging_t *staging)
{
    int pushed;

    if (staging->base == 0) {
        return;
    }

    if (uct_cuda_ipc_ns_ctx_push(staging->ctx, staging->device,
                                 &pushed) != UCS_OK) {
        return; /* logged; the memory stays */
    }
    (void)UCT_CUDA_IPC_NS_CU(cuMemUnmap, staging->base, staging->size);
    (void)UCT_CUDA_IPC_NS_CU(cuMemAddressFree, staging->base, staging->size);
    (void)UCT_CUDA_IPC_NS_CU(cuMemRelease, staging->handle);
    uct_cuda_ipc_ns_ctx_pop(pushed);
    staging->base = 0;
}
