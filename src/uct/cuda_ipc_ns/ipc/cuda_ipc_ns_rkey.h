/*
 * cuda_ipc_ns: remote key wire format (docs/wire-format.md).
 *
 * Pure pack/parse of bytes: no driver calls, no UCT objects, so the format
 * can be tested with golden vectors and fuzzed.
 *
 * Little-endian, packed, sizes fixed by the format:
 *
 *   base key (UCT_CUDA_IPC_NS_RKEY_BASE_SIZE bytes)
 *     u8   handle_type        UCT_CUDA_IPC_NS_HANDLE_*
 *     u8   handle[64]         legacy: CUipcMemHandle bytes;
 *                             posix fd: i32 fd number, u64 allocation id,
 *                             52 zero bytes;
 *                             chunks: i32 -1, u64 registration id,
 *                             u32 number of chunks, 48 zero bytes;
 *                             copy: 64 zero bytes (reserved);
 *                             pool: CUmemPoolPtrExportData bytes
 *     u32  pid                bit 31 set: an extension follows
 *     u64  base               allocation base address in the owner
 *     u64  length             allocation length
 *     u8   dev_uuid[16]       CUuuid of the owner's device
 *   extension (when bit 31 of pid is set)
 *     u8   ext_length         bytes of the extension, this field included
 *     u8   version            UCT_CUDA_IPC_NS_RKEY_EXT_VERSION
 *     u64  pid_ns             inode of the owner's PID namespace
 *     u64  start_time         owner's start time (pid reuse guard)
 *     -- posix fd, chunks and copy keys (version >= 1), legacy keys of
 *        version >= 2 (copies made by the owner, docs/owner-copies.md) --
 *     u8   token[16]          per-registration secret for the broker
 *     u8   broker_addr_len
 *     u8   broker_addr[broker_addr_len]  sockaddr_un path, abstract if
 *                                        it starts with '\0'
 *     -- pool keys --
 *     i32  pool_fd            the owner's fd of the pool's shareable handle
 *     -- fields of newer versions follow; readers skip them --
 *
 * A legacy key of version 2, and a copy key, name memory its owner's broker
 * copies to and from: its registration id there is the key's base. A pool
 * key names one allocation of a stream-ordered pool (its base and length);
 * the pool's fd is at pool_fd in the owner and registered with its broker
 * under the key's base.
 *
 * A packed key is padded with zeros to UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE (the
 * fixed rkey_packed_size of the MD), which stays below 256 bytes as UCP's
 * 1-byte size prefix requires.
 */
#ifndef UCT_CUDA_IPC_NS_RKEY_H
#define UCT_CUDA_IPC_NS_RKEY_H

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


#define UCT_CUDA_IPC_NS_HANDLE_SIZE        64
#define UCT_CUDA_IPC_NS_UUID_SIZE          16
#define UCT_CUDA_IPC_NS_TOKEN_SIZE         16
#define UCT_CUDA_IPC_NS_BROKER_ADDR_MAX    108  /* sizeof(sun_path) */
#define UCT_CUDA_IPC_NS_RKEY_EXT_VERSION   1
/* the version of legacy keys that carry a token and a broker address */
#define UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY 2
#define UCT_CUDA_IPC_NS_RKEY_PID_EXT_FLAG  0x80000000u

#define UCT_CUDA_IPC_NS_RKEY_BASE_SIZE \
    (1 + UCT_CUDA_IPC_NS_HANDLE_SIZE + 4 + 8 + 8 + UCT_CUDA_IPC_NS_UUID_SIZE)
/* ext_length, version, pid_ns, start_time */
#define UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE  (1 + 1 + 8 + 8)
#define UCT_CUDA_IPC_NS_RKEY_EXT_MAX_SIZE \
    (UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE + UCT_CUDA_IPC_NS_TOKEN_SIZE + 1 + \
     UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 4)
#define UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE \
    (UCT_CUDA_IPC_NS_RKEY_BASE_SIZE + UCT_CUDA_IPC_NS_RKEY_EXT_MAX_SIZE)


typedef enum {
    UCT_CUDA_IPC_NS_HANDLE_LEGACY   = 1, /* cuIpcGetMemHandle */
    UCT_CUDA_IPC_NS_HANDLE_POSIX_FD = 2, /* cuMemExportToShareableHandle */
    /* a range of several VMM allocations mapped back to back: each is
     * exported by the owner's broker when asked (docs/framework-memory.md) */
    UCT_CUDA_IPC_NS_HANDLE_CHUNKS   = 3,
    /* memory with no handle to share (VMM without a shareable handle type:
     * vLLM's cumem allocator, stream-ordered pools): only its owner's
     * broker copies it, for every peer (docs/owner-copies.md) */
    UCT_CUDA_IPC_NS_HANDLE_COPY     = 4,
    /* an allocation of a stream-ordered pool created with the POSIX-fd
     * handle type: the pool's fd, then cuMemPoolImportPointer */
    UCT_CUDA_IPC_NS_HANDLE_POOL     = 5
} uct_cuda_ipc_ns_rkey_handle_type_t;


/* Handle types whose memory comes as POSIX fds (token and broker needed) */
static inline int uct_cuda_ipc_ns_handle_is_fd(unsigned handle_type)
{
    return (handle_type == UCT_CUDA_IPC_NS_HANDLE_POSIX_FD) ||
           (handle_type == UCT_CUDA_IPC_NS_HANDLE_CHUNKS) ||
           (handle_type == UCT_CUDA_IPC_NS_HANDLE_POOL);
}


/* Handle types whose key carries 64 bytes of the driver's (a legacy IPC
 * handle, a pool allocation's export data): a mapping is the key's while
 * they are the same */
static inline int uct_cuda_ipc_ns_handle_is_opaque(unsigned handle_type)
{
    return (handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) ||
           (handle_type == UCT_CUDA_IPC_NS_HANDLE_POOL);
}


/* Unpacked (host-order) contents of a key */
typedef struct uct_cuda_ipc_ns_rkey_info {
    uint8_t  handle_type;          /* uct_cuda_ipc_ns_rkey_handle_type_t */
    union {
        uint8_t  legacy[UCT_CUDA_IPC_NS_HANDLE_SIZE];
        /* the driver's bytes of an opaque handle (legacy and pool keys) */
        uint8_t  bytes[UCT_CUDA_IPC_NS_HANDLE_SIZE];
        struct {
            int32_t  fd;           /* fd number in the owner; -1: chunks */
            /* owner's allocation (buffer) id; chunks: of one chunk when
             * the key names one (the importer's chunk keys), else the
             * registration id */
            uint64_t alloc_id;
            /* chunks only: the registration id and the number of
             * chunks */
            uint64_t reg_id;
            uint32_t num_chunks;
        } posix;
    } handle;
    uint32_t pid;                  /* owner pid, without the extension flag */
    uint64_t base;
    uint64_t length;
    uint8_t  dev_uuid[UCT_CUDA_IPC_NS_UUID_SIZE];

    int      has_ext;              /* extension present */
    uint8_t  ext_version;          /* version found on the wire */
    uint64_t pid_ns;
    uint64_t start_time;
    /* posix fd, chunks and copy keys; legacy keys of version >= 2 */
    uint8_t  token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    uint8_t  broker_addr_len;
    char     broker_addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    int32_t  pool_fd;              /* pool keys: the pool's fd in the owner */
} uct_cuda_ipc_ns_rkey_info_t;


/* Where an importer gets the fd of a one-fd key (posix fd or pool): the
 * owner's fd number, for pidfd_getfd (@a fd_p may be NULL), and the id its
 * broker has it under */
static inline void
uct_cuda_ipc_ns_rkey_fd_source(const uct_cuda_ipc_ns_rkey_info_t *info,
                               int32_t *fd_p, uint64_t *id_p)
{
    int pool = (info->handle_type == UCT_CUDA_IPC_NS_HANDLE_POOL);

    if (fd_p != NULL) {
        *fd_p = pool ? info->pool_fd : info->handle.posix.fd;
    }
    *id_p = pool ? info->base : info->handle.posix.alloc_id;
}


/* Handle types useless without the owner's broker: a key of one always
 * carries the extension, with a token and a broker address */
static inline int uct_cuda_ipc_ns_handle_needs_broker(unsigned handle_type)
{
    return uct_cuda_ipc_ns_handle_is_fd(handle_type) ||
           (handle_type == UCT_CUDA_IPC_NS_HANDLE_COPY);
}


/* Whether a key of @a handle_type and extension @a ext_version carries a
 * token and a broker address */
static inline int uct_cuda_ipc_ns_rkey_has_broker(unsigned handle_type,
                                                  unsigned ext_version)
{
    return uct_cuda_ipc_ns_handle_needs_broker(handle_type) ||
           ((handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) &&
            (ext_version >= UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY));
}


/**
 * Pack @a info into @a buffer of UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE bytes.
 * Writes the extension when info->has_ext: version 1, or version 2 for a
 * legacy key with a broker address (broker_addr_len > 0: the owner copies
 * it for importers, docs/owner-copies.md); zero-fills the rest.
 *
 * @return UCS_OK, or UCS_ERR_INVALID_PARAM for an unknown handle type, a pid
 *         with bit 31 set or a broker address too long.
 */
ucs_status_t uct_cuda_ipc_ns_rkey_pack(const uct_cuda_ipc_ns_rkey_info_t *info,
                                       void *buffer);


/**
 * Parse @a length bytes at @a buffer into @a info. Never reads past
 * @a length. Accepts keys without extension (older writer) and skips
 * extension bytes it does not know (newer writer, higher version).
 *
 * @return UCS_OK, or UCS_ERR_INVALID_PARAM for a short buffer, unknown handle
 *         type, bad extension length, or a version this reader cannot read
 *         (0); a debug log line names the cause.
 */
ucs_status_t uct_cuda_ipc_ns_rkey_parse(const void *buffer, size_t length,
                                        uct_cuda_ipc_ns_rkey_info_t *info);

#endif
