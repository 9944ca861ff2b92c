/*
 * cuda_ipc_ns: what both memory domains share (see cuda_ipc_ns_md_base.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_md_base.h"
#include "cuda_ipc_ns_compat.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/config/parser.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>


static ucs_config_field_t uct_cuda_ipc_ns_lib_config_table[] = {
    {"DRIVER", "libcuda.so.1",
     "CUDA driver library to load at run time (a file name searched like\n"
     "dlopen() does, or a path), for both components of the library. Without\n"
     "a loadable driver or a device they report no resources.",
     ucs_offsetof(uct_cuda_ipc_ns_md_base_lib_config_t, driver_path),
     UCS_CONFIG_TYPE_STRING},

    {NULL}
};


static ucs_config_global_list_entry_t uct_cuda_ipc_ns_lib_config_entry = {
    .name   = "CUDA IPC across namespaces library",
    .prefix = UCT_CUDA_IPC_NS_CFG_PREFIX,
    .table  = uct_cuda_ipc_ns_lib_config_table,
    .size   = sizeof(uct_cuda_ipc_ns_md_base_lib_config_t)
};


void uct_cuda_ipc_ns_md_base_config_register(void)
{
    ucs_list_add_tail(&ucs_config_global_list,
                      &uct_cuda_ipc_ns_lib_config_entry.list);
}


void uct_cuda_ipc_ns_md_base_config_unregister(void)
{
    ucs_list_del(&uct_cuda_ipc_ns_lib_config_entry.list);
}


ucs_status_t uct_cuda_ipc_ns_md_base_driver_load(void)
{
    uct_cuda_ipc_ns_md_base_lib_config_t config;
    ucs_status_t status;
    int count = 0;

    status = uct_cuda_ipc_ns_compat_config_fill(&config,
                                                &uct_cuda_ipc_ns_lib_config_entry);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: cannot read UCX_%sDRIVER: %s",
                  UCT_CUDA_IPC_NS_CFG_PREFIX, ucs_status_string(status));
        return status;
    }

    status = uct_cuda_ipc_ns_driver_load(config.driver_path);
    if (status == UCS_OK) {
        status = UCT_CUDA_IPC_NS_CU_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGetCount,
                                         &count);
        if ((status != UCS_OK) || (count == 0)) {
            ucs_debug("cuda_ipc_ns: driver '%s' reports no CUDA device",
                      config.driver_path);
            status = UCS_ERR_NO_DEVICE;
        }
    }

    ucs_config_parser_release_opts(&config, uct_cuda_ipc_ns_lib_config_table);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_md_base_query_resources(uct_component_t *component,
                                                     uct_md_resource_desc_t **resources_p,
                                                     unsigned *num_resources_p)
{
    if (uct_cuda_ipc_ns_md_base_driver_load() != UCS_OK) {
        return uct_md_query_empty_md_resource(resources_p, num_resources_p);
    }

    return uct_md_query_single_md_resource(component, resources_p,
                                           num_resources_p);
}


ucs_status_t uct_cuda_ipc_ns_md_base_alloc(uct_component_t *component,
                                           uct_md_ops_t *ops, size_t size,
                                           const char *md_name, uct_md_t **md_p)
{
    ucs_status_t status;
    uct_md_t *md;

    status = uct_cuda_ipc_ns_md_base_driver_load();
    if (status != UCS_OK) {
        ucs_error("%s: cannot open memory domain '%s': no CUDA driver or "
                  "device (UCX_%sDRIVER)", component->name, md_name,
                  UCT_CUDA_IPC_NS_CFG_PREFIX);
        return status;
    }

    md = ucs_calloc(1, size, "cuda_ipc_ns_md");
    if (md == NULL) {
        ucs_error("%s: failed to allocate memory domain", component->name);
        return UCS_ERR_NO_MEMORY;
    }

    md->ops       = ops;
    md->component = component;
    *md_p         = md;
    return UCS_OK;
}


ucs_status_t
uct_cuda_ipc_ns_md_base_config_apply(uct_component_t *component,
                                     uct_cuda_ipc_ns_md_base_config_func_t func,
                                     void *arg)
{
    uct_md_config_t *md_config;
    ucs_status_t status;

    status = uct_md_config_read(component, NULL, NULL, &md_config);
    if (status != UCS_OK) {
        return status;
    }

    status = func(md_config, arg);
    uct_config_release(md_config);
    return status;
}
