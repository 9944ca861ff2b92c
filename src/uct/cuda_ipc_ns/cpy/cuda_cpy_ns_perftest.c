/*
 * cuda_cpy_ns: the CUDA memory allocator of ucx_perftest (-m cuda).
 *
 * ucx_perftest exports its table of allocators per memory type,
 * ucx_perf_mem_type_allocators (tools/perf/lib/libperf.c); Debian's build
 * fills only the host slot, and perftest accepts -m cuda when the CUDA slot is
 * set. The module's constructor fills it (uct_cuda_cpy_ns_perftest_register)
 * when the running program has the table and does nothing in any other
 * program.
 *
 * The allocator and perftest context types come from libperf_int.h of the
 * configured UCX source tree, which configure checks is the installed
 * version: the allocator reads perf->uct.md and the rte group of the
 * context, so their layout must be exactly the installed one, as for every
 * other UCX internal structure this module uses. See docs/ucp.md.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_alloc.h"
#include "cuda_cpy_ns_copy.h"
#include "cuda_ipc_ns_ctx.h"
#include "cuda_cpy_ns_md.h"
#include "cuda_cpy_ns_perftest.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_md_base.h"

#include <tools/perf/lib/libperf_int.h>
#include <ucs/datastruct/list.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/compiler_def.h>
#include <dlfcn.h>
#include <pthread.h>


#define UCT_CUDA_CPY_NS_PERF_TABLE "ucx_perf_mem_type_allocators"


/* perftest keeps only address and memh of a buffer: the rest is here */
typedef struct {
    ucs_list_link_t         list;
    uct_cuda_cpy_ns_alloc_t alloc;
} uct_cuda_cpy_ns_perf_buffer_t;


static struct {
    pthread_mutex_t lock;
    ucs_list_link_t buffers;
} uct_cuda_cpy_ns_perf = {
    .lock    = PTHREAD_MUTEX_INITIALIZER,
    .buffers = UCS_LIST_INITIALIZER(&uct_cuda_cpy_ns_perf.buffers,
                                    &uct_cuda_cpy_ns_perf.buffers)
};


/* As perftest's own CUDA allocator: the group's device becomes current */
static ucs_status_t uct_cuda_cpy_ns_perf_init(ucx_perf_context_t *perf)
{
    unsigned group_index = rte_call(perf, group_index);
    ucs_status_t status;
    int count, pushed;

    status = uct_cuda_ipc_ns_md_base_driver_load();
    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: no CUDA driver or device for -m cuda (see "
                  "UCX_CUDA_IPC_NS_DRIVER)");
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU(cuDeviceGetCount, &count);
    if (status != UCS_OK) {
        return status;
    }

    /* stays current for the test's life: never popped */
    return uct_cuda_ipc_ns_ctx_push(NULL, group_index % count, &pushed);
}


static ucs_status_t
uct_cuda_cpy_ns_perf_uct_alloc(const ucx_perf_context_t *perf, size_t length,
                               unsigned flags, uct_allocated_memory_t *alloc_mem)
{
    uct_cuda_cpy_ns_alloc_mode_t mode;
    uct_cuda_cpy_ns_perf_buffer_t *buffer;
    ucs_status_t status;

    status = uct_cuda_cpy_ns_md_configured_alloc_mode(&mode);
    if (status != UCS_OK) {
        return status;
    }

    buffer = ucs_malloc(sizeof(*buffer), "cuda_cpy_ns_perf_buffer");
    if (buffer == NULL) {
        ucs_error("cuda_cpy_ns: failed to allocate perftest buffer record");
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_cpy_ns_alloc_mem(mode, length, &buffer->alloc);
    if (status != UCS_OK) {
        goto err_free_buffer;
    }

    /* the MD under test registers it, as for perftest's host memory */
    status = uct_md_mem_reg(perf->uct.md, (void*)buffer->alloc.ptr, length,
                            flags, &alloc_mem->memh);
    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: failed to register %zu bytes of CUDA memory "
                  "with the tested memory domain: %s", length,
                  ucs_status_string(status));
        goto err_mem_free;
    }

    alloc_mem->address  = (void*)buffer->alloc.ptr;
    alloc_mem->length   = length;
    alloc_mem->method   = UCT_ALLOC_METHOD_MD;
    alloc_mem->mem_type = UCS_MEMORY_TYPE_CUDA;
    alloc_mem->md       = perf->uct.md;

    pthread_mutex_lock(&uct_cuda_cpy_ns_perf.lock);
    ucs_list_add_tail(&uct_cuda_cpy_ns_perf.buffers, &buffer->list);
    pthread_mutex_unlock(&uct_cuda_cpy_ns_perf.lock);
    return UCS_OK;

err_mem_free:
    uct_cuda_cpy_ns_alloc_free(&buffer->alloc);
err_free_buffer:
    ucs_free(buffer);
    return status;
}


static void uct_cuda_cpy_ns_perf_uct_free(const ucx_perf_context_t *perf,
                                          uct_allocated_memory_t *alloc_mem)
{
    uct_cuda_cpy_ns_perf_buffer_t *buffer, *found = NULL;
    ucs_status_t status;

    pthread_mutex_lock(&uct_cuda_cpy_ns_perf.lock);
    ucs_list_for_each(buffer, &uct_cuda_cpy_ns_perf.buffers, list) {
        if (buffer->alloc.ptr == (CUdeviceptr)alloc_mem->address) {
            ucs_list_del(&buffer->list);
            found = buffer;
            break;
        }
    }
    pthread_mutex_unlock(&uct_cuda_cpy_ns_perf.lock);

    if (found == NULL) {
        ucs_error("cuda_cpy_ns: perftest frees %p, which it did not allocate",
                  alloc_mem->address);
        return;
    }

    status = uct_md_mem_dereg(alloc_mem->md, alloc_mem->memh);
    if (status != UCS_OK) {
        ucs_error("cuda_cpy_ns: failed to deregister perftest buffer %p: %s",
                  alloc_mem->address, ucs_status_string(status));
    }

    uct_cuda_cpy_ns_alloc_free(&found->alloc);
    ucs_free(found);
}


static void uct_cuda_cpy_ns_perf_memcpy(void *dst, ucs_memory_type_t dst_mem_type,
                                        const void *src,
                                        ucs_memory_type_t src_mem_type,
                                        size_t count)
{
    /* errors are logged; perftest's memcpy returns nothing */
    (void)uct_cuda_cpy_ns_copy(dst, src, count);
}


static void *uct_cuda_cpy_ns_perf_memset(void *dst, int value, size_t count)
{
    (void)uct_cuda_cpy_ns_copy_memset(dst, value, count);
    return dst;
}


static const ucx_perf_allocator_t uct_cuda_cpy_ns_perf_allocator = {
    .mem_type  = UCS_MEMORY_TYPE_CUDA,
    .init      = uct_cuda_cpy_ns_perf_init,
    .uct_alloc = uct_cuda_cpy_ns_perf_uct_alloc,
    .uct_free  = uct_cuda_cpy_ns_perf_uct_free,
    .memcpy    = uct_cuda_cpy_ns_perf_memcpy,
    .memset    = uct_cuda_cpy_ns_perf_memset
};


void uct_cuda_cpy_ns_perftest_register(void)
{
    const ucx_perf_allocator_t **allocators;

    allocators = dlsym(RTLD_DEFAULT, UCT_CUDA_CPY_NS_PERF_TABLE);
    if (allocators == NULL) {
        return; /* not ucx_perftest */
    }

    /* a perftest built with CUDA has its own allocator: keep it */
    if (allocators[UCS_MEMORY_TYPE_CUDA] == NULL) {
        allocators[UCS_MEMORY_TYPE_CUDA] = &uct_cuda_cpy_ns_perf_allocator;
    }
}
