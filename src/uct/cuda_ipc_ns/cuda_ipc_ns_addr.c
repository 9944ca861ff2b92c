/*
 * cuda_ipc_ns: device and interface address formats and the reachability
 * rule (DESIGN.md 4.2). Byte-by-byte little-endian, see cuda_ipc_ns_addr.h.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_addr.h"

#include <ucs/debug/log.h>
#include <string.h>


static inline void uct_cuda_ipc_ns_addr_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void uct_cuda_ipc_ns_addr_put_u64(uint8_t *p, uint64_t v)
{
    uct_cuda_ipc_ns_addr_put_u32(p, (uint32_t)v);
    uct_cuda_ipc_ns_addr_put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t uct_cuda_ipc_ns_addr_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint64_t uct_cuda_ipc_ns_addr_get_u64(const uint8_t *p)
{
    return (uint64_t)uct_cuda_ipc_ns_addr_get_u32(p) |
           ((uint64_t)uct_cuda_ipc_ns_addr_get_u32(p + 4) << 32);
}


void uct_cuda_ipc_ns_device_addr_pack(const uct_cuda_ipc_ns_device_addr_t *addr,
                                      void *buffer)
{
    uint8_t *p = buffer;

    uct_cuda_ipc_ns_addr_put_u64(p, addr->system_id);
    p[8] = addr->flags;
}

ucs_status_t uct_cuda_ipc_ns_device_addr_parse(const void *buffer, size_t length,
                                               uct_cuda_ipc_ns_device_addr_t *addr)
{
    const uint8_t *p = buffer;

    if (length < UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE) {
        ucs_debug("cuda_ipc_ns: device address too short: %zu bytes, need %d",
                  length, UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);
        return UCS_ERR_INVALID_PARAM;
    }

    addr->system_id = uct_cuda_ipc_ns_addr_get_u64(p);
    addr->flags     = p[8];
    return UCS_OK;
}

void uct_cuda_ipc_ns_iface_addr_pack(const uct_cuda_ipc_ns_iface_addr_t *addr,
                                     void *buffer)
{
    uint8_t *p = buffer;

    uct_cuda_ipc_ns_addr_put_u32(p, addr->pid);
    uct_cuda_ipc_ns_addr_put_u64(p + 4, addr->pid_ns);
    p[12] = addr->flags;
    uct_cuda_ipc_ns_addr_put_u64(p + 13, addr->start_time);
}

ucs_status_t uct_cuda_ipc_ns_iface_addr_parse(const void *buffer, size_t length,
                                              uct_cuda_ipc_ns_iface_addr_t *addr)
{
    const uint8_t *p = buffer;

    if (length < UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE) {
        ucs_debug("cuda_ipc_ns: iface address too short: %zu bytes, need %d",
                  length, UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);
        return UCS_ERR_INVALID_PARAM;
    }

    addr->pid    = uct_cuda_ipc_ns_addr_get_u32(p);
    addr->pid_ns = uct_cuda_ipc_ns_addr_get_u64(p + 4);
    addr->flags      = p[12];
    addr->start_time = uct_cuda_ipc_ns_addr_get_u64(p + 13);
    return UCS_OK;
}


static int uct_cuda_ipc_ns_addr_refuse(const char *reason,
                                       const char **reason_p)
{
    if (reason_p != NULL) {
        *reason_p = reason;
    }
    return 0;
}

int uct_cuda_ipc_ns_addr_is_reachable(const uct_cuda_ipc_ns_device_addr_t *local_dev,
                                      const uct_cuda_ipc_ns_iface_addr_t *local_iface,
                                      const uct_cuda_ipc_ns_device_addr_t *remote_dev,
                                      const uct_cuda_ipc_ns_iface_addr_t *remote_iface,
                                      const char **reason_p)
{
    const uint8_t fd_caps = UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD |
                            UCT_CUDA_IPC_NS_ADDR_FLAG_BROKER;
    uint8_t local_flags, remote_flags;

    /* both addresses carry capabilities; a side may set them in either */
    local_flags  = local_dev->flags | local_iface->flags;
    remote_flags = remote_dev->flags | remote_iface->flags;

    if (local_dev->system_id != remote_dev->system_id) {
        return uct_cuda_ipc_ns_addr_refuse("different system", reason_p);
    }

    /* a pid alone is ambiguous across PID namespaces */
    if ((local_iface->pid == remote_iface->pid) &&
        (local_iface->pid_ns == remote_iface->pid_ns)) {
        return uct_cuda_ipc_ns_addr_refuse("same process", reason_p);
    }

    if (local_iface->pid_ns == remote_iface->pid_ns) {
        /* both handle kinds work here: legacy by pid, fds by pidfd/broker */
        if (!((local_flags & remote_flags) &
              (UCT_CUDA_IPC_NS_ADDR_FLAG_LEGACY |
               UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD))) {
            return uct_cuda_ipc_ns_addr_refuse(
                    "same PID namespace but no common handle type "
                    "(legacy IPC or POSIX fd)", reason_p);
        }
    } else {
        /* legacy IPC handles do not open across PID namespaces; fds need
         * the broker since pidfd_open cannot name the peer */
        if (!(local_flags & UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD)) {
            return uct_cuda_ipc_ns_addr_refuse(
                    "different PID namespace and local side cannot "
                    "exchange POSIX fds", reason_p);
        }
        if (!(remote_flags & UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD)) {
            return uct_cuda_ipc_ns_addr_refuse(
                    "different PID namespace and remote side cannot "
                    "exchange POSIX fds", reason_p);
        }
        if ((local_flags & fd_caps) != fd_caps) {
            return uct_cuda_ipc_ns_addr_refuse(
                    "different PID namespace and local side runs no fd "
                    "broker", reason_p);
        }
        if ((remote_flags & fd_caps) != fd_caps) {
            return uct_cuda_ipc_ns_addr_refuse(
                    "different PID namespace and remote side runs no fd "
                    "broker", reason_p);
        }
    }

    if (reason_p != NULL) {
        *reason_p = "reachable";
    }
    return 1;
}
