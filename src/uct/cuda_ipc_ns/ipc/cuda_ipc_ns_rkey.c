/*
 * cuda_ipc_ns: remote key wire format (docs/wire-format.md). See the layout in
 * cuda_ipc_ns_rkey.h; every field is (de)serialized byte by byte so the
 * format never depends on host struct layout or endianness.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_byteorder.h"

#include <ucs/debug/log.h>
#include <string.h>


/* Offsets inside the base key */
#define UCT_CUDA_IPC_NS_RKEY_OFF_TYPE      0
#define UCT_CUDA_IPC_NS_RKEY_OFF_HANDLE    1
#define UCT_CUDA_IPC_NS_RKEY_OFF_PID \
    (UCT_CUDA_IPC_NS_RKEY_OFF_HANDLE + UCT_CUDA_IPC_NS_HANDLE_SIZE)
#define UCT_CUDA_IPC_NS_RKEY_OFF_BASE      (UCT_CUDA_IPC_NS_RKEY_OFF_PID + 4)
#define UCT_CUDA_IPC_NS_RKEY_OFF_LENGTH    (UCT_CUDA_IPC_NS_RKEY_OFF_BASE + 8)
#define UCT_CUDA_IPC_NS_RKEY_OFF_UUID      (UCT_CUDA_IPC_NS_RKEY_OFF_LENGTH + 8)

/* Offsets inside the posix fd handle */
#define UCT_CUDA_IPC_NS_RKEY_HOFF_FD       0
#define UCT_CUDA_IPC_NS_RKEY_HOFF_ALLOC_ID 4
#define UCT_CUDA_IPC_NS_RKEY_HOFF_CHUNKS   12 /* chunks keys */

/* Offsets inside the extension */
#define UCT_CUDA_IPC_NS_RKEY_EOFF_LENGTH   0
#define UCT_CUDA_IPC_NS_RKEY_EOFF_VERSION  1
#define UCT_CUDA_IPC_NS_RKEY_EOFF_PID_NS   2
#define UCT_CUDA_IPC_NS_RKEY_EOFF_START    10
#define UCT_CUDA_IPC_NS_RKEY_EOFF_TOKEN    UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE
#define UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR_LEN \
    (UCT_CUDA_IPC_NS_RKEY_EOFF_TOKEN + UCT_CUDA_IPC_NS_TOKEN_SIZE)
#define UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR     (UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR_LEN + 1)

/* Extension bytes a posix fd key needs before its broker address */
#define UCT_CUDA_IPC_NS_RKEY_EXT_POSIX_FIXED_SIZE UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR


/* The whole key must fit UCP's 1-byte per-transport size prefix */
#if UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE >= 256
#  error "cuda_ipc_ns packed rkey does not fit a 1-byte size prefix"
#endif
/* ext_length is a u8 */
#if UCT_CUDA_IPC_NS_RKEY_EXT_MAX_SIZE > 255
#  error "cuda_ipc_ns rkey extension does not fit its 1-byte length"
#endif


/* Whether @a info can be packed: a debug line names what cannot */
static ucs_status_t
uct_cuda_ipc_ns_rkey_pack_check(const uct_cuda_ipc_ns_rkey_info_t *info)
{
    if ((info->handle_type != UCT_CUDA_IPC_NS_HANDLE_LEGACY) &&
        !uct_cuda_ipc_ns_handle_needs_broker(info->handle_type)) {
        ucs_debug("cuda_ipc_ns: rkey pack: unknown handle type %u",
                  info->handle_type);
        return UCS_ERR_INVALID_PARAM;
    }

    if (info->pid & UCT_CUDA_IPC_NS_RKEY_PID_EXT_FLAG) {
        /* bit 31 is the extension flag on the wire */
        ucs_debug("cuda_ipc_ns: rkey pack: pid 0x%x collides with the "
                  "extension flag", info->pid);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((info->handle_type == UCT_CUDA_IPC_NS_HANDLE_CHUNKS) &&
        (info->handle.posix.num_chunks == 0)) {
        ucs_debug("cuda_ipc_ns: rkey pack: chunks key without chunks");
        return UCS_ERR_INVALID_PARAM;
    }

    if ((info->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) &&
        (info->broker_addr_len > 0) && !info->has_ext) {
        /* the broker address travels in the extension only */
        ucs_debug("cuda_ipc_ns: rkey pack: legacy key with a broker address "
                  "but without extension");
        return UCS_ERR_INVALID_PARAM;
    }

    if (info->broker_addr_len > UCT_CUDA_IPC_NS_BROKER_ADDR_MAX) {
        ucs_debug("cuda_ipc_ns: rkey pack: broker address length %u exceeds "
                  "%d", info->broker_addr_len, UCT_CUDA_IPC_NS_BROKER_ADDR_MAX);
        return UCS_ERR_INVALID_PARAM;
    }

    if (uct_cuda_ipc_ns_handle_needs_broker(info->handle_type) &&
        !info->has_ext) {
        /* without token and broker address the memory cannot be reached */
        ucs_debug("cuda_ipc_ns: rkey pack: key of handle type %u without "
                  "extension", info->handle_type);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((info->handle_type == UCT_CUDA_IPC_NS_HANDLE_COPY) &&
        (info->broker_addr_len == 0)) {
        ucs_debug("cuda_ipc_ns: rkey pack: copy key without broker address");
        return UCS_ERR_INVALID_PARAM;
    }

    return UCS_OK;
}


/* The 64 handle bytes at @a handle of a key of @a info->handle_type */
static void uct_cuda_ipc_ns_rkey_pack_handle(const uct_cuda_ipc_ns_rkey_info_t *info,
                                             uint8_t *handle)
{
    if (uct_cuda_ipc_ns_handle_is_opaque(info->handle_type)) {
        memcpy(handle, info->handle.bytes, UCT_CUDA_IPC_NS_HANDLE_SIZE);
    } else if (info->handle_type == UCT_CUDA_IPC_NS_HANDLE_CHUNKS) {
        /* no fd number: the owner's broker exports each chunk when asked */
        uct_cuda_ipc_ns_put_le32(handle + UCT_CUDA_IPC_NS_RKEY_HOFF_FD,
                                (uint32_t)-1);
        uct_cuda_ipc_ns_put_le64(handle + UCT_CUDA_IPC_NS_RKEY_HOFF_ALLOC_ID,
                                info->handle.posix.reg_id);
        uct_cuda_ipc_ns_put_le32(handle + UCT_CUDA_IPC_NS_RKEY_HOFF_CHUNKS,
                                info->handle.posix.num_chunks);
    } else if (info->handle_type == UCT_CUDA_IPC_NS_HANDLE_POSIX_FD) {
        /* the remaining handle bytes stay zero (reserved) */
        uct_cuda_ipc_ns_put_le32(handle + UCT_CUDA_IPC_NS_RKEY_HOFF_FD,
                                (uint32_t)info->handle.posix.fd);
        uct_cuda_ipc_ns_put_le64(handle + UCT_CUDA_IPC_NS_RKEY_HOFF_ALLOC_ID,
                                info->handle.posix.alloc_id);
    }
}


/* The extension at @a ext: this writer emits version 1, or 2 for a legacy
 * key its owner copies (token and broker address) */
static void uct_cuda_ipc_ns_rkey_pack_ext(const uct_cuda_ipc_ns_rkey_info_t *info,
                                          uint8_t *ext)
{
    uint8_t version;
    size_t ext_length;

    version = ((info->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) &&
               (info->broker_addr_len > 0)) ?
              UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY :
              UCT_CUDA_IPC_NS_RKEY_EXT_VERSION;
    uct_cuda_ipc_ns_put_le64(ext + UCT_CUDA_IPC_NS_RKEY_EOFF_PID_NS,
                            info->pid_ns);
    uct_cuda_ipc_ns_put_le64(ext + UCT_CUDA_IPC_NS_RKEY_EOFF_START,
                            info->start_time);
    if (uct_cuda_ipc_ns_rkey_has_broker(info->handle_type, version)) {
        memcpy(ext + UCT_CUDA_IPC_NS_RKEY_EOFF_TOKEN, info->token,
               UCT_CUDA_IPC_NS_TOKEN_SIZE);
        ext[UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR_LEN] = info->broker_addr_len;
        memcpy(ext + UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR, info->broker_addr,
               info->broker_addr_len);
        ext_length = UCT_CUDA_IPC_NS_RKEY_EXT_POSIX_FIXED_SIZE +
                     info->broker_addr_len;
        if (info->handle_type == UCT_CUDA_IPC_NS_HANDLE_POOL) {
            uct_cuda_ipc_ns_put_le32(ext + ext_length, (uint32_t)info->pool_fd);
            ext_length += 4;
        }
    } else {
        ext_length = UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE;
    }
    ext[UCT_CUDA_IPC_NS_RKEY_EOFF_LENGTH]  = (uint8_t)ext_length;
    ext[UCT_CUDA_IPC_NS_RKEY_EOFF_VERSION] = version;
}


ucs_status_t uct_cuda_ipc_ns_rkey_pack(const uct_cuda_ipc_ns_rkey_info_t *info,
                                       void *buffer)
{
    uint8_t *p = buffer;
    ucs_status_t status;

    /* validate everything first so a failed pack leaves no half key */
    status = uct_cuda_ipc_ns_rkey_pack_check(info);
    if (status != UCS_OK) {
        return status;
    }

    memset(p, 0, UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE);

    /* base key */
    p[UCT_CUDA_IPC_NS_RKEY_OFF_TYPE] = info->handle_type;
    uct_cuda_ipc_ns_rkey_pack_handle(info, p + UCT_CUDA_IPC_NS_RKEY_OFF_HANDLE);
    uct_cuda_ipc_ns_put_le32(p + UCT_CUDA_IPC_NS_RKEY_OFF_PID,
                            info->pid |
                            (info->has_ext ? UCT_CUDA_IPC_NS_RKEY_PID_EXT_FLAG :
                                             0));
    uct_cuda_ipc_ns_put_le64(p + UCT_CUDA_IPC_NS_RKEY_OFF_BASE, info->base);
    uct_cuda_ipc_ns_put_le64(p + UCT_CUDA_IPC_NS_RKEY_OFF_LENGTH, info->length);
    memcpy(p + UCT_CUDA_IPC_NS_RKEY_OFF_UUID, info->dev_uuid,
           UCT_CUDA_IPC_NS_UUID_SIZE);

    if (info->has_ext) {
        uct_cuda_ipc_ns_rkey_pack_ext(info, p + UCT_CUDA_IPC_NS_RKEY_BASE_SIZE);
    }
    return UCS_OK;
}


/* The 64 handle bytes at @a handle of a key of @a info->handle_type */
static ucs_status_t
uct_cuda_ipc_ns_rkey_parse_handle(const uint8_t *handle,
                                  uct_cuda_ipc_ns_rkey_info_t *info)
{
    switch (info->handle_type) {
    case UCT_CUDA_IPC_NS_HANDLE_LEGACY:
    case UCT_CUDA_IPC_NS_HANDLE_POOL:
        memcpy(info->handle.bytes, handle, UCT_CUDA_IPC_NS_HANDLE_SIZE);
        break;
    case UCT_CUDA_IPC_NS_HANDLE_POSIX_FD:
        /* reserved handle bytes are ignored so a later writer may use them */
        info->handle.posix.fd       = (int32_t)uct_cuda_ipc_ns_get_le32(
                handle + UCT_CUDA_IPC_NS_RKEY_HOFF_FD);
        info->handle.posix.alloc_id = uct_cuda_ipc_ns_get_le64(
                handle + UCT_CUDA_IPC_NS_RKEY_HOFF_ALLOC_ID);
        break;
    case UCT_CUDA_IPC_NS_HANDLE_CHUNKS:
        info->handle.posix.fd         = -1;
        info->handle.posix.reg_id     = uct_cuda_ipc_ns_get_le64(
                handle + UCT_CUDA_IPC_NS_RKEY_HOFF_ALLOC_ID);
        info->handle.posix.alloc_id   = info->handle.posix.reg_id;
        info->handle.posix.num_chunks = uct_cuda_ipc_ns_get_le32(
                handle + UCT_CUDA_IPC_NS_RKEY_HOFF_CHUNKS);
        if (info->handle.posix.num_chunks == 0) {
            ucs_debug("cuda_ipc_ns: rkey parse: chunks key without chunks");
            return UCS_ERR_INVALID_PARAM;
        }
        break;
    case UCT_CUDA_IPC_NS_HANDLE_COPY:
        /* no handle: reserved bytes, ignored */
        break;
    default:
        ucs_debug("cuda_ipc_ns: rkey parse: unknown handle type %u",
                  info->handle_type);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}


/* The token, broker address and pool fd of extension @a ext
 * (@a ext_length bytes, of which @a required are the fixed fields) */
static ucs_status_t
uct_cuda_ipc_ns_rkey_parse_broker(const uint8_t *ext, size_t ext_length,
                                  size_t required,
                                  uct_cuda_ipc_ns_rkey_info_t *info)
{
    uint8_t addr_len;

    addr_len = ext[UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR_LEN];
    if (addr_len > UCT_CUDA_IPC_NS_BROKER_ADDR_MAX) {
        ucs_debug("cuda_ipc_ns: rkey parse: broker address length %u exceeds "
                  "%d", addr_len, UCT_CUDA_IPC_NS_BROKER_ADDR_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((required + addr_len) > ext_length) {
        ucs_debug("cuda_ipc_ns: rkey parse: broker address length %u exceeds "
                  "extension length %zu", addr_len, ext_length);
        return UCS_ERR_INVALID_PARAM;
    }

    if (((info->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) ||
         (info->handle_type == UCT_CUDA_IPC_NS_HANDLE_COPY)) &&
        (addr_len == 0)) {
        /* version 2 of a legacy key, and a copy key, exist for their broker
         * address */
        ucs_debug("cuda_ipc_ns: rkey parse: key of handle type %u version %u "
                  "without broker address", info->handle_type,
                  info->ext_version);
        return UCS_ERR_INVALID_PARAM;
    }

    if (info->handle_type == UCT_CUDA_IPC_NS_HANDLE_POOL) {
        if ((required + addr_len + 4) > ext_length) {
            ucs_debug("cuda_ipc_ns: rkey parse: pool key without its pool fd "
                      "(extension length %zu)", ext_length);
            return UCS_ERR_INVALID_PARAM;
        }
        info->pool_fd = (int32_t)uct_cuda_ipc_ns_get_le32(
                ext + UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR + addr_len);
    }

    memcpy(info->token, ext + UCT_CUDA_IPC_NS_RKEY_EOFF_TOKEN,
           UCT_CUDA_IPC_NS_TOKEN_SIZE);
    info->broker_addr_len = addr_len;
    memcpy(info->broker_addr, ext + UCT_CUDA_IPC_NS_RKEY_EOFF_ADDR, addr_len);
    return UCS_OK;
}


/* The extension at @a ext (@a remaining bytes left in the buffer) */
static ucs_status_t
uct_cuda_ipc_ns_rkey_parse_ext(const uint8_t *ext, size_t remaining,
                               uct_cuda_ipc_ns_rkey_info_t *info)
{
    size_t required, ext_length;
    int has_broker;

    if (remaining < 2) {
        ucs_debug("cuda_ipc_ns: rkey parse: extension flag set but only %zu "
                  "bytes follow the base key", remaining);
        return UCS_ERR_INVALID_PARAM;
    }

    ext_length        = ext[UCT_CUDA_IPC_NS_RKEY_EOFF_LENGTH];
    info->ext_version = ext[UCT_CUDA_IPC_NS_RKEY_EOFF_VERSION];
    if (info->ext_version == 0) {
        ucs_debug("cuda_ipc_ns: rkey parse: invalid extension version 0");
        return UCS_ERR_INVALID_PARAM;
    }

    /* every version >= 1 starts with the v1 fields; a legacy key of
     * version >= 2 has the token and broker address of a posix fd key */
    has_broker = uct_cuda_ipc_ns_rkey_has_broker(info->handle_type,
                                                 info->ext_version);
    required   = has_broker ?
               UCT_CUDA_IPC_NS_RKEY_EXT_POSIX_FIXED_SIZE :
               UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE;
    if (ext_length < required) {
        ucs_debug("cuda_ipc_ns: rkey parse: extension length %zu is below "
                  "the %zu bytes version 1 needs for handle type %u",
                  ext_length, required, info->handle_type);
        return UCS_ERR_INVALID_PARAM;
    }
    if (ext_length > remaining) {
        ucs_debug("cuda_ipc_ns: rkey parse: extension length %zu exceeds the "
                  "%zu bytes left in the buffer", ext_length, remaining);
        return UCS_ERR_INVALID_PARAM;
    }

    info->pid_ns     = uct_cuda_ipc_ns_get_le64(ext +
                                               UCT_CUDA_IPC_NS_RKEY_EOFF_PID_NS);
    info->start_time = uct_cuda_ipc_ns_get_le64(ext +
                                               UCT_CUDA_IPC_NS_RKEY_EOFF_START);
    if (!has_broker) {
        /* legacy keys of version 1 carry no token/address; newer fields are
         * skipped */
        return UCS_OK;
    }

    /* bytes up to ext_length beyond the broker fields are a newer
     * writer's: skipped */
    return uct_cuda_ipc_ns_rkey_parse_broker(ext, ext_length, required, info);
}


ucs_status_t uct_cuda_ipc_ns_rkey_parse(const void *buffer, size_t length,
                                        uct_cuda_ipc_ns_rkey_info_t *info)
{
    const uint8_t *p = buffer;
    uint32_t packed_pid;
    ucs_status_t status;

    /* fields absent from the wire read as zero */
    memset(info, 0, sizeof(*info));

    if (length < UCT_CUDA_IPC_NS_RKEY_BASE_SIZE) {
        ucs_debug("cuda_ipc_ns: rkey parse: short buffer: %zu bytes, base key "
                  "needs %d", length, UCT_CUDA_IPC_NS_RKEY_BASE_SIZE);
        return UCS_ERR_INVALID_PARAM;
    }

    info->handle_type = p[UCT_CUDA_IPC_NS_RKEY_OFF_TYPE];
    status = uct_cuda_ipc_ns_rkey_parse_handle(
            p + UCT_CUDA_IPC_NS_RKEY_OFF_HANDLE, info);
    if (status != UCS_OK) {
        return status;
    }

    packed_pid    = uct_cuda_ipc_ns_get_le32(p + UCT_CUDA_IPC_NS_RKEY_OFF_PID);
    info->pid     = packed_pid & ~UCT_CUDA_IPC_NS_RKEY_PID_EXT_FLAG;
    info->has_ext = !!(packed_pid & UCT_CUDA_IPC_NS_RKEY_PID_EXT_FLAG);
    info->base    = uct_cuda_ipc_ns_get_le64(p + UCT_CUDA_IPC_NS_RKEY_OFF_BASE);
    info->length  = uct_cuda_ipc_ns_get_le64(p + UCT_CUDA_IPC_NS_RKEY_OFF_LENGTH);
    memcpy(info->dev_uuid, p + UCT_CUDA_IPC_NS_RKEY_OFF_UUID,
           UCT_CUDA_IPC_NS_UUID_SIZE);

    if (!info->has_ext) {
        if (uct_cuda_ipc_ns_handle_needs_broker(info->handle_type)) {
            ucs_debug("cuda_ipc_ns: rkey parse: key of handle type %u without "
                      "extension (no broker address or token)",
                      info->handle_type);
            return UCS_ERR_INVALID_PARAM;
        }
        /* older writer; trailing bytes (zero padding) are not ours */
        return UCS_OK;
    }

    return uct_cuda_ipc_ns_rkey_parse_ext(p + UCT_CUDA_IPC_NS_RKEY_BASE_SIZE,
                                          length - UCT_CUDA_IPC_NS_RKEY_BASE_SIZE,
                                          info);
}
