/*
 * cuda_ipc_ns: the differences between the UCX releases the library builds
 * against (1.13.1 and 1.22.0), bridged in one place (docs/ucx-versions.md).
 * The UCX version decides, through UCT_API, here and nowhere else: every
 * other file is written once, against the names below.
 *
 *  - types whose name changed: the MD and memory attributes (v2 in 1.22),
 *    the mem_reg argument (flags, then a params struct);
 *  - arguments added to an MD or component operation, as parameter-list
 *    pieces that are empty where the release lacks them;
 *  - ops members a release added, as designated initializers of functions
 *    defined here;
 *  - UCS helpers whose signature changed, as functions.
 */
#ifndef UCT_CUDA_IPC_NS_COMPAT_H
#define UCT_CUDA_IPC_NS_COMPAT_H


#include <uct/api/version.h>
#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/config/parser.h>
#include <ucs/datastruct/callbackq.h>
#include <ucs/datastruct/mpool.h>


#define UCT_CUDA_IPC_NS_UCX_AT_LEAST(_major, _minor) \
    (UCT_API >= UCT_VERSION(_major, _minor))


/* the releases the module builds against: 1.13, 1.21 (Dynamo's
 * containers) and 1.22 (docs/ucx-versions.md) */
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 21)
typedef uct_md_attr_v2_t uct_cuda_ipc_ns_compat_md_attr_t;
#else
typedef uct_md_attr_t uct_cuda_ipc_ns_compat_md_attr_t;
#endif

#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 22)
typedef uct_md_mem_attr_v2_t uct_cuda_ipc_ns_compat_mem_attr_t;
#else
typedef uct_md_mem_attr_t uct_cuda_ipc_ns_compat_mem_attr_t;
#endif

#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 14)
typedef const uct_md_mem_reg_params_t *uct_cuda_ipc_ns_compat_mem_reg_arg_t;
#else
typedef unsigned uct_cuda_ipc_ns_compat_mem_reg_arg_t;
#endif


/* The invalidation a memory domain offers (docs/security.md): UCP's peer
 * error mode wants UCT_MD_FLAG_INVALIDATE in 1.13, UCT_MD_FLAG_INVALIDATE_RMA
 * from 1.15 (no _AMO: no atomics) */
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 15)
#  define UCT_CUDA_IPC_NS_MD_FLAG_INVALIDATE UCT_MD_FLAG_INVALIDATE_RMA
#else
#  define UCT_CUDA_IPC_NS_MD_FLAG_INVALIDATE UCT_MD_FLAG_INVALIDATE
#endif


/* mkey_pack(md, memh, [address, length,] params, buffer) */
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 16)
#  define UCT_CUDA_IPC_NS_MKEY_PACK_RANGE_ARGS void *address, size_t length,
#else
#  define UCT_CUDA_IPC_NS_MKEY_PACK_RANGE_ARGS
#endif

/* mem_alloc(md, length_p, address_p, mem_type, [sys_dev,] flags, name, memh_p) */
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 19)
#  define UCT_CUDA_IPC_NS_MEM_ALLOC_SYS_DEV_ARG ucs_sys_device_t sys_dev,
#else
#  define UCT_CUDA_IPC_NS_MEM_ALLOC_SYS_DEV_ARG
#endif

/* rkey_unpack(component, buffer, [params,] rkey_p, handle_p) */
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 19)
#  define UCT_CUDA_IPC_NS_RKEY_UNPACK_PARAMS_ARG \
       const uct_rkey_unpack_params_t *params,
#else
#  define UCT_CUDA_IPC_NS_RKEY_UNPACK_PARAMS_ARG
#endif

/* uct_component_t members a release added after md_open .. rkey_release */
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 16)
#  define UCT_CUDA_IPC_NS_COMPONENT_RKEY_COMPARE \
       .rkey_compare = uct_base_rkey_compare,
#else
#  define UCT_CUDA_IPC_NS_COMPONENT_RKEY_COMPARE
#endif

/*
 * uct_iface_internal_ops_t members added since 1.13 (ep_connect_to_ep_v2
 * 1.14, iface_is_reachable_v2 1.15, ep_is_connected 1.16, ep_get_device_ep
 * by 1.21, iface_query_v2 1.22), for both transports. UCP calls them
 * without checking for NULL.
 */
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 22)
#  define UCT_CUDA_IPC_NS_IFACE_QUERY_V2 \
       .iface_query_v2        = uct_iface_base_query_v2,
#else
#  define UCT_CUDA_IPC_NS_IFACE_QUERY_V2
#endif
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 21)
#  define UCT_CUDA_IPC_NS_IFACE_INTERNAL_OPS_ADDED \
       UCT_CUDA_IPC_NS_IFACE_QUERY_V2 \
       .ep_connect_to_ep_v2   = (uct_ep_connect_to_ep_v2_func_t) \
                                ucs_empty_function_return_unsupported, \
       .iface_is_reachable_v2 = uct_cuda_ipc_ns_compat_iface_is_reachable_v2, \
       .ep_is_connected       = uct_cuda_ipc_ns_compat_ep_is_connected, \
       .ep_get_device_ep      = (uct_ep_get_device_ep_func_t) \
                                ucs_empty_function_return_unsupported,
#else
#  define UCT_CUDA_IPC_NS_IFACE_INTERNAL_OPS_ADDED
#endif


/* What a memory domain reports, on every release */
typedef struct uct_cuda_ipc_ns_compat_md_caps {
    uint64_t flags;            /* UCT_MD_FLAG_* */
    uint64_t reg_mem_types;
    uint64_t alloc_mem_types;
    uint64_t access_mem_types;
    uint64_t detect_mem_types;
    uint64_t cache_mem_types;  /* UCP may cache registrations (1.22) */
    size_t   max_alloc;
    size_t   rkey_packed_size;
} uct_cuda_ipc_ns_compat_md_caps_t;


/** Fill the release's MD attributes from @a caps */
void uct_cuda_ipc_ns_compat_md_attr_set(uct_cuda_ipc_ns_compat_md_attr_t *md_attr,
                                        const uct_cuda_ipc_ns_compat_md_caps_t *caps);

/** The UCT_MD_MEM_FLAG_* flags of a mem_reg call */
unsigned uct_cuda_ipc_ns_compat_mem_reg_flags(uct_cuda_ipc_ns_compat_mem_reg_arg_t arg);


/**
 * Fill @a opts from the environment with the table of @a entry (its prefix
 * after "UCX_"), as UCX fills its own tables; release with
 * ucs_config_parser_release_opts(opts, entry->table).
 */
ucs_status_t
uct_cuda_ipc_ns_compat_config_fill(void *opts,
                                   ucs_config_global_list_entry_t *entry);

/** Whether a UCS_CONFIG_TYPE_BW value is "auto" */
int uct_cuda_ipc_ns_compat_config_bw_is_auto(double value);


/** A memory pool of @a elem_size objects, @a alignment aligned, growing by
 *  @a elems_per_chunk up to @a max_elems, with @a ops (NULL: chunks from
 *  malloc, objects not initialized) */
ucs_status_t uct_cuda_ipc_ns_compat_mpool_init(ucs_mpool_t *mp,
                                               size_t elem_size,
                                               size_t alignment,
                                               unsigned elems_per_chunk,
                                               unsigned max_elems,
                                               ucs_mpool_ops_t *ops,
                                               const char *name);


/** Record a CUDA allocation in UCS's memory-type cache */
void uct_cuda_ipc_ns_compat_memtype_cache_update(const void *address,
                                                 size_t size);


/** Call @a cb(@a arg) once from the progress of @a cbq; any thread */
void uct_cuda_ipc_ns_compat_oneshot_add(ucs_callbackq_t *cbq, void *owner,
                                        ucs_callback_t cb, void *arg);

/** Drop the one-shot callbacks of @a owner that @a pred selects */
void uct_cuda_ipc_ns_compat_oneshot_remove(ucs_callbackq_t *cbq, void *owner,
                                           ucs_callbackq_predicate_t pred,
                                           void *arg);


#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 21)
/* The added internal operations, on the base classes' rules */
int uct_cuda_ipc_ns_compat_iface_is_reachable_v2(
        const uct_iface_h tl_iface,
        const uct_iface_is_reachable_params_t *params);

int uct_cuda_ipc_ns_compat_ep_is_connected(
        const uct_ep_h tl_ep, const uct_ep_is_connected_params_t *params);
#endif

#endif
