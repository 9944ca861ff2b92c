/*
 * cuda_ipc_ns: memory domain — registration and export of CUDA memory.
 */
#ifndef UCT_CUDA_IPC_NS_MD_H
#define UCT_CUDA_IPC_NS_MD_H

#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_cache.h"

#include <uct/base/uct_md.h>


#define UCT_CUDA_IPC_NS_NAME      "cuda_ipc_ns" /* component and MD */
#define UCT_CUDA_IPC_NS_DEV_NAME  "cuda"   /* as UCX names CUDA devices */
#define UCT_CUDA_IPC_NS_CFG_PREFIX "CUDA_IPC_NS_"


typedef struct uct_cuda_ipc_ns_md_config {
    uct_md_config_t          super;
    char                     *driver_path;  /* CUDA driver library */
    int                      legacy;        /* export legacy IPC handles */
    int                      posix_fd;      /* export VMM POSIX fds */
    int                      fdx_mode;      /* uct_cuda_ipc_ns_fdx_mode_t */
    char                     *sock_dir;     /* broker socket directory */
    double                   sock_timeout;  /* fd exchange timeout, seconds */
    int                      allowed_uid;   /* extra uid served by the broker */
    int                      cache_enable;  /* keep peer mappings */
    unsigned                 cache_max_regions;
    size_t                   cache_max_size;
} uct_cuda_ipc_ns_md_config_t;


typedef struct uct_cuda_ipc_ns_md {
    uct_md_t   super;
    int        legacy;    /* export legacy handles */
    int        posix_fd;  /* export VMM POSIX fds */
    uint8_t    addr_flags; /* UCT_CUDA_IPC_NS_ADDR_FLAG_*: what we can do */
    uct_cuda_ipc_ns_fdx_config_t fdx;     /* importing peers' fds */
    char                         *sock_dir; /* owns fdx.sock_dir */
    uct_cuda_ipc_ns_broker_t     *broker; /* serves our fds, or NULL */
} uct_cuda_ipc_ns_md_t;


/* Registration of a CUDA allocation: what mkey_pack needs */
typedef struct uct_cuda_ipc_ns_memh {
    uct_cuda_ipc_ns_rkey_info_t info;
    int                         fd;       /* exported POSIX fd, or -1 */
    uct_cuda_ipc_ns_broker_reg_t *reg;    /* fd registered with the broker */
} uct_cuda_ipc_ns_memh_t;


/* Unpacked remote key */
typedef struct uct_cuda_ipc_ns_rkey {
    uct_cuda_ipc_ns_rkey_info_t info;
    /* owner's cache entry when it is not the endpoint's peer, found on
     * first use; referenced until the key is released */
    uct_cuda_ipc_ns_peer_t      *peer;
} uct_cuda_ipc_ns_rkey_t;


extern uct_component_t uct_cuda_ipc_ns_component;
extern ucs_config_field_t uct_cuda_ipc_ns_md_config_table[];

/**
 * Load the CUDA driver named by UCX_CUDA_IPC_NS_DRIVER (one driver serves the
 * whole library, both components) and check that it has a device.
 *
 * @return UCS_OK, or UCS_ERR_NO_DEVICE (logged at debug level).
 */
ucs_status_t uct_cuda_ipc_ns_driver_load_configured(void);


/* What to do with a component's MD configuration: uct_md_config_t derived */
typedef ucs_status_t (*uct_cuda_ipc_ns_md_config_func_t)(
        const uct_md_config_t *md_config, void *arg);

/**
 * Read @a component's MD configuration from the environment
 * (UCX_<prefix>*), call @a func on it with @a arg, and release it.
 *
 * @return what @a func returns, or the reading error.
 */
ucs_status_t
uct_cuda_ipc_ns_md_config_apply(uct_component_t *component,
                                uct_cuda_ipc_ns_md_config_func_t func,
                                void *arg);

/**
 * Load the configured driver (uct_cuda_ipc_ns_driver_load_configured, or the
 * one at @a driver_path when not NULL) and allocate a zeroed memory domain
 * of @a size bytes, sizeof(uct_md_t) or more, for @a component with @a ops.
 * Logs why it fails.
 */
ucs_status_t uct_cuda_ipc_ns_md_alloc(uct_component_t *component,
                                      uct_md_ops_t *ops, size_t size,
                                      const char *md_name,
                                      const char *driver_path, uct_md_t **md_p);


/*
 * Define @a _prefix##_component, of memory domain @a _name (both
 * components of the library): listed when the driver has a device
 * (uct_cuda_ipc_ns_query_md_resources), opened by _prefix##_md_open and
 * configured by _prefix##_md_config_table under UCX_<_cfg_prefix>.
 */
#define UCT_CUDA_IPC_NS_COMPONENT_DEFINE(_prefix, _name, _cfg_prefix, \
                                         _description, _rkey_unpack, \
                                         _rkey_release) \
    uct_component_t _prefix##_component = { \
        .query_md_resources = uct_cuda_ipc_ns_query_md_resources, \
        .md_open            = _prefix##_md_open, \
        .cm_open            = (uct_component_cm_open_func_t) \
                              ucs_empty_function_return_unsupported, \
        .rkey_unpack        = _rkey_unpack, \
        .rkey_ptr           = (uct_component_rkey_ptr_func_t) \
                              ucs_empty_function_return_unsupported, \
        .rkey_release       = _rkey_release, \
        .name               = _name, \
        .md_config          = { \
            .name           = _description, \
            .prefix         = _cfg_prefix, \
            .table          = _prefix##_md_config_table, \
            .size           = sizeof(_prefix##_md_config_t), \
        }, \
        .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY, \
        .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER( \
                                      &_prefix##_component), \
        .flags              = 0, \
        .md_vfs_init        = (uct_component_md_vfs_init_func_t) \
                              ucs_empty_function \
    }


/* Lists this library's memory domain when the driver has a device */
ucs_status_t uct_cuda_ipc_ns_query_md_resources(uct_component_t *component,
                                                uct_md_resource_desc_t **resources_p,
                                                unsigned *num_resources_p);

#endif
