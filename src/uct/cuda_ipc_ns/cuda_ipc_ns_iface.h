/*
 * cuda_ipc_ns: interface — addresses, reachability, capabilities, progress,
 * wakeup and pending requests (docs/architecture.md).
 */
#ifndef UCT_CUDA_IPC_NS_IFACE_H
#define UCT_CUDA_IPC_NS_IFACE_H

#include "cuda_ipc_ns_types.h"


extern ucs_config_field_t uct_cuda_ipc_ns_iface_config_table[];

ucs_status_t uct_cuda_ipc_ns_query_devices(uct_md_h md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p);

UCS_CLASS_DECLARE_NEW_FUNC(uct_cuda_ipc_ns_iface_t, uct_iface_t, uct_md_h,
                           uct_worker_h, const uct_iface_params_t*,
                           const uct_iface_config_t*);

#endif
