/*
 * cuda_cpy_ns: memory domain of the loopback copy transport (see
 * cuda_cpy_ns_md.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_md.h"
#include "cuda_cpy_ns_memtype.h"
#include "cuda_ipc_ns_md_base.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_compat.h"

#include <ucs/debug/assert.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/compiler_def.h>
#include <limits.h>
#include <string.h>


static const char *uct_cuda_cpy_ns_enable_names[] = {
    [UCT_CUDA_CPY_NS_ENABLE_NO]   = "n",
    [UCT_CUDA_CPY_NS_ENABLE_YES]  = "y",
    [UCT_CUDA_CPY_NS_ENABLE_AUTO] = "auto",
    NULL
};


ucs_config_field_t uct_cuda_cpy_ns_md_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_cuda_cpy_ns_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"ENABLE", "auto",
     "Whether the copy transport cu_cpy_ns offers itself:\n"
     " auto - unless UCX registers its own CUDA copy component (cuda_cpy, in a\n"
     "        UCX built with CUDA), which then serves UCP's memory-type copies,\n"
     "        detection and allocation\n"
     " y    - always\n"
     " n    - never",
     ucs_offsetof(uct_cuda_cpy_ns_md_config_t, enable),
     UCS_CONFIG_TYPE_ENUM(uct_cuda_cpy_ns_enable_names)},

    {"MEM_ALLOC", "vmm",
     "How CUDA memory is allocated for UCP (ucp_mem_map with\n"
     "UCP_MEM_MAP_ALLOCATE) and for ucx_perftest -m cuda:\n"
     " vmm    - cuMemCreate with POSIX file descriptor handles, mapped with\n"
     "          cuMemMap: cu_ipc_ns can share it across PID namespaces\n"
     " legacy - cuMemAlloc: legacy IPC handles, same PID namespace only\n"
     " chunked - separate cuMemCreate allocations of the granularity (2 MiB\n"
     "          on a GPU) with POSIX file descriptor handles, mapped back to\n"
     "          back, as PyTorch's expandable segments map memory\n"
     " pool   - cuMemAllocAsync from the device's stream-ordered pool, as\n"
     "          cudaMallocAsync: its owner copies it for cu_ipc_ns peers\n"
     "The CUDA driver is the one named by UCX_CUDA_IPC_NS_DRIVER.",
     ucs_offsetof(uct_cuda_cpy_ns_md_config_t, mem_alloc),
     UCS_CONFIG_TYPE_ENUM(uct_cuda_cpy_ns_alloc_mode_names)},

    {NULL}
};


/* Registration has nothing to record: every memh is this one */
static char uct_cuda_cpy_ns_reg_memh;


static ucs_status_t
uct_cuda_cpy_ns_md_config_alloc_mode(const uct_md_config_t *md_config,
                                     void *arg)
{
    *(uct_cuda_cpy_ns_alloc_mode_t*)arg =
            ucs_derived_of(md_config, uct_cuda_cpy_ns_md_config_t)->mem_alloc;
    return UCS_OK;
}


ucs_status_t
uct_cuda_cpy_ns_md_configured_alloc_mode(uct_cuda_cpy_ns_alloc_mode_t *mode_p)
{
    return uct_cuda_ipc_ns_md_base_config_apply(&uct_cuda_cpy_ns_component,
                                                uct_cuda_cpy_ns_md_config_alloc_mode,
                                                mode_p);
}


/* Whether UCX registers its own CUDA copy component */
static int uct_cuda_cpy_ns_stock_component_present(void)
{
    uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
    uct_component_h *components;
    unsigned i, count;
    int found = 0;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return 0;
    }

    for (i = 0; (i < count) && !found; ++i) {
        found = (uct_component_query(components[i], &attr) == UCS_OK) &&
                !strcmp(attr.name, UCT_CUDA_CPY_NS_STOCK_COMPONENT);
    }

    uct_release_component_list(components);
    return found;
}


static ucs_status_t
uct_cuda_cpy_ns_md_config_enable(const uct_md_config_t *md_config, void *arg)
{
    *(uct_cuda_cpy_ns_md_enable_t*)arg =
            ucs_derived_of(md_config, uct_cuda_cpy_ns_md_config_t)->enable;
    return UCS_OK;
}


/*
 * Listed when the driver has a device and the transport offers itself
 * (UCX_CUDA_CPY_NS_ENABLE): by default it steps aside for UCX's own CUDA
 * copy component, so that one UCX never has two (docs/ucx-versions.md).
 */
static ucs_status_t
uct_cuda_cpy_ns_query_md_resources(uct_component_t *component,
                                   uct_md_resource_desc_t **resources_p,
                                   unsigned *num_resources_p)
{
    uct_cuda_cpy_ns_md_enable_t enable = UCT_CUDA_CPY_NS_ENABLE_AUTO;

    (void)uct_cuda_ipc_ns_md_base_config_apply(component,
                                               uct_cuda_cpy_ns_md_config_enable,
                                               &enable);
    if ((enable == UCT_CUDA_CPY_NS_ENABLE_NO) ||
        ((enable == UCT_CUDA_CPY_NS_ENABLE_AUTO) &&
         uct_cuda_cpy_ns_stock_component_present())) {
        ucs_debug("cuda_cpy_ns: not offered (UCX_CUDA_CPY_NS_ENABLE=%s%s)",
                  uct_cuda_cpy_ns_enable_names[enable],
                  (enable == UCT_CUDA_CPY_NS_ENABLE_AUTO) ?
                  ", UCX has its own " UCT_CUDA_CPY_NS_STOCK_COMPONENT : "");
        return uct_md_query_empty_md_resource(resources_p, num_resources_p);
    }

    return uct_cuda_ipc_ns_md_base_query_resources(component, resources_p,
                                                   num_resources_p);
}


static void uct_cuda_cpy_ns_md_close(uct_md_h md)
{
    ucs_free(md);
}


static ucs_status_t uct_cuda_cpy_ns_md_query(uct_md_h md,
                                             uct_cuda_ipc_ns_compat_md_attr_t *md_attr)
{
    uct_cuda_ipc_ns_compat_md_caps_t caps = {
        .flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_ALLOC,
        /* HOST in reg_mem_types: UCP's memory-type endpoint needs a lane
         * that registers host memory (ucp_wireup_add_memaccess_lanes) */
        .reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST) |
                            UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        .alloc_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        /* HOST too: UCX 1.22 wants the memory-type endpoint's copies to
         * reach host memory as well (ucp_wireup_add_rma_lanes) */
        .access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST) |
                            UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        .detect_mem_types = UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        .max_alloc        = ULONG_MAX,
        /* registration is free and records nothing: caching it is safe */
        .cache_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST) |
                            UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        .rkey_packed_size = 0
    };

    uct_cuda_ipc_ns_compat_md_attr_set(md_attr, &caps);
    return UCS_OK;
}


static ucs_status_t
uct_cuda_cpy_ns_md_mem_alloc(uct_md_h uct_md, size_t *length_p,
                             void **address_p, ucs_memory_type_t mem_type,
                             UCT_CUDA_IPC_NS_MEM_ALLOC_SYS_DEV_ARG
                             unsigned flags, const char *alloc_name,
                             uct_mem_h *memh_p)
{
    uct_cuda_cpy_ns_md_t *md = ucs_derived_of(uct_md, uct_cuda_cpy_ns_md_t);
    uct_cuda_cpy_ns_alloc_t *alloc;
    ucs_status_t status;

    if (mem_type != UCS_MEMORY_TYPE_CUDA) {
        ucs_error("cuda_cpy_ns: cannot allocate %s memory for '%s'",
                  ucs_memory_type_names[mem_type], alloc_name);
        return UCS_ERR_UNSUPPORTED;
    }

    alloc = ucs_malloc(sizeof(*alloc), "cuda_cpy_ns_alloc");
    if (alloc == NULL) {
        ucs_error("cuda_cpy_ns: failed to allocate memory handle for '%s'",
                  alloc_name);
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_cpy_ns_alloc_mem(md->alloc_mode, *length_p, alloc);
    if (status != UCS_OK) {
        ucs_free(alloc);
        return status;
    }

    uct_cuda_cpy_ns_memtype_cache_add((void*)alloc->ptr, alloc->size);
    ucs_trace("cuda_cpy_ns: '%s' allocated 0x%llx/%zu", alloc_name,
              (unsigned long long)alloc->ptr, alloc->size);
    *length_p  = alloc->size;
    *address_p = (void*)alloc->ptr;
    *memh_p    = alloc;
    return UCS_OK;
}


static ucs_status_t uct_cuda_cpy_ns_md_mem_free(uct_md_h md, uct_mem_h memh)
{
    uct_cuda_cpy_ns_alloc_t *alloc = memh;
    ucs_status_t status;

    uct_cuda_cpy_ns_memtype_cache_remove((void*)alloc->ptr, alloc->size);
    status = uct_cuda_cpy_ns_alloc_free(alloc);
    ucs_free(alloc);
    return status;
}


/* Copies go through the driver with no registration: host and CUDA memory
 * alike are "registered" for free (UCP registers on every rendezvous send) */
static ucs_status_t
uct_cuda_cpy_ns_md_mem_reg(uct_md_h md, void *address, size_t length,
                           uct_cuda_ipc_ns_compat_mem_reg_arg_t reg_arg,
                           uct_mem_h *memh_p)
{
    *memh_p = &uct_cuda_cpy_ns_reg_memh;
    return UCS_OK;
}


static ucs_status_t
uct_cuda_cpy_ns_md_mem_dereg(uct_md_h md,
                             const uct_md_mem_dereg_params_t *params)
{
    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);

    ucs_assert(params->memh == &uct_cuda_cpy_ns_reg_memh);
    return UCS_OK;
}


static ucs_status_t
uct_cuda_cpy_ns_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                            UCT_CUDA_IPC_NS_RKEY_UNPACK_PARAMS_ARG
                            uct_rkey_t *rkey_p, void **handle_p)
{
    /* rkey_packed_size is 0: there is nothing to unpack */
    *rkey_p   = UCT_INVALID_RKEY;
    *handle_p = NULL;
    return UCS_OK;
}


static uct_md_ops_t uct_cuda_cpy_ns_md_ops = {
    .close                  = uct_cuda_cpy_ns_md_close,
    .query                  = uct_cuda_cpy_ns_md_query,
    .mem_alloc              = uct_cuda_cpy_ns_md_mem_alloc,
    .mem_free               = uct_cuda_cpy_ns_md_mem_free,
    .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg                = uct_cuda_cpy_ns_md_mem_reg,
    .mem_dereg              = uct_cuda_cpy_ns_md_mem_dereg,
    .mem_query              = uct_cuda_ipc_ns_ptr_mem_query,
    .mkey_pack              = (uct_md_mkey_pack_func_t)ucs_empty_function_return_success,
    .detect_memory_type     = uct_cuda_cpy_ns_memtype_detect
};


static ucs_status_t uct_cuda_cpy_ns_md_open(uct_component_t *component,
                                            const char *md_name,
                                            const uct_md_config_t *uct_config,
                                            uct_md_h *md_p)
{
    ucs_status_t status;
    uct_md_t *md;

    /* the library's driver: UCX_CUDA_IPC_NS_DRIVER */
    status = uct_cuda_ipc_ns_md_base_alloc(component, &uct_cuda_cpy_ns_md_ops,
                                           sizeof(uct_cuda_cpy_ns_md_t), md_name,
                                           &md);
    if (status != UCS_OK) {
        return status;
    }

    ucs_derived_of(md, uct_cuda_cpy_ns_md_t)->alloc_mode =
            (uct_cuda_cpy_ns_alloc_mode_t)ucs_derived_of(
                    uct_config, uct_cuda_cpy_ns_md_config_t)->mem_alloc;

    /* this MD detects memory types: make UCP's detection right */
    uct_cuda_cpy_ns_memtype_cache_setup();

    *md_p = md;
    return UCS_OK;
}


uct_component_t uct_cuda_cpy_ns_component = {
    .query_md_resources = uct_cuda_cpy_ns_query_md_resources,
    .md_open            = uct_cuda_cpy_ns_md_open,
    .cm_open            = (uct_component_cm_open_func_t)
                          ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_cuda_cpy_ns_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)
                          ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)
                          ucs_empty_function_return_success,
    UCT_CUDA_IPC_NS_COMPONENT_RKEY_COMPARE
    .name               = UCT_CUDA_CPY_NS_NAME,
    .md_config          = {
        .name           = "CUDA copy across namespaces memory domain",
        .prefix         = UCT_CUDA_CPY_NS_CFG_PREFIX,
        .table          = uct_cuda_cpy_ns_md_config_table,
        .size           = sizeof(uct_cuda_cpy_ns_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(
                                  &uct_cuda_cpy_ns_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)
                          ucs_empty_function
};
