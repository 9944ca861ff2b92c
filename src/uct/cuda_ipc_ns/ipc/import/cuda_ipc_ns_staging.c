/*
 * cuda_ipc_ns: the staging ring of a copy session (see
 * cuda_ipc_ns_staging.h, docs/owner-copies.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_staging.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_vmm.h"
#include "cuda_ipc_ns_broker_proto.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <string.h>
#include <unistd.h>


const char *uct_cuda_ipc_ns_staging_kind_names[] = {
    [UCT_CUDA_IPC_NS_STAGING_AUTO]   = "auto",
    [UCT_CUDA_IPC_NS_STAGING_DEVICE] = "device",
    [UCT_CUDA_IPC_NS_STAGING_HOST]   = "host",
    [UCT_CUDA_IPC_NS_STAGING_LAST]   = NULL
};


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


/* The ring in pinned host memory; the device's context is current */
static ucs_status_t
uct_cuda_ipc_ns_staging_host_alloc(unsigned num_slots, size_t slot_size,
                                   int device,
                                   uct_cuda_ipc_ns_staging_t *staging)
{
    ucs_status_t status;

    staging->slot_size = ucs_align_up(slot_size, ucs_get_page_size());
    status = uct_cuda_ipc_ns_host_mem_create(staging->slot_size * num_slots,
                                             &staging->host);
    if (status != UCS_OK) {
        return status;
    }

    staging->base   = (CUdeviceptr)staging->host.ptr; /* UVA */
    staging->size   = staging->host.size;
    staging->buf_id = staging->host.id;
    return UCS_OK;
}


static void uct_cuda_ipc_ns_staging_host_free(uct_cuda_ipc_ns_staging_t *staging)
{
    uct_cuda_ipc_ns_host_mem_free(&staging->host);
}


/* The owner maps the host ring by its memfd */
static ucs_status_t
uct_cuda_ipc_ns_staging_host_export_fd(const uct_cuda_ipc_ns_staging_t *staging,
                                       uint64_t base, int *fd_p)
{
    int fd = dup(staging->host.fd);

    if (fd < 0) {
        ucs_error("cuda_ipc_ns: dup of the host ring's memfd %d failed: %m",
                  staging->host.fd);
        return UCS_ERR_IO_ERROR;
    }
    *fd_p = fd;
    return UCS_OK;
}


/* The ring in VMM memory of the device; its context is current */
static ucs_status_t
uct_cuda_ipc_ns_staging_vmm_alloc(unsigned num_slots, size_t slot_size,
                                  int device,
                                  uct_cuda_ipc_ns_staging_t *staging)
{
    uct_cuda_ipc_ns_ptr_attr_t attr;
    uct_cuda_ipc_ns_vmm_t vmm;
    size_t granularity;
    ucs_status_t status;

    /* each slot starts on a granularity boundary */
    status = uct_cuda_ipc_ns_vmm_granularity(device, &granularity);
    if (status != UCS_OK) {
        return status;
    }

    staging->slot_size = ucs_align_up(slot_size, granularity);
    status = uct_cuda_ipc_ns_vmm_alloc(device, staging->slot_size * num_slots,
                                       &vmm);
    if (status != UCS_OK) {
        return status;
    }

    /* the owner knows the ring by the id of its allocation, as any buffer */
    status = uct_cuda_ipc_ns_ptr_attr_get((void*)vmm.ptr, &attr);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: the staging ring 0x%llx is not known as device "
                  "memory: %s", (unsigned long long)vmm.ptr,
                  ucs_status_string(status));
        (void)uct_cuda_ipc_ns_vmm_free(&vmm);
        return status;
    }

    staging->handle    = vmm.handle;
    staging->base      = vmm.ptr;
    staging->size      = vmm.size;
    staging->buf_id    = attr.alloc_id;
    return UCS_OK;
}


static void uct_cuda_ipc_ns_staging_vmm_free(uct_cuda_ipc_ns_staging_t *staging)
{
    uct_cuda_ipc_ns_vmm_t vmm = {
        .handle = staging->handle,
        .ptr    = staging->base,
        .size   = staging->size
    };

    (void)uct_cuda_ipc_ns_vmm_free(&vmm);
}


/* The owner maps VMM memory by a POSIX fd of its allocation, exported now */
static ucs_status_t
uct_cuda_ipc_ns_staging_vmm_export_fd(const uct_cuda_ipc_ns_staging_t *staging,
                                      uint64_t base, int *fd_p)
{
    return uct_cuda_ipc_ns_ptr_export_fd(base, UCS_LOG_LEVEL_ERROR, fd_p);
}


const uct_cuda_ipc_ns_staging_ops_t uct_cuda_ipc_ns_staging_vmm_ops = {
    .name               = "device",
    .owner_maps_buffers = 1,
    .buf_flags          = 0,
    .alloc              = uct_cuda_ipc_ns_staging_vmm_alloc,
    .free               = uct_cuda_ipc_ns_staging_vmm_free,
    .export_fd          = uct_cuda_ipc_ns_staging_vmm_export_fd
};


const uct_cuda_ipc_ns_staging_ops_t uct_cuda_ipc_ns_staging_host_ops = {
    .name               = "pinned host",
    /* the owner maps none of ours: its GPU is not one we can use */
    .owner_maps_buffers = 0,
    .buf_flags          = UCT_CUDA_IPC_NS_COPY_BUF_HOST,
    .alloc              = uct_cuda_ipc_ns_staging_host_alloc,
    .free               = uct_cuda_ipc_ns_staging_host_free,
    .export_fd          = uct_cuda_ipc_ns_staging_host_export_fd
};


ucs_status_t uct_cuda_ipc_ns_staging_alloc(const uct_cuda_ipc_ns_staging_ops_t *ops,
                                           int device, unsigned num_slots,
                                           size_t slot_size,
                                           uct_cuda_ipc_ns_staging_t *staging)
{
    ucs_status_t status;
    int pushed;

    memset(staging, 0, sizeof(*staging));
    status = uct_cuda_ipc_ns_ctx_primary(device, &staging->ctx);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_cuda_ipc_ns_ctx_push(staging->ctx, device, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    status = ops->alloc(num_slots, slot_size, device, staging);
    if (status == UCS_OK) {
        staging->ops       = ops;
        staging->device    = device;
        staging->num_slots = num_slots;
        ucs_debug("cuda_ipc_ns: staging ring of %u slots of %zu bytes at "
                  "0x%llx in %s memory (device %d)", num_slots,
                  staging->slot_size, (unsigned long long)staging->base,
                  ops->name, device);
    }

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
    staging->ops->free(staging);
    uct_cuda_ipc_ns_ctx_pop(pushed);
    staging->base = 0;
}
