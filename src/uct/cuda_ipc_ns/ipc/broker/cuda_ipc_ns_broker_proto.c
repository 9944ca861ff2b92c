/*
 * cuda_ipc_ns: the fd broker's wire protocol (see cuda_ipc_ns_broker_proto.h
 * and docs/wire-format.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_byteorder.h"

#include <string.h>


/* Offsets in both messages */
#define UCT_CUDA_IPC_NS_BROKER_OFF_MAGIC     0
#define UCT_CUDA_IPC_NS_BROKER_OFF_VERSION   4
#define UCT_CUDA_IPC_NS_BROKER_OFF_OP        6  /* request */
#define UCT_CUDA_IPC_NS_BROKER_OFF_STATUS    6  /* reply */
#define UCT_CUDA_IPC_NS_BROKER_OFF_ALLOC_ID  8
#define UCT_CUDA_IPC_NS_BROKER_OFF_TOKEN     16 /* request */


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


void uct_cuda_ipc_ns_broker_pack_request(uint8_t *buf, uint64_t alloc_id,
                                         const uint8_t *token)
{
    uct_cuda_ipc_ns_broker_pack_head(buf, UCT_CUDA_IPC_NS_BROKER_OP_GET_FD,
                                     alloc_id);
    memcpy(buf + UCT_CUDA_IPC_NS_BROKER_OFF_TOKEN, token,
           UCT_CUDA_IPC_NS_TOKEN_SIZE);
}


uct_cuda_ipc_ns_broker_status_t
uct_cuda_ipc_ns_broker_unpack_request(const uint8_t *buf, size_t len,
                                      uct_cuda_ipc_ns_broker_req_t *req)
{
    memset(req, 0, sizeof(*req));
    if (!uct_cuda_ipc_ns_broker_magic_ok(buf, len,
                                         UCT_CUDA_IPC_NS_BROKER_REQ_SIZE)) {
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
    if (req->op != UCT_CUDA_IPC_NS_BROKER_OP_GET_FD) {
        return UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST;
    }
    return UCT_CUDA_IPC_NS_BROKER_STATUS_OK;
}


void uct_cuda_ipc_ns_broker_pack_reply(uint8_t *buf,
                                       uct_cuda_ipc_ns_broker_status_t status,
                                       uint64_t alloc_id)
{
    uct_cuda_ipc_ns_broker_pack_head(buf, status, alloc_id);
}


ucs_status_t uct_cuda_ipc_ns_broker_unpack_reply(const uint8_t *buf, size_t len,
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


ucs_status_t uct_cuda_ipc_ns_broker_status_to_ucs(unsigned status)
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
        return UCS_ERR_INVALID_PARAM;
    default:
        return UCS_ERR_IO_ERROR;
    }
}


const char *uct_cuda_ipc_ns_broker_status_str(unsigned status)
{
    switch (status) {
    case UCT_CUDA_IPC_NS_BROKER_STATUS_OK:          return "ok";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST: return "malformed request";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION: return "unsupported version";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED:      return "uid not allowed";
    case UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY:    return "unknown or released token";
    default:                                         return "internal error";
    }
}


const char *uct_cuda_ipc_ns_fdx_addr_str(const char *addr, uint8_t addr_len,
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
