/*
 * cuda_ipc_ns: the fd broker's wire protocol (see cuda_ipc_ns_broker_proto.h
 * and docs/wire-format.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_byteorder.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <inttypes.h>
#include <string.h>


/* Offsets in both messages */
#define UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC     0
#define UCT_CUDA_IPC_NS_BROKER_OFF_VERSION   4
#define UCT_CUDA_IPC_NS_BROKER_OFF_OP        6  /* request */
#define UCT_CUDA_IPC_NS_BROKER_OFF_STATUS    6  /* reply */
#define UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID  8
#define UCT_CUDA_IPC_NS_BROKER_OFF_TOKEN     16 /* request */
#define UCT_CUDA_IPC_NS_BROKER_OFF_INDEX     32 /* chunk requests */
#define UCT_CUDA_IPC_NS_BROKER_OFF_REQ_COUNT 36 /* GET_CHUNK_FDS request */
#define UCT_CUDA_IPC_NS_BROKER_OFF_TOTAL     16 /* layout reply */
#define UCT_CUDA_IPC_NS_BROKER_OFF_FIRST     20
#define UCT_CUDA_IPC_NS_BROKER_OFF_COUNT     24
#define UCT_CUDA_IPC_NS_BROKER_OFF_ENTRIES   28
#define UCT_CUDA_IPC_NS_BROKER_OFF_COPY      32 /* COPY request fields */
#define UCT_CUDA_IPC_NS_BROKER_OFF_SEQ       16 /* COPY reply */
#define UCT_CUDA_IPC_NS_BROKER_OFF_FDS_FIRST 16 /* GET_CHUNK_FDS reply */
#define UCT_CUDA_IPC_NS_BROKER_OFF_FDS_COUNT 20
#define UCT_CUDA_IPC_NS_BROKER_OFF_FDS_IDS   24


const char *uct_cuda_ipc_ns_fdx_mode_names[] = {
    [UCT_CUDA_IPC_NS_FDX_AUTO]   = "auto",
    [UCT_CUDA_IPC_NS_FDX_PIDFD]  = "pidfd",
    [UCT_CUDA_IPC_NS_FDX_BROKER] = "broker",
    [UCT_CUDA_IPC_NS_FDX_LAST]   = NULL
};


/* Magic, version and a 16-bit field: the common head of both messages */
static void uct_cuda_ipc_ns_broker_pack_head(uint8_t *buf, uint16_t field,
                                             uint64_t alloc_id)
{
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC,
                             UCT_CUDA_IPC_NS_BROKER_MAGIC);
    uct_cuda_ipc_ns_put_le16(buf + UCT_CUDA_IPC_NS_BROKER_OFF_VERSION,
                             UCT_CUDA_IPC_NS_BROKER_VERSION);
    uct_cuda_ipc_ns_put_le16(buf + UCT_CUDA_IPC_NS_BROKER_OFF_OP, field);
    uct_cuda_ipc_ns_put_le64(buf + UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID,
                             alloc_id);
}


static int uct_cuda_ipc_ns_broker_magic_ok(const uint8_t *buf, size_t len,
                                           size_t size)
{
    return (len == size) &&
           (uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC) ==
            UCT_CUDA_IPC_NS_BROKER_MAGIC);
}


void uct_cuda_ipc_ns_broker_proto_pack_request(uint8_t *buf, uint64_t alloc_id,
                                               const uint8_t *token)
{
    uct_cuda_ipc_ns_broker_pack_head(buf, UCT_CUDA_IPC_NS_BROKER_OP_GET_FD,
                                     alloc_id);
    memcpy(buf + UCT_CUDA_IPC_NS_BROKER_OFF_TOKEN, token,
           UCT_CUDA_IPC_NS_TOKEN_SIZE);
}


void uct_cuda_ipc_ns_broker_proto_pack_chunk_request(uint8_t *buf, uint16_t op,
                                                     uint64_t reg_id,
                                                     const uint8_t *token,
                                                     uint32_t index)
{
    uct_cuda_ipc_ns_broker_pack_head(buf, op, reg_id);
    memcpy(buf + UCT_CUDA_IPC_NS_BROKER_OFF_TOKEN, token,
           UCT_CUDA_IPC_NS_TOKEN_SIZE);
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_INDEX, index);
}


void uct_cuda_ipc_ns_broker_proto_pack_fds_request(uint8_t *buf, uint64_t reg_id,
                                                   const uint8_t *token,
                                                   uint32_t first, uint32_t count)
{
    uct_cuda_ipc_ns_broker_proto_pack_chunk_request(
            buf, UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS, reg_id, token, first);
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_REQ_COUNT, count);
}


size_t uct_cuda_ipc_ns_broker_proto_pack_fds_reply(uint8_t *buf, uint64_t reg_id,
                                                   uint32_t first, uint32_t count,
                                                   const uint64_t *alloc_ids)
{
    uint8_t *entry = buf + UCT_CUDA_IPC_NS_BROKER_OFF_FDS_IDS;
    uint32_t i;

    uct_cuda_ipc_ns_broker_pack_head(buf, UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                                     reg_id);
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_FDS_FIRST, first);
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_FDS_COUNT, count);
    for (i = 0; i < count; ++i) {
        uct_cuda_ipc_ns_put_le64(entry, alloc_ids[i]);
        entry += 8;
    }
    return UCS_PTR_BYTE_DIFF(buf, entry);
}


ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(const uint8_t *buf,
                                                           size_t len,
                                                           uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t *reply,
                                                           uint64_t *alloc_ids)
{
    const uint8_t *entry = buf + UCT_CUDA_IPC_NS_BROKER_OFF_FDS_IDS;
    uint32_t i;

    memset(reply, 0, sizeof(*reply));
    if ((len < UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE) ||
        (uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC) !=
         UCT_CUDA_IPC_NS_BROKER_MAGIC)) {
        return UCS_ERR_INVALID_PARAM;
    }

    reply->status = uct_cuda_ipc_ns_get_le16(buf +
                                             UCT_CUDA_IPC_NS_BROKER_OFF_STATUS);
    reply->reg_id = uct_cuda_ipc_ns_get_le64(buf +
                                             UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID);
    if (reply->status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        /* a refusal is a plain reply */
        return (len == UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE) ? UCS_OK :
               UCS_ERR_INVALID_PARAM;
    }

    if (len < UCT_CUDA_IPC_NS_BROKER_FDS_HEAD_SIZE) {
        return UCS_ERR_INVALID_PARAM;
    }
    reply->first = uct_cuda_ipc_ns_get_le32(buf +
                                            UCT_CUDA_IPC_NS_BROKER_OFF_FDS_FIRST);
    reply->count = uct_cuda_ipc_ns_get_le32(buf +
                                            UCT_CUDA_IPC_NS_BROKER_OFF_FDS_COUNT);
    if ((reply->count == 0) ||
        (reply->count > UCT_CUDA_IPC_NS_BROKER_FDS_MAX) ||
        (len != UCT_CUDA_IPC_NS_BROKER_FDS_HEAD_SIZE + (size_t)reply->count * 8)) {
        return UCS_ERR_INVALID_PARAM;
    }

    for (i = 0; i < reply->count; ++i) {
        alloc_ids[i] = uct_cuda_ipc_ns_get_le64(entry);
        entry       += 8;
    }
    return UCS_OK;
}


void uct_cuda_ipc_ns_broker_proto_pack_copy_request(uint8_t *buf, uint64_t reg_id,
                                                    const uint8_t *token,
                                                    const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy)
{
    uint8_t *p = buf + UCT_CUDA_IPC_NS_BROKER_OFF_COPY;

    uct_cuda_ipc_ns_broker_pack_head(buf, UCT_CUDA_IPC_NS_BROKER_OP_COPY,
                                     reg_id);
    memcpy(buf + UCT_CUDA_IPC_NS_BROKER_OFF_TOKEN, token,
           UCT_CUDA_IPC_NS_TOKEN_SIZE);
    uct_cuda_ipc_ns_put_le64(p, copy->seq);
    uct_cuda_ipc_ns_put_le64(p + 8, copy->offset);
    uct_cuda_ipc_ns_put_le64(p + 16, copy->length);
    uct_cuda_ipc_ns_put_le64(p + 24, copy->buf_id);
    uct_cuda_ipc_ns_put_le64(p + 32, copy->buf_size);
    uct_cuda_ipc_ns_put_le64(p + 40, copy->buf_offset);
    uct_cuda_ipc_ns_put_le16(p + 48, copy->direction);
    uct_cuda_ipc_ns_put_le16(p + 50, copy->flags);
}


/* Read the fields of a COPY request; BAD_REQUEST when they do not hold
 * together by themselves (the registration's range is the broker's check) */
static uct_cuda_ipc_ns_broker_proto_status_t
uct_cuda_ipc_ns_broker_unpack_copy(const uint8_t *buf,
                                   uct_cuda_ipc_ns_broker_proto_copy_args_t *copy)
{
    const uint8_t *p = buf + UCT_CUDA_IPC_NS_BROKER_OFF_COPY;

    copy->seq        = uct_cuda_ipc_ns_get_le64(p);
    copy->offset     = uct_cuda_ipc_ns_get_le64(p + 8);
    copy->length     = uct_cuda_ipc_ns_get_le64(p + 16);
    copy->buf_id     = uct_cuda_ipc_ns_get_le64(p + 24);
    copy->buf_size   = uct_cuda_ipc_ns_get_le64(p + 32);
    copy->buf_offset = uct_cuda_ipc_ns_get_le64(p + 40);
    copy->direction  = uct_cuda_ipc_ns_get_le16(p + 48);
    copy->flags      = uct_cuda_ipc_ns_get_le16(p + 50);
    if ((copy->length == 0) ||
        (copy->flags & ~UCT_CUDA_IPC_NS_COPY_FLAGS_KNOWN) ||
        ((copy->direction != UCT_CUDA_IPC_NS_COPY_TO_IMPORTER) &&
         (copy->direction != UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER)) ||
        (copy->buf_offset > copy->buf_size) ||
        (copy->length > copy->buf_size - copy->buf_offset)) {
        return UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST;
    }
    return UCT_CUDA_IPC_NS_BROKER_STATUS_OK;
}


void uct_cuda_ipc_ns_broker_proto_pack_copy_reply(uint8_t *buf,
                                                  uct_cuda_ipc_ns_broker_proto_status_t status,
                                                  uint64_t reg_id, uint64_t seq)
{
    uct_cuda_ipc_ns_broker_pack_head(buf, status, reg_id);
    uct_cuda_ipc_ns_put_le64(buf + UCT_CUDA_IPC_NS_BROKER_OFF_SEQ, seq);
}


ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(const uint8_t *buf,
                                                            size_t len,
                                                            unsigned *status_p,
                                                            uint64_t *reg_id_p,
                                                            uint64_t *seq_p)
{
    if ((len < UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE) ||
        (uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC) !=
         UCT_CUDA_IPC_NS_BROKER_MAGIC)) {
        return UCS_ERR_INVALID_PARAM;
    }

    *status_p = uct_cuda_ipc_ns_get_le16(buf + UCT_CUDA_IPC_NS_BROKER_OFF_STATUS);
    *reg_id_p = uct_cuda_ipc_ns_get_le64(buf +
                                         UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID);
    if (len == UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE) {
        /* a refusal before the request was taken as a COPY: plain reply */
        *seq_p = 0;
        return (*status_p != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) ? UCS_OK :
               UCS_ERR_INVALID_PARAM;
    } else if (len != UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE) {
        return UCS_ERR_INVALID_PARAM;
    }

    *seq_p = uct_cuda_ipc_ns_get_le64(buf + UCT_CUDA_IPC_NS_BROKER_OFF_SEQ);
    return UCS_OK;
}


/* Size of a request of @a op, 0 for an unknown op */
static size_t uct_cuda_ipc_ns_broker_req_size(uint16_t op)
{
    switch (op) {
    case UCT_CUDA_IPC_NS_BROKER_OP_GET_FD:
        return UCT_CUDA_IPC_NS_BROKER_REQ_SIZE;
    case UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT:
        return UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE;
    case UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS:
        return UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE;
    case UCT_CUDA_IPC_NS_BROKER_OP_COPY:
        return UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE;
    default:
        return 0;
    }
}


uct_cuda_ipc_ns_broker_proto_status_t
uct_cuda_ipc_ns_broker_proto_unpack_request(const uint8_t *buf, size_t len,
                                            uct_cuda_ipc_ns_broker_proto_req_t *req)
{
    memset(req, 0, sizeof(*req));
    /* every request is at least a GET_FD request: magic, version, op */
    if ((len < UCT_CUDA_IPC_NS_BROKER_REQ_SIZE) ||
        (uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC) !=
         UCT_CUDA_IPC_NS_BROKER_MAGIC)) {
        return UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST;
    }

    req->version  = uct_cuda_ipc_ns_get_le16(buf +
                                             UCT_CUDA_IPC_NS_BROKER_OFF_VERSION);
    req->op       = uct_cuda_ipc_ns_get_le16(buf + UCT_CUDA_IPC_NS_BROKER_OFF_OP);
    req->alloc_id = uct_cuda_ipc_ns_get_le64(buf +
                                             UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID);
    req->token    = buf + UCT_CUDA_IPC_NS_BROKER_OFF_TOKEN;
    /* the version decides how to read the rest, so it is checked first */
    if (req->version != UCT_CUDA_IPC_NS_BROKER_VERSION) {
        return UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION;
    }
    if (uct_cuda_ipc_ns_broker_req_size(req->op) != len) {
        /* an unknown op, or a known one of the wrong size */
        return UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST;
    }
    if (req->op == UCT_CUDA_IPC_NS_BROKER_OP_COPY) {
        return uct_cuda_ipc_ns_broker_unpack_copy(buf, &req->copy);
    } else if (req->op == UCT_CUDA_IPC_NS_BROKER_OP_GET_FD) {
        return UCT_CUDA_IPC_NS_BROKER_STATUS_OK;
    }

    req->index = uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_INDEX);
    if (req->op == UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS) {
        req->count = uct_cuda_ipc_ns_get_le32(buf +
                                              UCT_CUDA_IPC_NS_BROKER_OFF_REQ_COUNT);
        if ((req->count == 0) ||
            (req->count > UCT_CUDA_IPC_NS_BROKER_FDS_MAX)) {
            return UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST;
        }
    }
    return UCT_CUDA_IPC_NS_BROKER_STATUS_OK;
}


void uct_cuda_ipc_ns_broker_proto_pack_reply(uint8_t *buf,
                                             uct_cuda_ipc_ns_broker_proto_status_t status,
                                             uint64_t alloc_id)
{
    uct_cuda_ipc_ns_broker_pack_head(buf, status, alloc_id);
}


ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_reply(const uint8_t *buf, size_t len,
                                                       unsigned *status_p,
                                                       uint64_t *alloc_id_p)
{
    if (!uct_cuda_ipc_ns_broker_magic_ok(buf, len,
                                         UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE)) {
        return UCS_ERR_INVALID_PARAM;
    }

    /* a reply of another version still carries a meaningful status code in
     * this layout; the version only matters to the request */
    *status_p   = uct_cuda_ipc_ns_get_le16(buf +
                                           UCT_CUDA_IPC_NS_BROKER_OFF_STATUS);
    *alloc_id_p = uct_cuda_ipc_ns_get_le64(buf +
                                           UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID);
    return UCS_OK;
}


size_t uct_cuda_ipc_ns_broker_proto_pack_layout(uint8_t *buf, uint64_t reg_id,
                                                uint32_t total, uint32_t first,
                                                uint32_t count,
                                                const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks)
{
    uint8_t *entry = buf + UCT_CUDA_IPC_NS_BROKER_OFF_ENTRIES;
    uint32_t i;

    uct_cuda_ipc_ns_broker_pack_head(buf, UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                                     reg_id);
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_TOTAL, total);
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_FIRST, first);
    uct_cuda_ipc_ns_put_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_COUNT, count);
    for (i = 0; i < count; ++i) {
        uct_cuda_ipc_ns_put_le64(entry, chunks[i].offset);
        uct_cuda_ipc_ns_put_le64(entry + 8, chunks[i].size);
        uct_cuda_ipc_ns_put_le64(entry + 16, chunks[i].alloc_id);
        entry += UCT_CUDA_IPC_NS_BROKER_LAYOUT_ENTRY_SIZE;
    }
    return UCS_PTR_BYTE_DIFF(buf, entry);
}


ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_layout(const uint8_t *buf, size_t len,
                                                        uct_cuda_ipc_ns_broker_proto_layout_page_t *page,
                                                        uct_cuda_ipc_ns_broker_proto_chunk_t *chunks)
{
    const uint8_t *entry = buf + UCT_CUDA_IPC_NS_BROKER_OFF_ENTRIES;
    uint32_t i;

    memset(page, 0, sizeof(*page));
    if ((len < UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE) ||
        (uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC) !=
         UCT_CUDA_IPC_NS_BROKER_MAGIC)) {
        return UCS_ERR_INVALID_PARAM;
    }

    page->status = uct_cuda_ipc_ns_get_le16(buf +
                                            UCT_CUDA_IPC_NS_BROKER_OFF_STATUS);
    page->reg_id = uct_cuda_ipc_ns_get_le64(buf +
                                            UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID);
    if (page->status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        /* a refusal is a plain reply */
        return (len == UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE) ? UCS_OK :
               UCS_ERR_INVALID_PARAM;
    }

    if (len < UCT_CUDA_IPC_NS_BROKER_LAYOUT_HEAD_SIZE) {
        return UCS_ERR_INVALID_PARAM;
    }
    page->total = uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_TOTAL);
    page->first = uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_FIRST);
    page->count = uct_cuda_ipc_ns_get_le32(buf + UCT_CUDA_IPC_NS_BROKER_OFF_COUNT);
    if ((page->count == 0) ||
        (page->count > UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX) ||
        (len != UCT_CUDA_IPC_NS_BROKER_LAYOUT_HEAD_SIZE +
                (size_t)page->count * UCT_CUDA_IPC_NS_BROKER_LAYOUT_ENTRY_SIZE)) {
        return UCS_ERR_INVALID_PARAM;
    }

    for (i = 0; i < page->count; ++i) {
        chunks[i].offset   = uct_cuda_ipc_ns_get_le64(entry);
        chunks[i].size     = uct_cuda_ipc_ns_get_le64(entry + 8);
        chunks[i].alloc_id = uct_cuda_ipc_ns_get_le64(entry + 16);
        entry += UCT_CUDA_IPC_NS_BROKER_LAYOUT_ENTRY_SIZE;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_broker_proto_layout_check(const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                                       uint32_t count, uint64_t length)
{
    uint64_t end = 0;
    uint32_t i;

    for (i = 0; i < count; ++i) {
        if ((chunks[i].offset != end) || (chunks[i].size == 0) ||
            (chunks[i].size > length - end) || (chunks[i].alloc_id == 0)) {
            ucs_debug("cuda_ipc_ns: layout chunk %u of %u (offset 0x%" PRIx64
                      ", size 0x%" PRIx64 ", alloc_id 0x%" PRIx64 ") does not "
                      "follow offset 0x%" PRIx64 " within 0x%" PRIx64 " bytes",
                      i, count, chunks[i].offset, chunks[i].size,
                      chunks[i].alloc_id, end, length);
            return UCS_ERR_INVALID_PARAM;
        }
        end += chunks[i].size;
    }

    if ((count == 0) || (end != length)) {
        ucs_debug("cuda_ipc_ns: layout of %u chunks covers 0x%" PRIx64 " of "
                  "0x%" PRIx64 " bytes", count, end, length);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_broker_proto_status_to_ucs(unsigned status)
{
    switch (status) {
    case UCT_CUDA_IPC_NS_BROKER_STATUS_OK:
        return UCS_OK;
    case UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED:
        return UCT_CUDA_IPC_NS_ERR_NO_PERMISSION;
    case UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY:
        return UCS_ERR_NO_ELEM;
    case UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION:
        return UCS_ERR_UNSUPPORTED;
    case UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST:
    case UCT_CUDA_IPC_NS_BROKER_STATUS_RANGE:
        return UCS_ERR_INVALID_PARAM;
    case UCT_CUDA_IPC_NS_BROKER_STATUS_NO_BUFFER:
        return UCS_ERR_UNSUPPORTED;
    default:
        return UCS_ERR_IO_ERROR;
    }
}


const char *uct_cuda_ipc_ns_broker_proto_status_str(unsigned status)
{
    switch (status) {
    case UCT_CUDA_IPC_NS_BROKER_STATUS_OK:          return "ok";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST: return "malformed request";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION: return "unsupported version";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED:      return "uid not allowed";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY:    return "unknown or released token";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_RANGE:       return "out of the registration's range";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_NO_BUFFER:   return "importer's buffer not mappable";
    default:                                         return "internal error";
    }
}


const char *uct_cuda_ipc_ns_broker_proto_addr_str(const char *addr, uint8_t addr_len,
                                                  char *buf, size_t max)
{
    size_t i, pos = 0;

    if (max == 0) {
        return buf;
    }

    for (i = 0; (i < addr_len) && (pos + 1 < max); ++i) {
        if ((i == 0) && (addr[0] == '\0')) {
            buf[pos++] = '@'; /* abstract name, as ss(8) prints it */
        } else if ((addr[i] >= 0x20) && (addr[i] < 0x7f)) {
            buf[pos++] = addr[i];
        } else {
            buf[pos++] = '?';
        }
    }
    buf[pos] = '\0';
    return buf;
}
