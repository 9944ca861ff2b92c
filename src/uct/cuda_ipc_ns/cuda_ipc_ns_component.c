/*
 * cuda_ipc_ns: the UCT component and transport, registered with libuct from
 * this library's constructor: preloading the library is the activation.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_iface.h"

#include <uct/base/uct_component.h>
#include <ucs/sys/compiler.h>


uct_component_t uct_cuda_ipc_ns_component = {
    .query_md_resources = uct_cuda_ipc_ns_query_md_resources,
    .md_open            = uct_cuda_ipc_ns_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_cuda_ipc_ns_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = uct_cuda_ipc_ns_rkey_release,
    .name               = UCT_CUDA_IPC_NS_NAME,
    .md_config          = {
        .name           = "CUDA IPC across namespaces memory domain",
        .prefix         = UCT_CUDA_IPC_NS_CFG_PREFIX,
        .table          = uct_cuda_ipc_ns_md_config_table,
        .size           = sizeof(uct_cuda_ipc_ns_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_cuda_ipc_ns_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};


/*
 * UCX 1.13.1 holds transport names in char[UCT_TL_NAME_MAX = 10]: at most 9
 * characters, so the transport cannot be called "cuda_ipc_ns" like the
 * component. UCX_TLS=cu_ipc_ns selects it.
 */
_Static_assert(sizeof(UCT_CUDA_IPC_NS_TL_NAME) <= UCT_TL_NAME_MAX,
               "transport name too long for UCX 1.13.1");

UCT_TL_DEFINE_ENTRY(&uct_cuda_ipc_ns_component, cu_ipc_ns,
                    uct_cuda_ipc_ns_query_devices, uct_cuda_ipc_ns_iface_t,
                    UCT_CUDA_IPC_NS_CFG_PREFIX,
                    uct_cuda_ipc_ns_iface_config_table,
                    uct_cuda_ipc_ns_iface_config_t);

/* constructor: registers the component, its MD config and the transport */
UCT_SINGLE_TL_INIT(&uct_cuda_ipc_ns_component, cu_ipc_ns, ctor,,)
