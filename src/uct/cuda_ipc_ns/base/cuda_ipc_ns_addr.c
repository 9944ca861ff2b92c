/*
 * cuda_ipc_ns: device and interface address formats and the reachability
 * rule (docs/wire-format.md). Byte-by-byte little-endian, see
 * cuda_ipc_ns_addr.h.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_byteorder.h"

#include <ucs/debug/log.h>
#include <string.h>


/*
 * Both addresses share one layout: [u32 pid] u64 id, u8 flags. The iface
 * address has the pid and the PID namespace as id, the device address no
 * pid and the system id (docs/wire-format.md).
 */
static void uct_cuda_ipc_ns_addr_pack(uint8_t *p, const uint32_t *pid,
                                      uint64_t id, uint8_t flags)
{
    if (pid != NULL) {
        uct_cuda_ipc_ns_put_le32(p, *pid);
        p += 4;
    }
    uct_cuda_ipc_ns_put_le64(p, id);
    p[8] = flags;
}

static ucs_status_t uct_cuda_ipc_ns_addr_parse(const char *what,
                                               const uint8_t *p, size_t length,
                                               uint32_t *pid_p, uint64_t *id_p,
                                               uint8_t *flags_p)
{
    size_t size = (pid_p != NULL) ? UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE :
                                    UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE;

    if (length < size) {
        ucs_debug("cuda_ipc_ns: %s address too short: %zu bytes, need %zu",
                  what, length, size);
        return UCS_ERR_INVALID_PARAM;
    }

    if (pid_p != NULL) {
        *pid_p = uct_cuda_ipc_ns_get_le32(p);
        p     += 4;
    }
    *id_p    = uct_cuda_ipc_ns_get_le64(p);
    *flags_p = p[8];
    return UCS_OK;
}


void uct_cuda_ipc_ns_addr_device_pack(const uct_cuda_ipc_ns_addr_device_t *addr,
                                      void *buffer)
{
    uct_cuda_ipc_ns_addr_pack(buffer, NULL, addr->system_id, addr->flags);
}

ucs_status_t uct_cuda_ipc_ns_addr_device_parse(const void *buffer, size_t length,
                                               uct_cuda_ipc_ns_addr_device_t *addr)
{
    return uct_cuda_ipc_ns_addr_parse("device", buffer, length, NULL,
                                      &addr->system_id, &addr->flags);
}

/* The iface address goes on with the start time, after the shared layout */
#define UCT_CUDA_IPC_NS_IFACE_ADDR_START_TIME_OFFSET  (4 + 8 + 1)

void uct_cuda_ipc_ns_addr_iface_pack(const uct_cuda_ipc_ns_addr_iface_t *addr,
                                     void *buffer)
{
    uct_cuda_ipc_ns_addr_pack(buffer, &addr->pid, addr->pid_ns, addr->flags);
    uct_cuda_ipc_ns_put_le64((uint8_t*)buffer +
                             UCT_CUDA_IPC_NS_IFACE_ADDR_START_TIME_OFFSET,
                             addr->start_time);
}

ucs_status_t uct_cuda_ipc_ns_addr_iface_parse(const void *buffer, size_t length,
                                              uct_cuda_ipc_ns_addr_iface_t *addr)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_addr_parse("iface", buffer, length, &addr->pid,
                                        &addr->pid_ns, &addr->flags);
    if (status == UCS_OK) {
        addr->start_time = uct_cuda_ipc_ns_get_le64(
                (const uint8_t*)buffer +
                UCT_CUDA_IPC_NS_IFACE_ADDR_START_TIME_OFFSET);
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_addr_parse_remote(const void *dev_buffer,
                                               const void *iface_buffer,
                                               uct_cuda_ipc_ns_addr_device_t *dev,
                                               uct_cuda_ipc_ns_addr_iface_t *iface)
{
    ucs_status_t status;

    if ((dev_buffer == NULL) || (iface_buffer == NULL)) {
        ucs_debug("cuda_ipc_ns: a peer's device or iface address is missing");
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_cuda_ipc_ns_addr_device_parse(dev_buffer,
                                               UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE,
                                               dev);
    if (status != UCS_OK) {
        return status;
    }

    return uct_cuda_ipc_ns_addr_iface_parse(iface_buffer,
                                            UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE,
                                            iface);
}


/* @return @a reachable, after telling why through @a reason_p (may be NULL) */
static int uct_cuda_ipc_ns_addr_answer(int reachable, const char *reason,
                                       const char **reason_p)
{
    if (reason_p != NULL) {
        *reason_p = reason;
    }
    return reachable;
}

int uct_cuda_ipc_ns_addr_is_reachable(const uct_cuda_ipc_ns_addr_device_t *local_dev,
                                      const uct_cuda_ipc_ns_addr_iface_t *local_iface,
                                      const uct_cuda_ipc_ns_addr_device_t *remote_dev,
                                      const uct_cuda_ipc_ns_addr_iface_t *remote_iface,
                                      const char **reason_p)
{
    const uint8_t fd_caps = UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD |
                            UCT_CUDA_IPC_NS_ADDR_FLAG_BROKER;
    uint8_t local_flags, remote_flags;

    /* both addresses carry capabilities; a side may set them in either */
    local_flags  = local_dev->flags | local_iface->flags;
    remote_flags = remote_dev->flags | remote_iface->flags;

    if (local_dev->system_id != remote_dev->system_id) {
        return uct_cuda_ipc_ns_addr_answer(0, "different system", reason_p);
    }

    /* a pid alone is ambiguous across PID namespaces */
    if ((local_iface->pid == remote_iface->pid) &&
        (local_iface->pid_ns == remote_iface->pid_ns)) {
        return uct_cuda_ipc_ns_addr_answer(0, "same process", reason_p);
    }

    if (local_iface->pid_ns == remote_iface->pid_ns) {
        /* both handle kinds work here: legacy by pid, fds by pidfd/broker */
        if (!((local_flags & remote_flags) &
              (UCT_CUDA_IPC_NS_ADDR_FLAG_LEGACY |
               UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD))) {
            return uct_cuda_ipc_ns_addr_answer(0,
                    "same PID namespace but no common handle type "
                    "(legacy IPC or POSIX fd)", reason_p);
        }
    } else {
        /* legacy IPC handles do not open across PID namespaces; fds need
         * the broker since pidfd_open cannot name the peer */
        if (!(local_flags & UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD)) {
            return uct_cuda_ipc_ns_addr_answer(0,
                    "different PID namespace and local side cannot "
                    "exchange POSIX fds", reason_p);
        }
        if (!(remote_flags & UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD)) {
            return uct_cuda_ipc_ns_addr_answer(0,
                    "different PID namespace and remote side cannot "
                    "exchange POSIX fds", reason_p);
        }
        if ((local_flags & fd_caps) != fd_caps) {
            return uct_cuda_ipc_ns_addr_answer(0,
                    "different PID namespace and local side runs no fd "
                    "broker", reason_p);
        }
        if ((remote_flags & fd_caps) != fd_caps) {
            return uct_cuda_ipc_ns_addr_answer(0,
                    "different PID namespace and remote side runs no fd "
                    "broker", reason_p);
        }
    }

    return uct_cuda_ipc_ns_addr_answer(1, "reachable", reason_p);
}


int uct_cuda_ipc_ns_addr_is_self(const uct_cuda_ipc_ns_addr_device_t *local_dev,
                                 const uct_cuda_ipc_ns_addr_iface_t *local_iface,
                                 const uct_cuda_ipc_ns_addr_device_t *remote_dev,
                                 const uct_cuda_ipc_ns_addr_iface_t *remote_iface,
                                 const char **reason_p)
{
    if ((local_dev->system_id != remote_dev->system_id) ||
        (local_iface->pid_ns != remote_iface->pid_ns) ||
        (local_iface->pid != remote_iface->pid)) {
        return uct_cuda_ipc_ns_addr_answer(0, "not this process", reason_p);
    }

    return uct_cuda_ipc_ns_addr_answer(1, "this process", reason_p);
}
