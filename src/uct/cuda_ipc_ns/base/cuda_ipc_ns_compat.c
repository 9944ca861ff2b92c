/*
 * cuda_ipc_ns: UCX version differences (see cuda_ipc_ns_compat.h and
 * docs/ucx-versions.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_compat.h"
#include "cuda_ipc_ns_iface_base.h"

#include <ucs/memory/memtype_cache.h>
#include <limits.h>
#include <string.h>


void uct_cuda_ipc_ns_compat_md_attr_set(uct_cuda_ipc_ns_compat_md_attr_t *md_attr,
                                        const uct_cuda_ipc_ns_compat_md_caps_t *caps)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 21)
    uct_md_base_md_query(md_attr);
    md_attr->flags            = caps->flags;
    md_attr->reg_mem_types    = caps->reg_mem_types;
    md_attr->alloc_mem_types  = caps->alloc_mem_types;
    md_attr->access_mem_types = caps->access_mem_types;
    md_attr->detect_mem_types = caps->detect_mem_types;
    md_attr->cache_mem_types  = caps->cache_mem_types;
    md_attr->max_alloc        = caps->max_alloc;
    md_attr->rkey_packed_size = caps->rkey_packed_size;
#else
    /* 1.13 has no per-MD registration cache types */
    md_attr->cap.flags            = caps->flags;
    md_attr->cap.reg_mem_types    = caps->reg_mem_types;
    md_attr->cap.alloc_mem_types  = caps->alloc_mem_types;
    md_attr->cap.access_mem_types = caps->access_mem_types;
    md_attr->cap.detect_mem_types = caps->detect_mem_types;
    md_attr->cap.max_alloc        = caps->max_alloc;
    md_attr->cap.max_reg          = ULONG_MAX;
    md_attr->rkey_packed_size     = caps->rkey_packed_size;
    md_attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&md_attr->local_cpus, 0xff, sizeof(md_attr->local_cpus));
#endif
}


unsigned uct_cuda_ipc_ns_compat_mem_reg_flags(uct_cuda_ipc_ns_compat_mem_reg_arg_t arg)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 14)
    return UCT_MD_MEM_REG_FIELD_VALUE(arg, flags, FIELD_FLAGS, 0);
#else
    return arg;
#endif
}


ucs_status_t
uct_cuda_ipc_ns_compat_config_fill(void *opts,
                                   ucs_config_global_list_entry_t *entry)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 15)
    return ucs_config_parser_fill_opts(opts, entry, UCS_DEFAULT_ENV_PREFIX, 0);
#else
    return ucs_config_parser_fill_opts(opts, entry->table,
                                       UCS_DEFAULT_ENV_PREFIX, entry->prefix,
                                       0);
#endif
}


int uct_cuda_ipc_ns_compat_config_bw_is_auto(double value)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 14)
    return UCS_CONFIG_DBL_IS_AUTO(value);
#else
    return UCS_CONFIG_BW_IS_AUTO(value);
#endif
}


static ucs_mpool_ops_t uct_cuda_ipc_ns_compat_malloc_mpool_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = NULL,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};


ucs_status_t uct_cuda_ipc_ns_compat_mpool_init(ucs_mpool_t *mp,
                                               size_t elem_size,
                                               size_t alignment,
                                               unsigned elems_per_chunk,
                                               unsigned max_elems,
                                               ucs_mpool_ops_t *ops,
                                               const char *name)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 14)
    ucs_mpool_params_t params;
#endif

    if (ops == NULL) {
        ops = &uct_cuda_ipc_ns_compat_malloc_mpool_ops;
    }

#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 14)
    ucs_mpool_params_reset(&params);
    params.elem_size       = elem_size;
    params.alignment       = alignment;
    params.elems_per_chunk = elems_per_chunk;
    params.max_elems       = max_elems;
    params.ops             = ops;
    params.name            = name;
    return ucs_mpool_init(&params, mp);
#else
    return ucs_mpool_init(mp, 0, elem_size, 0, alignment, elems_per_chunk,
                          max_elems, ops, name);
#endif
}


void uct_cuda_ipc_ns_compat_memtype_cache_update(const void *address,
                                                 size_t size)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 22)
    ucs_memtype_cache_update(address, size, UCS_MEMORY_TYPE_CUDA,
                             UCS_SYS_DEVICE_ID_UNKNOWN, 0);
#else
    ucs_memtype_cache_update(address, size, UCS_MEMORY_TYPE_CUDA,
                             UCS_SYS_DEVICE_ID_UNKNOWN);
#endif
}


void uct_cuda_ipc_ns_compat_oneshot_add(ucs_callbackq_t *cbq, void *owner,
                                        ucs_callback_t cb, void *arg)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 16)
    ucs_callbackq_add_oneshot(cbq, owner, cb, arg);
#else
    (void)ucs_callbackq_add_safe(cbq, cb, arg, UCS_CALLBACKQ_FLAG_ONESHOT);
#endif
}


void uct_cuda_ipc_ns_compat_oneshot_remove(ucs_callbackq_t *cbq, void *owner,
                                           ucs_callbackq_predicate_t pred,
                                           void *arg)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 16)
    ucs_callbackq_remove_oneshot(cbq, owner, pred, arg);
#else
    ucs_callbackq_remove_if(cbq, pred, arg);
#endif
}


#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 21)
int uct_cuda_ipc_ns_compat_iface_is_reachable_v2(
        const uct_iface_h tl_iface,
        const uct_iface_is_reachable_params_t *params)
{
    /* both scopes (network, device) mean this host for the transports:
     * the base class's rule decides */
    if (!uct_iface_is_reachable_params_addrs_valid(params)) {
        return 0;
    }

    if (!uct_cuda_ipc_ns_iface_base_is_reachable(tl_iface, params->device_addr,
                                                 params->iface_addr)) {
        uct_iface_fill_info_str_buf(params, "not reachable by %s",
                                    ucs_derived_of(tl_iface,
                                                   uct_base_iface_t)->md->
                                    component->name);
        return 0;
    }

    return 1;
}


int uct_cuda_ipc_ns_compat_ep_is_connected(
        const uct_ep_h tl_ep, const uct_ep_is_connected_params_t *params)
{
    return uct_cuda_ipc_ns_iface_base_ep_is_connected(
            ucs_derived_of(tl_ep, uct_cuda_ipc_ns_iface_base_ep_t),
            (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR) ?
            params->device_addr : NULL,
            (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR) ?
            params->iface_addr : NULL);
}
#endif
