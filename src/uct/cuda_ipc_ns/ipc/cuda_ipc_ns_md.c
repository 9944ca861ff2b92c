/*
 * cuda_ipc_ns: the component and memory domain cuda_ipc_ns — registration
 * and export of CUDA memory, remote key unpack. Driver loading and mem_query
 * come from the shared layer (cuda_ipc_ns_md_base.h, cuda_ipc_ns_ptr.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_md_base.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_gpus.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_ptr.h"
#include "cuda_ipc_ns_compat.h"
#include "cuda_ipc_ns_legacy_direct.h"
#include "cuda_ipc_ns_owner_set.h"

#include <uct/base/uct_iface.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>
#include <inttypes.h>
#include <pthread.h>


ucs_config_field_t uct_cuda_ipc_ns_md_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"LEGACY", "y",
     "Export memory allocated with cuMemAlloc as legacy CUDA IPC handles.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, legacy),
     UCS_CONFIG_TYPE_BOOL},

    {"POSIX_FD", "y",
     "Export CUDA VMM allocations (cuMemCreate) as POSIX file descriptors.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, posix_fd),
     UCS_CONFIG_TYPE_BOOL},

    {"OWNER_COPY", "y",
     "Register memory allocated with cuMemAlloc with the fd broker too, so\n"
     "that peers in other PID namespaces that cannot open its legacy IPC\n"
     "handle (LEGACY_DIRECT) ask this process to copy to and from it, and VMM memory\n"
     "without a shareable handle type, which no peer can map, for every\n"
     "peer (docs/owner-copies.md). With n, UCP moves such memory without\n"
     "cu_ipc_ns (over the network, staged through the driver).",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, owner_copy),
     UCS_CONFIG_TYPE_BOOL},

    {"LEGACY_DIRECT", "auto",
     "How a legacy key (cuMemAlloc memory) of a peer in another PID namespace\n"
     "is accessed:\n"
     " auto - opened here (cuIpcOpenMemHandle, one copy by our copy engine)\n"
     "        unless the driver would refuse it: the owner's pid number is ours\n"
     "        (the driver takes us for the exporter), its GPU is not one we can\n"
     "        use, or an open of that owner's memory failed before; then, and\n"
     "        when the open fails, copies its owner makes (OWNER_COPY at the\n"
     "        owner), logged once per owner\n"
     " y    - always opened here; a failed open is an error\n"
     " n    - always copies its owner makes",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, legacy_direct),
     UCS_CONFIG_TYPE_TERNARY_AUTO},

    {"FD_EXCHANGE", "auto",
     "How a peer's POSIX fd is imported:\n"
     " auto   - pidfd_getfd when the owner is in our PID namespace and the\n"
     "          kernel allows it (probed once), the owner's broker otherwise\n"
     " pidfd  - pidfd_getfd only; peers in other PID namespaces are unreachable\n"
     " broker - the owner's fd broker only (SCM_RIGHTS over a Unix socket)",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, fdx_mode),
     UCS_CONFIG_TYPE_ENUM(uct_cuda_ipc_ns_fdx_mode_names)},

    {"SOCK_DIR", "",
     "Directory of the fd broker's socket. Empty: an abstract socket with a\n"
     "random name, reachable from the same network namespace only. Set it to\n"
     "a volume shared by peers in different network namespaces; it is created\n"
     "with mode 0700 and refused if others can access it.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, sock_dir),
     UCS_CONFIG_TYPE_STRING},

    {"SOCK_TIMEOUT", "5s",
     "Timeout of an fd import through a broker, from connect to the fd, and\n"
     "of the first use of a peer's allocation that needs it: a dead or silent\n"
     "broker fails the import after this time.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, sock_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"SOCK_REQ_TIMEOUT", "500ms",
     "Time our fd broker gives a client between its connect and its request;\n"
     "a client that sends nothing by then is disconnected, so idle\n"
     "connections cannot hold the broker. Keep it well under SOCK_TIMEOUT.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, sock_req_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"ALLOWED_UID", "-1",
     "A uid, besides our own effective uid, whose processes the fd broker\n"
     "serves; -1: none.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, allowed_uid),
     UCS_CONFIG_TYPE_INT},

    {"USERNS_PEERS", "n",
     "Also serve, and import from, a peer whose uid our user namespace does\n"
     "not map (SO_PEERCRED shows it as the overflow uid 65534): the other pod\n"
     "when both run in user namespaces (Kubernetes hostUsers: false). The\n"
     "token in the key and the socket volume's permissions then decide who\n"
     "gets an fd: see docs/security.md before setting it. No effect outside\n"
     "a user namespace.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, userns_peers),
     UCS_CONFIG_TYPE_BOOL},

    {"CACHE", "y",
     "Keep peers' allocations mapped after their last copy completed, for\n"
     "the next copy (process-wide cache, limited as below). n: unmap when\n"
     "the last copy using a mapping completes.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, cache_enable),
     UCS_CONFIG_TYPE_BOOL},

    {"CACHE_MAX_REGIONS", "65536",
     "Maximal number of mapped peer allocations; least recently used ones\n"
     "not in use by a copy are unmapped beyond it. inf: no limit.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, cache_max_regions),
     UCS_CONFIG_TYPE_UINT},

    {"CACHE_MAX_SIZE", "inf",
     "Maximal number of bytes of mapped peer allocations; least recently\n"
     "used ones not in use by a copy are unmapped beyond it.",
     ucs_offsetof(uct_cuda_ipc_ns_md_config_t, cache_max_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {NULL}
};


/* Nonzero when some device can export and import VMM memory as POSIX fds */
static int uct_cuda_ipc_ns_md_posix_fd_supported(void)
{
    int count = 0, vmm, posix_fd, i;
    CUdevice device;

    if (UCT_CUDA_IPC_NS_CU(cuDeviceGetCount, &count) != UCS_OK) {
        return 0;
    }

    for (i = 0; i < count; ++i) {
        if ((UCT_CUDA_IPC_NS_CU(cuDeviceGet, &device, i) == UCS_OK) &&
            (UCT_CUDA_IPC_NS_CU(cuDeviceGetAttribute, &vmm,
                 CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                 device) == UCS_OK) &&
            (UCT_CUDA_IPC_NS_CU(cuDeviceGetAttribute, &posix_fd,
                 CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                 device) == UCS_OK) &&
            vmm && posix_fd) {
            return 1;
        }
    }

    return 0;
}


static void uct_cuda_ipc_ns_md_close(uct_md_h uct_md)
{
    uct_cuda_ipc_ns_md_t *md = ucs_derived_of(uct_md, uct_cuda_ipc_ns_md_t);

    uct_cuda_ipc_ns_cache_put();
    if (md->broker != NULL) {
        uct_cuda_ipc_ns_broker_put(md->broker);
    }
    ucs_free(md->sock_dir);
    ucs_free(md);
}


static ucs_status_t uct_cuda_ipc_ns_md_query(uct_md_h md,
                                             uct_cuda_ipc_ns_compat_md_attr_t *md_attr)
{
    uct_cuda_ipc_ns_compat_md_caps_t caps = {
        /* mem_dereg with UCT_MD_MEM_DEREG_FLAG_INVALIDATE revokes the
         * registration for new imports and completes at once
         * (docs/security.md, "Invalidation"); UCP's peer error mode wants
         * it on rendezvous lanes */
        .flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY |
                            UCT_CUDA_IPC_NS_MD_FLAG_INVALIDATE,
        .reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        /* UCX 1.13.1 resolves RMA rkeys as host memory and skips a lane
         * whose MD lists HOST in neither reg nor alloc types (docs/ucp.md);
         * without UCT_MD_FLAG_ALLOC nothing is ever allocated through us */
        .alloc_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST),
        .access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        /* UCP classifies buffers through the copy MD (cuda_cpy_ns) */
        .detect_mem_types = 0,
        .max_alloc        = 0,
        /* UCX 1.22's registration cache may keep our registrations
         * (docs/ucx-versions.md: stale ones are re-exported at pack) */
        .cache_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_CUDA),
        .rkey_packed_size = UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE
    };

    uct_cuda_ipc_ns_compat_md_attr_set(md_attr, &caps);
    return UCS_OK;
}


static ucs_status_t
uct_cuda_ipc_ns_memh_export_legacy(uct_cuda_ipc_ns_md_memh_t *memh,
                                   const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                   ucs_log_level_t log_level)
{
    CUipcMemHandle handle;
    ucs_status_t status;

    UCS_STATIC_ASSERT(sizeof(handle) == UCT_CUDA_IPC_NS_HANDLE_SIZE);
    status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuIpcGetMemHandle, &handle,
                                     attr->base);
    if (status != UCS_OK) {
        return status;
    }

    memh->info.handle_type = UCT_CUDA_IPC_NS_HANDLE_LEGACY;
    memcpy(memh->info.handle.legacy, &handle, sizeof(handle));
    return UCS_OK;
}


/*
 * Register the allocation of @a attr with our broker as a range it copies to
 * and from for peers that cannot map it (a legacy handle from another PID
 * namespace, VMM memory without a shareable handle type anywhere:
 * docs/owner-copies.md); its registration id is the allocation's base,
 * which the key carries. The key gets the token and the broker's address
 * (extension version 2 of a legacy key, or a copy key).
 */
static ucs_status_t
uct_cuda_ipc_ns_memh_register_range(uct_cuda_ipc_ns_md_t *md,
                                    uct_cuda_ipc_ns_md_memh_t *memh,
                                    const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                    ucs_log_level_t log_level)
{
    const char *addr;
    ucs_status_t status;
    uint8_t len;

    memh->info.has_ext = 1;
    status = uct_cuda_ipc_ns_broker_register_range(md->broker, attr->base,
                                                   attr->base, attr->size,
                                                   attr->context, attr->device,
                                                   memh->info.token,
                                                   &memh->reg);
    if (status != UCS_OK) {
        ucs_log(log_level, "cuda_ipc_ns: cannot register %s allocation "
                "0x%llx (%zu bytes) with the fd broker for owner copies: %s",
                (memh->info.handle_type == UCT_CUDA_IPC_NS_HANDLE_COPY) ?
                "VMM (no shareable handle type)" : "legacy",
                (unsigned long long)attr->base, attr->size,
                ucs_status_string(status));
        return status;
    }

    addr = uct_cuda_ipc_ns_broker_addr(md->broker, &len);
    memcpy(memh->info.broker_addr, addr, len);
    memh->info.broker_addr_len = len;
    memh->info.ext_version     = UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY;
    return UCS_OK;
}


/* Hand the exported fd to our broker, which peers in other PID namespaces
 * (or denied pidfd_getfd) ask for it with the token */
static ucs_status_t
uct_cuda_ipc_ns_memh_broker_register(uct_cuda_ipc_ns_md_t *md,
                                     uct_cuda_ipc_ns_md_memh_t *memh,
                                     uint64_t alloc_id)
{
    uint8_t len;
    const char *addr;
    ucs_status_t status;

    if (md->broker == NULL) {
        return UCS_OK; /* FD_EXCHANGE=pidfd: same PID namespace only */
    }

    status = uct_cuda_ipc_ns_broker_register(md->broker, memh->fd, alloc_id,
                                             memh->info.token, &memh->reg);
    if (status != UCS_OK) {
        return status;
    }

    addr = uct_cuda_ipc_ns_broker_addr(md->broker, &len);
    memcpy(memh->info.broker_addr, addr, len);
    memh->info.broker_addr_len = len;
    return UCS_OK;
}


static ucs_status_t
uct_cuda_ipc_ns_memh_export_posix_fd(uct_cuda_ipc_ns_md_t *md,
                                     uct_cuda_ipc_ns_md_memh_t *memh,
                                     const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                     ucs_log_level_t log_level)
{
    ucs_status_t status;
    int fd = -1;

    status = uct_cuda_ipc_ns_ptr_export_fd(attr->base, log_level, &fd);
    if (status != UCS_OK) {
        return status;
    }

    memh->fd                         = fd;
    memh->info.handle_type           = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    memh->info.handle.posix.fd       = fd;
    memh->info.handle.posix.alloc_id = attr->alloc_id;

    status = uct_cuda_ipc_ns_memh_broker_register(md, memh, attr->alloc_id);
    if (status != UCS_OK) {
        ucs_log(log_level, "cuda_ipc_ns: cannot register fd %d of allocation "
                "0x%llx with the fd broker: %s", fd,
                (unsigned long long)attr->base, ucs_status_string(status));
        close(fd);
        memh->fd = -1;
    }
    return status;
}


/*
 * Memory of a stream-ordered pool of the POSIX-fd handle type: the key names
 * its allocation (base and length as cuMemGetAddressRange answers), carries
 * its export data, and the pool's fd, which a peer takes by pidfd_getfd or
 * from our broker (registered under the allocation's base). UCS_ERR_UNSUPPORTED:
 * the pool exports nothing (docs/driver-contract.md); then only we can copy
 * the memory.
 */
static ucs_status_t
uct_cuda_ipc_ns_memh_export_pool(uct_cuda_ipc_ns_md_t *md,
                                 uct_cuda_ipc_ns_md_memh_t *memh,
                                 const void *address,
                                 const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                 ucs_log_level_t log_level)
{
    uct_cuda_ipc_ns_ptr_pool_export_t exp;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_ptr_export_pool(address, attr, log_level, &exp);
    if (status != UCS_OK) {
        return status;
    }

    UCS_STATIC_ASSERT(sizeof(exp.data) == UCT_CUDA_IPC_NS_HANDLE_SIZE);
    memh->fd               = exp.fd;
    memh->info.handle_type = UCT_CUDA_IPC_NS_HANDLE_POOL;
    memh->info.pool_fd     = exp.fd;
    memh->info.base        = exp.base;
    memh->info.length      = exp.size;
    memh->info.has_ext     = 1;
    memcpy(memh->info.handle.bytes, &exp.data, sizeof(exp.data));

    status = uct_cuda_ipc_ns_memh_broker_register(md, memh, exp.base);
    if (status != UCS_OK) {
        ucs_log(log_level, "cuda_ipc_ns: cannot register the pool fd %d of "
                "allocation 0x%llx with the fd broker: %s", exp.fd,
                (unsigned long long)exp.base, ucs_status_string(status));
        close(exp.fd);
        memh->fd = -1;
    }
    return status;
}


/* Whether the allocation of @a attr is exported as a POSIX fd by us */
static int uct_cuda_ipc_ns_md_exports_fd(const uct_cuda_ipc_ns_md_t *md,
                                         const uct_cuda_ipc_ns_ptr_attr_t *attr)
{
    return !(attr->legacy_capable && md->legacy) &&
           (attr->memory_type == CU_MEMORYTYPE_DEVICE) &&
           (attr->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
           md->posix_fd;
}


/*
 * The VMM allocations mapped back to back from @a first (the one holding the
 * registered address) up to @a end, as a framework's pool maps them
 * (docs/framework-memory.md): each one on the same device, exportable as a
 * POSIX fd. The walk stops at the first address that is not: the
 * registration covers the mapped extent, and a peer's access beyond it
 * fails the range check against the key.
 *
 * @return UCS_OK with *chunks_p (the caller frees it) and *count_p >= 1.
 */
static ucs_status_t
uct_cuda_ipc_ns_md_walk_chunks(const uct_cuda_ipc_ns_md_t *md,
                               const uct_cuda_ipc_ns_ptr_attr_t *first,
                               uintptr_t end, ucs_log_level_t log_level,
                               uct_cuda_ipc_ns_broker_proto_chunk_t **chunks_p,
                               uint32_t *count_p)
{
    uct_cuda_ipc_ns_broker_proto_chunk_t *chunks = NULL, *grown;
    uint32_t count = 0, max = 0;
    uct_cuda_ipc_ns_ptr_attr_t attr = *first;
    uintptr_t next = first->base;

    for (;;) {
        if (count == max) {
            max   = ucs_max(16, max * 2);
            grown = ucs_realloc(chunks, sizeof(*chunks) * max,
                                "cuda_ipc_ns_chunks");
            if (grown == NULL) {
                ucs_log(log_level, "cuda_ipc_ns: failed to allocate the "
                        "layout of %u chunks", max);
                ucs_free(chunks);
                return UCS_ERR_NO_MEMORY;
            }
            chunks = grown;
        }

        chunks[count].offset   = next - first->base;
        chunks[count].size     = attr.size;
        chunks[count].alloc_id = attr.alloc_id;
        ++count;
        next += attr.size;

        if ((next >= end) || (count == UCT_CUDA_IPC_NS_MAX_CHUNKS)) {
            break;
        }
        if ((uct_cuda_ipc_ns_ptr_attr_get((void*)next, &attr) != UCS_OK) ||
            (attr.base != next) || (attr.size == 0) ||
            (attr.device != first->device) || (attr.alloc_id == 0) ||
            !uct_cuda_ipc_ns_md_exports_fd(md, &attr)) {
            ucs_debug("cuda_ipc_ns: 0x%lx..0x%lx: no exportable VMM allocation "
                      "of device %d mapped at 0x%lx: registering the %u "
                      "allocations before it", (unsigned long)first->base,
                      (unsigned long)end, first->device, (unsigned long)next,
                      count);
            break;
        }
    }

    if (next < end) {
        ucs_debug("cuda_ipc_ns: registration 0x%lx..0x%lx covers 0x%lx..0x%lx "
                  "(%u allocations)", (unsigned long)first->base,
                  (unsigned long)end, (unsigned long)first->base,
                  (unsigned long)next, count);
    }
    *chunks_p = chunks;
    *count_p  = count;
    return UCS_OK;
}


/*
 * Register a range of several VMM allocations with our broker: no fd is
 * exported now, the broker exports each chunk when a peer asks for it
 * (docs/framework-memory.md).
 */
static ucs_status_t
uct_cuda_ipc_ns_memh_export_chunks(uct_cuda_ipc_ns_md_t *md,
                                   uct_cuda_ipc_ns_md_memh_t *memh,
                                   const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                   const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                   uint32_t count)
{
    const char *addr;
    ucs_status_t status;
    uint8_t len;

    status = uct_cuda_ipc_ns_broker_register_chunks(md->broker, attr->alloc_id,
                                                    attr->base, chunks, count,
                                                    memh->info.token,
                                                    &memh->reg);
    if (status != UCS_OK) {
        return status;
    }

    memh->info.handle_type             = UCT_CUDA_IPC_NS_HANDLE_CHUNKS;
    memh->info.handle.posix.fd         = -1;
    memh->info.handle.posix.reg_id     = attr->alloc_id;
    memh->info.handle.posix.alloc_id   = attr->alloc_id;
    memh->info.handle.posix.num_chunks = count;
    memh->info.length                  = chunks[count - 1].offset +
                                         chunks[count - 1].size;
    addr = uct_cuda_ipc_ns_broker_addr(md->broker, &len);
    memcpy(memh->info.broker_addr, addr, len);
    memh->info.broker_addr_len = len;
    return UCS_OK;
}


static ucs_status_t uct_cuda_ipc_ns_memh_set_uuid(uct_cuda_ipc_ns_md_memh_t *memh,
                                                  int device,
                                                  ucs_log_level_t log_level)
{
    CUdevice cu_device;
    CUuuid uuid;
    ucs_status_t status;

    status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuDeviceGet, &cu_device, device);
    if (status != UCS_OK) {
        return status;
    }

    status = UCT_CUDA_IPC_NS_CU_CALL(log_level, cuDeviceGetUuid, &uuid,
                                     cu_device);
    if (status != UCS_OK) {
        return status;
    }

    UCS_STATIC_ASSERT(sizeof(uuid) == UCT_CUDA_IPC_NS_UUID_SIZE);
    memcpy(memh->info.dev_uuid, &uuid, sizeof(uuid));
    return UCS_OK;
}


/* Whether our broker copies memory for peers that cannot map it */
static int uct_cuda_ipc_ns_md_copies(const uct_cuda_ipc_ns_md_t *md)
{
    return md->owner_copy && (md->broker != NULL);
}


/*
 * How the allocation of @a attr (@a num_chunks allocations from it) is
 * offered to peers: a uct_cuda_ipc_ns_rkey_handle_type_t, or 0 when it cannot be
 * with this configuration. Memory of a pool is a pool key when the pool
 * exports (found out by exporting it), else a copy key.
 */
static unsigned
uct_cuda_ipc_ns_md_export_kind(const uct_cuda_ipc_ns_md_t *md,
                               const uct_cuda_ipc_ns_ptr_attr_t *attr,
                               uint32_t num_chunks)
{
    int posix_fd = !!(attr->handle_types &
                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

    if ((attr->pool != NULL) && md->posix_fd) {
        return UCT_CUDA_IPC_NS_HANDLE_POOL;
    } else if (num_chunks > 1) {
        return UCT_CUDA_IPC_NS_HANDLE_CHUNKS;
    } else if (attr->legacy_capable && md->legacy) {
        return UCT_CUDA_IPC_NS_HANDLE_LEGACY;
    } else if (posix_fd && md->posix_fd) {
        return UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    } else if (!attr->legacy_capable && !posix_fd &&
               uct_cuda_ipc_ns_md_copies(md)) {
        /* VMM memory without a shareable handle type, memory of a pool
         * that exports nothing: only we can copy it */
        return UCT_CUDA_IPC_NS_HANDLE_COPY;
    }
    return 0;
}


/* Why the allocation of @a attr cannot be offered to peers */
static void uct_cuda_ipc_ns_md_log_refusal(const void *address,
                                           const uct_cuda_ipc_ns_ptr_attr_t *attr,
                                           ucs_log_level_t log_level)
{
    ucs_log(log_level, "cuda_ipc_ns: cannot register %p (allocation 0x%llx, "
            "%zu bytes): %s", address, (unsigned long long)attr->base,
            attr->size,
            attr->legacy_capable ? "legacy IPC export is disabled" :
            (attr->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ?
            "POSIX fd export is disabled" :
            "VMM allocation not created with POSIX fd handle type (or "
            "memory of a stream-ordered pool without it), and owner copies "
            "are off (UCX_CUDA_IPC_NS_OWNER_COPY=n, or no broker)");
}


/* Export the allocation of @a attr as the key of @a memh says peers get it */
static ucs_status_t
uct_cuda_ipc_ns_memh_export(uct_cuda_ipc_ns_md_t *md,
                            uct_cuda_ipc_ns_md_memh_t *memh, const void *address,
                            const uct_cuda_ipc_ns_ptr_attr_t *attr,
                            const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                            uint32_t num_chunks, ucs_log_level_t log_level)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    ucs_status_t status;

    switch (uct_cuda_ipc_ns_md_export_kind(md, attr, num_chunks)) {
    case UCT_CUDA_IPC_NS_HANDLE_POOL:
        status = uct_cuda_ipc_ns_memh_export_pool(md, memh, address, attr,
                                                  log_level);
        if (status != UCS_ERR_UNSUPPORTED) {
            return status;
        } else if (!uct_cuda_ipc_ns_md_copies(md)) {
            break;
        }
        /* the pool exports nothing: a copy key */
        /* fall through */
    case UCT_CUDA_IPC_NS_HANDLE_COPY:
        memh->info.handle_type = UCT_CUDA_IPC_NS_HANDLE_COPY;
        return uct_cuda_ipc_ns_memh_register_range(md, memh, attr, log_level);
    case UCT_CUDA_IPC_NS_HANDLE_CHUNKS:
        memh->info.has_ext = 1;
        status = uct_cuda_ipc_ns_memh_export_chunks(md, memh, attr, chunks,
                                                    num_chunks);
        if (status != UCS_OK) {
            ucs_log(log_level, "cuda_ipc_ns: cannot register %u allocations "
                    "from 0x%llx with the fd broker: %s", num_chunks,
                    (unsigned long long)attr->base, ucs_status_string(status));
        }
        return status;
    case UCT_CUDA_IPC_NS_HANDLE_LEGACY:
        status = uct_cuda_ipc_ns_memh_export_legacy(memh, attr, log_level);
        /* the base key alone describes a legacy handle of the default ns */
        memh->info.has_ext = (self->pid_ns != UCT_CUDA_IPC_NS_INIT_PID_NS);
        if ((status == UCS_OK) && uct_cuda_ipc_ns_md_copies(md)) {
            status = uct_cuda_ipc_ns_memh_register_range(md, memh, attr,
                                                         log_level);
        }
        return status;
    case UCT_CUDA_IPC_NS_HANDLE_POSIX_FD:
        memh->info.has_ext = 1;
        return uct_cuda_ipc_ns_memh_export_posix_fd(md, memh, attr, log_level);
    }

    uct_cuda_ipc_ns_md_log_refusal(address, attr, log_level);
    return UCS_ERR_UNSUPPORTED;
}


/*
 * What a registration of @a address..+@a length covers, in @a attr: memory of
 * a stream-ordered pool the registered bytes only, a range spanning the
 * allocations a pool mapped after an exportable one those allocations
 * (@a chunks_p, @a num_chunks_p), else the whole allocation of @a address.
 */
static ucs_status_t
uct_cuda_ipc_ns_md_reg_extent(uct_cuda_ipc_ns_md_t *md, void *address,
                              size_t length, ucs_log_level_t log_level,
                              uct_cuda_ipc_ns_ptr_attr_t *attr,
                              uct_cuda_ipc_ns_broker_proto_chunk_t **chunks_p,
                              uint32_t *num_chunks_p)
{
    ucs_status_t status;

    /* memory of a stream-ordered pool: cuMemRetainAllocationHandle refuses
     * it and its mapping is the pool's, which may hold other allocations
     * (docs/driver-contract.md): the key covers the registered bytes only,
     * unless the pool exports the allocation (the key then names it) */
    if (attr->pool != NULL) {
        attr->size = ucs_min((uintptr_t)address + length,
                             attr->base + attr->size) - (uintptr_t)address;
        attr->base = (uintptr_t)address;
    }

    /* a range past the end of an exportable VMM allocation may span the
     * allocations a pool mapped after it: they are registered together when
     * our broker can export them (docs/framework-memory.md) */
    if (((uintptr_t)address + length > attr->base + attr->size) &&
        uct_cuda_ipc_ns_md_exports_fd(md, attr) && (md->broker != NULL)) {
        status = uct_cuda_ipc_ns_md_walk_chunks(md, attr,
                                                (uintptr_t)address + length,
                                                log_level, chunks_p,
                                                num_chunks_p);
        if (status != UCS_OK) {
            return status;
        }
    }

    /* otherwise the key describes the whole allocation of @a address; a
     * range that runs past its end (UCP's registration cache aligns ranges)
     * is registered as what the allocation covers: a peer's access beyond
     * it fails the range check against the key (docs/architecture.md) */
    if ((*num_chunks_p == 1) &&
        ((uintptr_t)address + length > attr->base + attr->size)) {
        ucs_debug("cuda_ipc_ns: %p..%p runs past the end of allocation "
                  "0x%llx..0x%llx: registering the allocation", address,
                  UCS_PTR_BYTE_OFFSET(address, length),
                  (unsigned long long)attr->base,
                  (unsigned long long)(attr->base + attr->size));
    }
    return UCS_OK;
}


/* A memory handle for the allocation of @a attr: our identity, its range */
static uct_cuda_ipc_ns_md_memh_t *
uct_cuda_ipc_ns_md_memh_new(const uct_cuda_ipc_ns_ptr_attr_t *attr,
                            ucs_log_level_t log_level)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    uct_cuda_ipc_ns_md_memh_t *memh;

    memh = ucs_calloc(1, sizeof(*memh), "cuda_ipc_ns_memh");
    if (memh == NULL) {
        ucs_log(log_level, "cuda_ipc_ns: failed to allocate memory handle");
        return NULL;
    }

    memh->fd               = -1;
    memh->info.pid         = self->pid;
    memh->info.base        = attr->base;
    memh->info.length      = attr->size;
    memh->info.pid_ns      = self->pid_ns;
    memh->info.start_time  = self->start_time;
    memh->info.ext_version = UCT_CUDA_IPC_NS_RKEY_EXT_VERSION;
    return memh;
}


/* Register @a address..+@a length: the key of *memh_p covers at least the
 * allocation of @a address (uct_cuda_ipc_ns_md_reg_extent) */
static ucs_status_t
uct_cuda_ipc_ns_md_reg(uct_cuda_ipc_ns_md_t *md, void *address, size_t length,
                       ucs_log_level_t log_level,
                       uct_cuda_ipc_ns_md_memh_t **memh_p)
{
    uct_cuda_ipc_ns_broker_proto_chunk_t *chunks = NULL;
    uint32_t num_chunks             = 1;
    uct_cuda_ipc_ns_ptr_attr_t attr;
    uct_cuda_ipc_ns_md_memh_t *memh;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_ptr_attr_get(address, &attr);
    if (status != UCS_OK) {
        ucs_log(log_level, "cuda_ipc_ns: cannot register %p..%p: not CUDA "
                "device memory", address, UCS_PTR_BYTE_OFFSET(address, length));
        return UCS_ERR_UNSUPPORTED;
    }

    status = uct_cuda_ipc_ns_md_reg_extent(md, address, length, log_level,
                                           &attr, &chunks, &num_chunks);
    if (status != UCS_OK) {
        return status;
    }

    memh = uct_cuda_ipc_ns_md_memh_new(&attr, log_level);
    if (memh == NULL) {
        ucs_free(chunks);
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_ipc_ns_memh_set_uuid(memh, attr.device, log_level);
    if (status != UCS_OK) {
        goto err_free;
    }

    status = uct_cuda_ipc_ns_memh_export(md, memh, address, &attr, chunks,
                                         num_chunks, log_level);
    if (status != UCS_OK) {
        goto err_free;
    }

    ucs_trace("cuda_ipc_ns: registered %p..%p allocation 0x%llx/%" PRIu64
              " type %d (%u allocations)", address,
              UCS_PTR_BYTE_OFFSET(address, length),
              (unsigned long long)attr.base, memh->info.length,
              memh->info.handle_type, num_chunks);
    ucs_free(chunks);
    *memh_p = memh;
    return UCS_OK;

err_free:
    ucs_free(chunks);
    ucs_free(memh);
    return status;
}


static ucs_status_t
uct_cuda_ipc_ns_mem_reg(uct_md_h uct_md, void *address, size_t length,
                        uct_cuda_ipc_ns_compat_mem_reg_arg_t reg_arg, uct_mem_h *memh_p)
{
    unsigned flags = uct_cuda_ipc_ns_compat_mem_reg_flags(reg_arg);

    return uct_cuda_ipc_ns_md_reg(ucs_derived_of(uct_md, uct_cuda_ipc_ns_md_t),
                                  address, length,
                                  (flags & UCT_MD_MEM_FLAG_HIDE_ERRORS) ?
                                  UCS_LOG_LEVEL_DEBUG : UCS_LOG_LEVEL_ERROR,
                                  (uct_cuda_ipc_ns_md_memh_t**)memh_p);
}


/* Withdraw the export of @a memh and of the wider registrations it holds:
 * the broker registrations, then the fds, the wider ones freed */
static void uct_cuda_ipc_ns_md_memh_release(uct_cuda_ipc_ns_md_t *md,
                                            uct_cuda_ipc_ns_md_memh_t *memh)
{
    uct_cuda_ipc_ns_md_memh_t *wider;

    while (memh->wider != NULL) {
        wider        = memh->wider;
        memh->wider  = wider->wider;
        wider->wider = NULL; /* a link of our list, none of its own */
        uct_cuda_ipc_ns_md_memh_release(md, wider);
        ucs_free(wider);
    }

    /* the broker must never hand out the fd once we close it */
    if (memh->reg != NULL) {
        uct_cuda_ipc_ns_broker_unregister(md->broker, memh->reg);
        memh->reg = NULL;
    }
    if (memh->fd >= 0) {
        close(memh->fd);
        memh->fd = -1;
    }
}


static ucs_status_t
uct_cuda_ipc_ns_mem_dereg(uct_md_h uct_md,
                          const uct_md_mem_dereg_params_t *params)
{
    uct_cuda_ipc_ns_md_t *md = ucs_derived_of(uct_md, uct_cuda_ipc_ns_md_t);
    uct_cuda_ipc_ns_md_memh_t *memh;
    uct_completion_t *comp;
    unsigned flags;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 1);

    memh  = params->memh;
    flags = UCT_MD_MEM_DEREG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0);
    comp  = UCT_MD_MEM_DEREG_FIELD_VALUE(params, comp, FIELD_COMPLETION, NULL);
    if ((flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) && (comp == NULL)) {
        ucs_error("cuda_ipc_ns: invalidating memh %p needs a completion", memh);
        return UCS_ERR_INVALID_PARAM;
    }

    uct_cuda_ipc_ns_md_memh_release(md, memh);

    if (flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) {
        /* revoked for new imports now: nothing is left to wait for. UCX 1.13.1
         * counts this completion, 1.22 requires it before we return */
        ucs_debug("cuda_ipc_ns: invalidated registration of allocation "
                  "0x%" PRIx64 " (handle type %d)", memh->info.base,
                  memh->info.handle_type);
        uct_invoke_completion(comp, UCS_OK);
    }
    ucs_free(memh);
    return UCS_OK;
}


/* Whether the key of @a memh covers @a address..+@a length */
static int uct_cuda_ipc_ns_md_memh_covers(const uct_cuda_ipc_ns_md_memh_t *memh,
                                          uintptr_t address, size_t length)
{
    return (address >= memh->info.base) &&
           (address - memh->info.base <= memh->info.length) &&
           (length <= memh->info.base + memh->info.length - address);
}


/*
 * The registration whose key covers @a address..+@a length, a range past the
 * end of the VMM memory @a memh registered that UCP packs its key for: one of
 * the wider registrations of @a memh, made now when none covers the range
 * (its chunks, docs/framework-memory.md). UCP's registration cache registers
 * the allocation its memory detection reports, which for UCX's cuda_copy is
 * one chunk (cuMemGetAddressRange), and sends a buffer across the chunks
 * mapped after it under that registration. UCS_ERR_INVALID_PARAM, logged,
 * when the range is not VMM memory mapped back to back.
 */
static ucs_status_t
uct_cuda_ipc_ns_md_memh_wider(uct_cuda_ipc_ns_md_t *md,
                              uct_cuda_ipc_ns_md_memh_t *memh, void *address,
                              size_t length,
                              const uct_cuda_ipc_ns_md_memh_t **wider_p)
{
    uct_cuda_ipc_ns_md_memh_t *head, *wider;
    ucs_status_t status;

    head = __atomic_load_n(&memh->wider, __ATOMIC_ACQUIRE);
    for (;;) {
        for (wider = head; wider != NULL; wider = wider->wider) {
            if (uct_cuda_ipc_ns_md_memh_covers(wider, (uintptr_t)address,
                                               length)) {
                *wider_p = wider;
                return UCS_OK;
            }
        }

        status = uct_cuda_ipc_ns_md_reg(md, address, length,
                                        UCS_LOG_LEVEL_ERROR, &wider);
        if (status != UCS_OK) {
            return status;
        }
        if (!uct_cuda_ipc_ns_md_memh_covers(wider, (uintptr_t)address,
                                            length)) {
            ucs_error("cuda_ipc_ns: key of 0x%" PRIx64 "..0x%" PRIx64 " packed "
                      "for %p..%p, which registers as 0x%" PRIx64 "..0x%" PRIx64
                      ": not VMM memory of one device mapped back to back",
                      memh->info.base, memh->info.base + memh->info.length,
                      address, UCS_PTR_BYTE_OFFSET(address, length),
                      wider->info.base, wider->info.base + wider->info.length);
            uct_cuda_ipc_ns_md_memh_release(md, wider);
            ucs_free(wider);
            return UCS_ERR_INVALID_PARAM;
        }

        /* pushed once: a pack in another thread may have pushed one */
        wider->wider = head;
        if (__atomic_compare_exchange_n(&memh->wider, &head, wider, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            ucs_debug("cuda_ipc_ns: key of 0x%" PRIx64 "..0x%" PRIx64 " packed "
                      "for %p..%p: registered 0x%" PRIx64 "..0x%" PRIx64
                      " (handle type %d)", memh->info.base,
                      memh->info.base + memh->info.length, address,
                      UCS_PTR_BYTE_OFFSET(address, length), wider->info.base,
                      wider->info.base + wider->info.length,
                      wider->info.handle_type);
            *wider_p = wider;
            return UCS_OK;
        }
        wider->wider = NULL;
        uct_cuda_ipc_ns_md_memh_release(md, wider);
        ucs_free(wider);
    }
}


ucs_status_t uct_cuda_ipc_ns_md_pack_range(uct_cuda_ipc_ns_md_t *md,
                                           uct_cuda_ipc_ns_md_memh_t *memh,
                                           void *address, size_t length,
                                           void *rkey_buffer)
{
    const uct_cuda_ipc_ns_md_memh_t *key = memh;
    ucs_status_t status;

    if (ucs_unlikely((address != NULL) &&
                     ((memh->info.handle_type ==
                       UCT_CUDA_IPC_NS_HANDLE_POSIX_FD) ||
                      (memh->info.handle_type ==
                       UCT_CUDA_IPC_NS_HANDLE_CHUNKS)) &&
                     !uct_cuda_ipc_ns_md_memh_covers(memh, (uintptr_t)address,
                                                     length))) {
        status = uct_cuda_ipc_ns_md_memh_wider(md, memh, address, length,
                                               &key);
        if (status != UCS_OK) {
            return status;
        }
    }

    return uct_cuda_ipc_ns_rkey_pack(&key->info, rkey_buffer);
}


/* UCX >= 1.16 names the range UCP packs the key for; uct_md_mkey_pack
 * names none (NULL, SIZE_MAX) */
static ucs_status_t
uct_cuda_ipc_ns_mkey_pack(uct_md_h md, uct_mem_h memh,
                          UCT_CUDA_IPC_NS_MKEY_PACK_RANGE_ARGS
                          const uct_md_mkey_pack_params_t *params,
                          void *rkey_buffer)
{
#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 16)
    return uct_cuda_ipc_ns_md_pack_range(
            ucs_derived_of(md, uct_cuda_ipc_ns_md_t), memh,
            (length == SIZE_MAX) ? NULL : address, length, rkey_buffer);
#else
    return uct_cuda_ipc_ns_md_pack_range(
            ucs_derived_of(md, uct_cuda_ipc_ns_md_t), memh, NULL, 0,
            rkey_buffer);
#endif
}


/* Owners whose legacy keys were refused with a warning, so that a user sees
 * the warning once per peer process, not once per key */
static uct_cuda_ipc_ns_owner_set_t uct_cuda_ipc_ns_legacy_warned =
        UCT_CUDA_IPC_NS_OWNER_SET_INITIALIZER;


/* Nonzero the first time the owner of @a info is seen (it is recorded) */
static int uct_cuda_ipc_ns_legacy_warn_first(const uct_cuda_ipc_ns_rkey_info_t *info)
{
    uct_cuda_ipc_ns_owner_set_entry_t owner;

    uct_cuda_ipc_ns_owner_set_entry(&owner, info->pid, info->pid_ns,
                                    info->start_time, NULL);
    return uct_cuda_ipc_ns_owner_set_add(&uct_cuda_ipc_ns_legacy_warned,
                                         &owner);
}


/*
 * The driver imports memory only on a GPU this process can use
 * (cuMemImportFromShareableHandle: CUDA_ERROR_NOT_SUPPORTED), and pods
 * usually get different GPUs: such a key is refused here, before any import,
 * with UCS_ERR_UNREACHABLE, the one status that makes UCP drop this MD from
 * the key and move the data another way instead of failing the whole unpack
 * (docs/architecture.md, "GPU visibility").
 */
static ucs_status_t
uct_cuda_ipc_ns_rkey_check_gpu(const uct_cuda_ipc_ns_rkey_info_t *info)
{
    char key_gpu[UCT_CUDA_IPC_NS_GPU_UUID_STR_MAX], our_gpus[512];
    ucs_log_level_t level;
    ucs_status_t status;
    int usable;

    status = uct_cuda_ipc_ns_gpus_usable(info->dev_uuid, &usable);
    if (status != UCS_OK) {
        /* nothing can be imported without the list: logged there */
        return UCS_ERR_UNREACHABLE;
    }
    if (usable) {
        return UCS_OK;
    }

    /* ucs_log() evaluates its level more than once */
    level = uct_cuda_ipc_ns_gpus_warn_first(info->dev_uuid, info->pid,
                                            info->pid_ns, info->start_time) ?
            UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_DEBUG;
    uct_cuda_ipc_ns_gpus_uuid_str(info->dev_uuid, key_gpu, sizeof(key_gpu));
    ucs_log(level,
            "cuda_ipc_ns: memory of pid %u in PID namespace %" PRIu64
            " lives on %s, which this process cannot use (it can use %s): "
            "cu_ipc_ns cannot import it, UCP moves it another way (once per "
            "peer process and GPU)", info->pid, info->pid_ns, key_gpu,
            uct_cuda_ipc_ns_gpus_str(our_gpus, sizeof(our_gpus)));
    return UCS_ERR_UNREACHABLE;
}


/*
 * A key of memory its owner copies (a legacy key of another PID namespace
 * that names its owner's broker, or a copy key): what its copies need must
 * be sane before any is asked (the owner checks the token and the range
 * again; the session checks the owner's identity).
 */
static ucs_status_t
uct_cuda_ipc_ns_rkey_check_owner_copy(const uct_cuda_ipc_ns_rkey_info_t *info)
{
    if ((info->length == 0) || (info->base + info->length < info->base)) {
        ucs_error("cuda_ipc_ns: owner copy key of pid %u (PID namespace %"
                  PRIu64 ") has an invalid range 0x%" PRIx64 " + %" PRIu64
                  ": refused", info->pid, info->pid_ns, info->base,
                  info->length);
        return UCS_ERR_INVALID_PARAM;
    }

    if (info->pid == 0) {
        ucs_error("cuda_ipc_ns: owner copy key names pid 0 in PID namespace %"
                  PRIu64 ": refused", info->pid_ns);
        return UCS_ERR_INVALID_PARAM;
    }

    ucs_debug("cuda_ipc_ns: key of %s allocation 0x%" PRIx64 " (%" PRIu64
              " bytes) of pid %u in PID namespace %" PRIu64 ": copies made "
              "by its owner",
              (info->handle_type == UCT_CUDA_IPC_NS_HANDLE_COPY) ?
              "unshareable VMM" : "legacy", info->base, info->length,
              info->pid, info->pid_ns);
    return UCS_OK;
}


/*
 * A legacy key of another PID namespace: opened here, or copied by its
 * owner (cuda_ipc_ns_legacy_direct.h), or neither (UCS_ERR_UNREACHABLE:
 * UCP drops us from the key).
 */
static ucs_status_t uct_cuda_ipc_ns_rkey_legacy_path(uct_cuda_ipc_ns_md_rkey_t *rkey)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    uct_cuda_ipc_ns_legacy_direct_path_t path;
    int usable, has_broker;
    ucs_status_t status;

    usable     = (uct_cuda_ipc_ns_gpus_usable(rkey->info.dev_uuid,
                                              &usable) == UCS_OK) && usable;
    has_broker = rkey->info.broker_addr_len > 0;
    path       = uct_cuda_ipc_ns_legacy_direct_path(&rkey->info, usable);
    if (path == UCT_CUDA_IPC_NS_LEGACY_PATH_DIRECT) {
        return UCS_OK;
    }

    if (has_broker) {
        /* its owner copies it for us (docs/owner-copies.md), at once or
         * when our open fails */
        status = uct_cuda_ipc_ns_rkey_check_owner_copy(&rkey->info);
        if (status != UCS_OK) {
            return status;
        }
        rkey->owner_gpu_usable = usable;
        rkey->owner_copy       = (path == UCT_CUDA_IPC_NS_LEGACY_PATH_OWNER);
        rkey->direct_fallback  = !rkey->owner_copy;
        return UCS_OK;
    }

    /* UCP drops us from the key: tag and stream stage the data through
     * the driver (cu_cpy_ns), but UCP's software RMA of protocols v1
     * copies with the CPU (ucp/rma/rma_sw.c assumes host memory) */
    if (uct_cuda_ipc_ns_legacy_warn_first(&rkey->info)) {
        ucs_warn("cuda_ipc_ns: memory of pid %u in PID namespace %" PRIu64
                 " comes from cuMemAlloc (legacy CUDA IPC handle), which "
                 "is not opened from PID namespace %" PRIu64 " (see "
                 "UCX_CUDA_IPC_NS_LEGACY_DIRECT), and its key names no "
                 "broker to copy it (the owner runs with "
                 "UCX_CUDA_IPC_NS_OWNER_COPY=n, or without a broker): UCP "
                 "moves it without cu_ipc_ns. Tag and stream messages are "
                 "staged through the CUDA driver; UCP RMA (put/get) with "
                 "protocols v1 (UCX_PROTO_ENABLE=n, the default of UCX "
                 "1.13) falls back to software RMA, which copies device "
                 "memory with the CPU (wrong data or a crash on a GPU). "
                 "Remedies: UCX_CUDA_IPC_NS_OWNER_COPY=y (the default) "
                 "at the owner, export VMM memory (cuMemCreate with "
                 "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), or set "
                 "UCX_PROTO_ENABLE=y, whose RMA copies through the driver. "
                 "(once per peer process)",
                 rkey->info.pid, rkey->info.pid_ns, self->pid_ns);
    }
    return UCS_ERR_UNREACHABLE;
}


static ucs_status_t
uct_cuda_ipc_ns_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                            UCT_CUDA_IPC_NS_RKEY_UNPACK_PARAMS_ARG
                            uct_rkey_t *rkey_p, void **handle_p)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    uct_cuda_ipc_ns_md_rkey_t *rkey;
    ucs_status_t status;
    int usable;

    rkey = ucs_calloc(1, sizeof(*rkey), "cuda_ipc_ns_rkey");
    if (rkey == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_cuda_ipc_ns_rkey_parse(rkey_buffer,
                                        UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE,
                                        &rkey->info);
    if (status != UCS_OK) {
        goto err_free;
    }

    if (!rkey->info.has_ext) {
        /* an older writer, or the default namespace packing a base key */
        rkey->info.pid_ns = UCT_CUDA_IPC_NS_INIT_PID_NS;
    }

    if ((rkey->info.handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) &&
        (rkey->info.pid_ns != self->pid_ns)) {
        status = uct_cuda_ipc_ns_rkey_legacy_path(rkey);
        if (status != UCS_OK) {
            goto err_free;
        }
    } else if (rkey->info.handle_type == UCT_CUDA_IPC_NS_HANDLE_COPY) {
        /* its owner copies it for us (docs/owner-copies.md) */
        status = uct_cuda_ipc_ns_rkey_check_owner_copy(&rkey->info);
        if (status != UCS_OK) {
            goto err_free;
        }
        rkey->owner_copy = 1;
    }

    /* memory its owner copies needs no GPU of ours: on one we cannot use,
     * the copies stage through pinned host memory (docs/owner-copies.md) */
    if (!rkey->owner_copy) {
        status = uct_cuda_ipc_ns_rkey_check_gpu(&rkey->info);
        if (status != UCS_OK) {
            goto err_free;
        }
    } else {
        rkey->owner_gpu_usable =
                (uct_cuda_ipc_ns_gpus_usable(rkey->info.dev_uuid,
                                             &usable) == UCS_OK) && usable;
    }

    *handle_p = NULL;
    *rkey_p   = (uintptr_t)rkey;
    return UCS_OK;

err_free:
    ucs_free(rkey);
    return status;
}


static ucs_status_t uct_cuda_ipc_ns_rkey_release(uct_component_t *component,
                                                 uct_rkey_t rkey, void *handle)
{
    uct_cuda_ipc_ns_md_rkey_t *key = (uct_cuda_ipc_ns_md_rkey_t*)rkey;

    if (key->peer != NULL) {
        uct_cuda_ipc_ns_cache_peer_put(key->peer);
    }
    ucs_free(key->chunks);
    ucs_free(key);
    return UCS_OK;
}


static uct_md_ops_t uct_cuda_ipc_ns_md_ops = {
    .close                  = uct_cuda_ipc_ns_md_close,
    .query                  = uct_cuda_ipc_ns_md_query,
    /* UCT_MD_FLAG_ALLOC is not set: nothing is allocated through us */
    .mem_alloc              = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free               = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg                = uct_cuda_ipc_ns_mem_reg,
    .mem_dereg              = uct_cuda_ipc_ns_mem_dereg,
    /* the shared layer's: CUDA memory and its allocation */
    .mem_query              = uct_cuda_ipc_ns_ptr_mem_query,
    .mkey_pack              = uct_cuda_ipc_ns_mkey_pack,
    .detect_memory_type     = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported
};


/* The md's settings from @a config: export kinds, socket dir, fd exchange */
static ucs_status_t
uct_cuda_ipc_ns_md_apply_config(uct_cuda_ipc_ns_md_t *md,
                                const uct_cuda_ipc_ns_md_config_t *config)
{
    md->legacy          = config->legacy;
    md->posix_fd        = config->posix_fd &&
                          uct_cuda_ipc_ns_md_posix_fd_supported();
    md->owner_copy      = config->owner_copy;
    uct_cuda_ipc_ns_legacy_direct_configure(config->legacy_direct);
    md->addr_flags      = (md->legacy ? UCT_CUDA_IPC_NS_ADDR_FLAG_LEGACY : 0) |
                          (md->posix_fd ? UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD : 0);

    md->sock_dir = ucs_strdup(config->sock_dir, "cuda_ipc_ns_sock_dir");
    if (md->sock_dir == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate socket directory name");
        return UCS_ERR_NO_MEMORY;
    }
    md->fdx.mode        = (uct_cuda_ipc_ns_broker_proto_fdx_mode_t)config->fdx_mode;
    md->fdx.sock_dir    = md->sock_dir;
    md->fdx.timeout     = config->sock_timeout;
    md->fdx.req_timeout = config->sock_req_timeout;
    md->fdx.allowed_uid = config->allowed_uid;
    md->fdx.userns_peers = config->userns_peers;
    return UCS_OK;
}


/* Our fd broker, when POSIX fds are exported and not exchanged by pidfd */
static ucs_status_t uct_cuda_ipc_ns_md_start_broker(uct_cuda_ipc_ns_md_t *md)
{
    ucs_status_t status;

    if (md->posix_fd && (md->fdx.mode != UCT_CUDA_IPC_NS_FDX_PIDFD)) {
        status = uct_cuda_ipc_ns_broker_get(&md->fdx, &md->broker);
        if (status != UCS_OK) {
            ucs_error("cuda_ipc_ns: failed to start the fd broker (socket dir "
                      "'%s'): %s", md->sock_dir, ucs_status_string(status));
            return status;
        }
        md->addr_flags |= UCT_CUDA_IPC_NS_ADDR_FLAG_BROKER;
    }

    if (md->owner_copy && (md->broker == NULL)) {
        ucs_diag("cuda_ipc_ns: UCX_CUDA_IPC_NS_OWNER_COPY=y needs the fd "
                 "broker (POSIX fd export and an fd exchange mode other than "
                 "'pidfd'): legacy memory is not offered for owner copies");
    }
    return UCS_OK;
}


static ucs_status_t uct_cuda_ipc_ns_md_open(uct_component_t *component,
                                            const char *md_name,
                                            const uct_md_config_t *uct_config,
                                            uct_md_h *md_p)
{
    const uct_cuda_ipc_ns_md_config_t *config =
            ucs_derived_of(uct_config, uct_cuda_ipc_ns_md_config_t);
    uct_cuda_ipc_ns_cache_config_t cache_config;
    uct_cuda_ipc_ns_md_t *md;
    ucs_status_t status;
    uct_md_t *base;

    status = uct_cuda_ipc_ns_md_base_alloc(component, &uct_cuda_ipc_ns_md_ops,
                                           sizeof(*md), md_name, &base);
    if (status != UCS_OK) {
        return status;
    }

    md     = ucs_derived_of(base, uct_cuda_ipc_ns_md_t);
    status = uct_cuda_ipc_ns_md_apply_config(md, config);
    if (status != UCS_OK) {
        goto err_free;
    }

    status = uct_cuda_ipc_ns_md_start_broker(md);
    if (status != UCS_OK) {
        goto err_free;
    }

    cache_config.enable      = config->cache_enable;
    cache_config.max_regions = config->cache_max_regions;
    cache_config.max_size    = config->cache_max_size;
    status = uct_cuda_ipc_ns_cache_get(&cache_config);
    if (status != UCS_OK) {
        goto err_put_broker;
    }

    *md_p = &md->super;
    return UCS_OK;

err_put_broker:
    if (md->broker != NULL) {
        uct_cuda_ipc_ns_broker_put(md->broker);
    }
err_free:
    ucs_free(md->sock_dir);
    ucs_free(md);
    return status;
}


uct_component_t uct_cuda_ipc_ns_component = {
    .query_md_resources = uct_cuda_ipc_ns_md_base_query_resources,
    .md_open            = uct_cuda_ipc_ns_md_open,
    .cm_open            = (uct_component_cm_open_func_t)
                          ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_cuda_ipc_ns_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)
                          ucs_empty_function_return_unsupported,
    .rkey_release       = uct_cuda_ipc_ns_rkey_release,
    UCT_CUDA_IPC_NS_COMPONENT_RKEY_COMPARE
    .name               = UCT_CUDA_IPC_NS_NAME,
    .md_config          = {
        .name           = "CUDA IPC across namespaces memory domain",
        .prefix         = UCT_CUDA_IPC_NS_CFG_PREFIX,
        .table          = uct_cuda_ipc_ns_md_config_table,
        .size           = sizeof(uct_cuda_ipc_ns_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(
                                  &uct_cuda_ipc_ns_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)
                          ucs_empty_function
};
