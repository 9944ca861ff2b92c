/*
 * cuda_ipc_ns: what the memory domains of both components share
 * (docs/architecture.md, "Shared layer"): the library's own configuration
 * (the CUDA driver to load, one for the whole library), loading that driver,
 * listing a memory domain when the driver has a device, allocating a memory
 * domain, and reading a component's MD configuration.
 */
#ifndef UCT_CUDA_IPC_NS_MD_BASE_H
#define UCT_CUDA_IPC_NS_MD_BASE_H

#include <uct/base/uct_md.h>


/* Prefix of the library's variables (UCX_CUDA_IPC_NS_DRIVER) */
#define UCT_CUDA_IPC_NS_CFG_PREFIX "CUDA_IPC_NS_"


/* The library's configuration, listed by ucx_info -c -f */
typedef struct uct_cuda_ipc_ns_md_base_lib_config {
    char *driver_path; /* CUDA driver library */
} uct_cuda_ipc_ns_md_base_lib_config_t;


/* List (and unlist) the library's configuration for ucx_info -c: done by
 * the module's constructor once the ABI guard admitted the UCX */
void uct_cuda_ipc_ns_md_base_config_register(void);
void uct_cuda_ipc_ns_md_base_config_unregister(void);


/**
 * Load the CUDA driver named by UCX_CUDA_IPC_NS_DRIVER (once per process:
 * one driver serves both components) and check that it has a device.
 *
 * @return UCS_OK, or UCS_ERR_NO_DEVICE (logged at debug level: a host
 *         without a GPU is a normal configuration).
 */
ucs_status_t uct_cuda_ipc_ns_md_base_driver_load(void);


/* The query_md_resources of both components: their memory domain is listed
 * when the configured driver has a device */
ucs_status_t uct_cuda_ipc_ns_md_base_query_resources(uct_component_t *component,
                                                     uct_md_resource_desc_t **resources_p,
                                                     unsigned *num_resources_p);


/**
 * Load the configured driver and allocate a zeroed memory domain of @a size
 * bytes (sizeof(uct_md_t) or more) for @a component with @a ops.
 * Logs why it fails.
 */
ucs_status_t uct_cuda_ipc_ns_md_base_alloc(uct_component_t *component,
                                           uct_md_ops_t *ops, size_t size,
                                           const char *md_name, uct_md_t **md_p);


/* What to do with a component's MD configuration: uct_md_config_t derived */
typedef ucs_status_t (*uct_cuda_ipc_ns_md_base_config_func_t)(
        const uct_md_config_t *md_config, void *arg);

/**
 * Read @a component's MD configuration from the environment
 * (UCX_<prefix>*), call @a func on it with @a arg, and release it.
 *
 * @return what @a func returns, or the reading error.
 */
ucs_status_t
uct_cuda_ipc_ns_md_base_config_apply(uct_component_t *component,
                                     uct_cuda_ipc_ns_md_base_config_func_t func,
                                     void *arg);

#endif
