/*
 * cuda_ipc_ns: device and interface address formats (docs/wire-format.md).
 * Pure pack/parse of bytes, little-endian, fixed sizes.
 *
 *   device address: u64 system_id, u8 flags (UCT_CUDA_IPC_NS_ADDR_FLAG_*)
 *   iface address:  u32 pid, u64 pid_ns, u8 flags (UCT_CUDA_IPC_NS_ADDR_FLAG_*),
 *                   u64 start_time (pid reuse guard of liveness checks)
 */
#ifndef UCT_CUDA_IPC_NS_ADDR_H
#define UCT_CUDA_IPC_NS_ADDR_H

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


#define UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE  (8 + 1)
#define UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE   (4 + 8 + 1 + 8)


/* What a process can do; carried by both addresses */
enum {
    UCT_CUDA_IPC_NS_ADDR_FLAG_LEGACY   = 1u << 0, /* exports legacy handles */
    UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD = 1u << 1, /* exports/imports VMM fds */
    UCT_CUDA_IPC_NS_ADDR_FLAG_BROKER   = 1u << 2  /* runs an fd broker */
};


typedef struct uct_cuda_ipc_ns_addr_device {
    uint64_t system_id;
    uint8_t  flags;
} uct_cuda_ipc_ns_addr_device_t;


typedef struct uct_cuda_ipc_ns_addr_iface {
    uint32_t pid;
    uint64_t pid_ns;
    uint8_t  flags;
    uint64_t start_time; /* clock ticks after boot */
} uct_cuda_ipc_ns_addr_iface_t;


void uct_cuda_ipc_ns_addr_device_pack(const uct_cuda_ipc_ns_addr_device_t *addr,
                                      void *buffer);

/** @return UCS_OK or UCS_ERR_INVALID_PARAM when @a length is short */
ucs_status_t uct_cuda_ipc_ns_addr_device_parse(const void *buffer, size_t length,
                                               uct_cuda_ipc_ns_addr_device_t *addr);

void uct_cuda_ipc_ns_addr_iface_pack(const uct_cuda_ipc_ns_addr_iface_t *addr,
                                     void *buffer);

ucs_status_t uct_cuda_ipc_ns_addr_iface_parse(const void *buffer, size_t length,
                                              uct_cuda_ipc_ns_addr_iface_t *addr);


/**
 * Parse the device and iface addresses UCP hands to is_reachable/ep_create
 * (of the sizes the iface reports; NULL when absent).
 *
 * @return UCS_OK, or UCS_ERR_INVALID_PARAM when one is missing or short.
 */
ucs_status_t uct_cuda_ipc_ns_addr_parse_remote(const void *dev_buffer,
                                               const void *iface_buffer,
                                               uct_cuda_ipc_ns_addr_device_t *dev,
                                               uct_cuda_ipc_ns_addr_iface_t *iface);


/**
 * Reachability rule, given both sides' addresses (docs/wire-format.md): same
 * process (pid and pid_ns) or another system: unreachable; another PID
 * namespace: reachable only when both sides can exchange POSIX fds through a
 * broker.
 *
 * @return nonzero when the remote side is reachable; *reason_p (may be NULL)
 *         names why not.
 */
int uct_cuda_ipc_ns_addr_is_reachable(const uct_cuda_ipc_ns_addr_device_t *local_dev,
                                      const uct_cuda_ipc_ns_addr_iface_t *local_iface,
                                      const uct_cuda_ipc_ns_addr_device_t *remote_dev,
                                      const uct_cuda_ipc_ns_addr_iface_t *remote_iface,
                                      const char **reason_p);


/**
 * Reachability rule of the loopback copy transport cu_cpy_ns: only its own
 * process, that is the same system, PID namespace and pid. Same contract as
 * uct_cuda_ipc_ns_addr_is_reachable.
 */
int uct_cuda_ipc_ns_addr_is_self(const uct_cuda_ipc_ns_addr_device_t *local_dev,
                                 const uct_cuda_ipc_ns_addr_iface_t *local_iface,
                                 const uct_cuda_ipc_ns_addr_device_t *remote_dev,
                                 const uct_cuda_ipc_ns_addr_iface_t *remote_iface,
                                 const char **reason_p);


/* The type of both rules above */
typedef int (*uct_cuda_ipc_ns_addr_reach_func_t)(
        const uct_cuda_ipc_ns_addr_device_t *local_dev,
        const uct_cuda_ipc_ns_addr_iface_t *local_iface,
        const uct_cuda_ipc_ns_addr_device_t *remote_dev,
        const uct_cuda_ipc_ns_addr_iface_t *remote_iface,
        const char **reason_p);

#endif
