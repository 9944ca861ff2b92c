/*
 * cuda_ipc_ns: mapping a peer's pool allocation (see cuda_ipc_ns_pool_map.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_pool_map.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>

#include <inttypes.h>
#include <string.h>


/* With the device's context current: import the allocation of @a key from
 * @a pool and check that it is the key's */
static ucs_status_t
uct_cuda_ipc_ns_pool_import_ptr(const uct_cuda_ipc_ns_rkey_info_t *key,
                                int device, CUmemoryPool pool,
                                CUdeviceptr *dptr_p)
{
    CUmemPoolPtrExportData data;
    CUmemAccessDesc access = {};
    CUdeviceptr dptr, base;
    ucs_status_t status;
    size_t size;

    /* cuda.h: "By default, the pool's memory will be accessible from the
     * device it is allocated on"; another device needs access granted */
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = device;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = UCT_CUDA_IPC_NS_CU(cuMemPoolSetAccess, pool, &access, 1);
    if (status != UCS_OK) {
        return status;
    }

    memcpy(&data, key->handle.bytes, sizeof(data));
    status = UCT_CUDA_IPC_NS_CU(cuMemPoolImportPointer, &dptr, pool, &data);
    if (status != UCS_OK) {
        return status;
    }

    /* a key names its allocation's size: the export data of another, or a
     * pool fd of another pool, is refused */
    status = UCT_CUDA_IPC_NS_CU(cuMemGetAddressRange, &base, &size, dptr);
    if ((status == UCS_OK) && ((base != dptr) || (size != key->length))) {
        ucs_error("cuda_ipc_ns: pool allocation 0x%" PRIx64 " of pid %u "
                  "imports as %zu bytes, its key says %" PRIu64 ": refused",
                  key->base, key->pid, size, key->length);
        status = UCS_ERR_INVALID_PARAM;
    }
    if (status != UCS_OK) {
        (void)UCT_CUDA_IPC_NS_CU(cuMemFree, dptr);
        return status;
    }

    *dptr_p = dptr;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_pool_map(const uct_cuda_ipc_ns_rkey_info_t *key,
                                      int device, int fd, CUmemoryPool *pool_p,
                                      CUdeviceptr *dptr_p)
{
    CUmemoryPool pool;
    ucs_status_t status;
    int pushed;

    UCS_STATIC_ASSERT(sizeof(CUmemPoolPtrExportData) ==
                      UCT_CUDA_IPC_NS_HANDLE_SIZE);
    status = uct_cuda_ipc_ns_ctx_push(NULL, device, &pushed);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemPoolImportFromShareableHandle, &pool,
                                (void*)(uintptr_t)fd,
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (status != UCS_OK) {
        goto out;
    }

    status = uct_cuda_ipc_ns_pool_import_ptr(key, device, pool, dptr_p);
    if (status != UCS_OK) {
        (void)UCT_CUDA_IPC_NS_CU(cuMemPoolDestroy, pool);
        goto out;
    }
    *pool_p = pool;

out:
    uct_cuda_ipc_ns_ctx_pop(pushed);
    return status;
}


void uct_cuda_ipc_ns_pool_map_unmap(CUmemoryPool pool, CUdeviceptr dptr,
                                    int device)
{
    int pushed;

    if (uct_cuda_ipc_ns_ctx_push(NULL, device, &pushed) != UCS_OK) {
        return;
    }
    /* cuda.h: the imported memory "may be freed with cuMemFree" */
    (void)UCT_CUDA_IPC_NS_CU(cuMemFree, dptr);
    (void)UCT_CUDA_IPC_NS_CU(cuMemPoolDestroy, pool);
    uct_cuda_ipc_ns_ctx_pop(pushed);
}
