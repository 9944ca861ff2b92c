/*
 * cuda_cpy_ns: the UCT component and transport cu_cpy_ns, registered with
 * libuct from this library's constructor, next to cuda_ipc_ns: preloading
 * the library activates both.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_cpy_ns_md.h"
#include "cuda_cpy_ns_iface.h"

#include <uct/base/uct_component.h>
#include <ucs/sys/compiler.h>


uct_component_t uct_cuda_cpy_ns_component = {
    .query_md_resources = uct_cuda_cpy_ns_query_md_resources,
    .md_open            = uct_cuda_cpy_ns_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_cuda_cpy_ns_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)ucs_empty_function_return_success,
    .name               = UCT_CUDA_CPY_NS_NAME,
    .md_config          = {
        .name           = "CUDA copy across namespaces memory domain",
        .prefix         = UCT_CUDA_CPY_NS_CFG_PREFIX,
        .table          = uct_cuda_cpy_ns_md_config_table,
        .size           = sizeof(uct_cuda_cpy_ns_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_cuda_cpy_ns_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};


/* UCX 1.13.1 holds transport names in UCT_TL_NAME_MAX bytes */
_Static_assert(sizeof(UCT_CUDA_CPY_NS_TL_NAME) <= UCT_TL_NAME_MAX,
               "transport name too long for UCX 1.13.1");

UCT_TL_DEFINE_ENTRY(&uct_cuda_cpy_ns_component, cu_cpy_ns,
                    uct_cuda_cpy_ns_query_devices, uct_cuda_cpy_ns_iface_t,
                    UCT_CUDA_CPY_NS_CFG_PREFIX,
                    uct_cuda_cpy_ns_iface_config_table,
                    uct_cuda_cpy_ns_iface_config_t);

/* constructor: registers the component, its MD config and the transport */
UCT_SINGLE_TL_INIT(&uct_cuda_cpy_ns_component, cu_cpy_ns, ctor,,)
