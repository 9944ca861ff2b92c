/*
 * cuda_ipc_ns: the importer's side of copies made by the owner (see
 * cuda_ipc_ns_copy_client.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_copy_client.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_scm.h"

#include <ucs/debug/log.h>

#include <sys/socket.h>
#include <inttypes.h>
#include <unistd.h>


ucs_status_t uct_cuda_ipc_ns_copy_client_open(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                              const uct_cuda_ipc_ns_rkey_info_t *key,
                                              int *sock_p)
{
    return uct_cuda_ipc_ns_fdx_broker_session(cfg, key, sock_p);
}


ucs_status_t uct_cuda_ipc_ns_copy_client_send(int sock, uint64_t reg_id,
                                              const uint8_t *token,
                                              const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy,
                                              int buf_fd, int flags)
{
    uint8_t req[UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE];

    uct_cuda_ipc_ns_broker_proto_pack_copy_request(req, reg_id, token, copy);
    return uct_cuda_ipc_ns_scm_send_fd(sock, req, sizeof(req), buf_fd,
                                       flags | MSG_NOSIGNAL);
}


ucs_status_t uct_cuda_ipc_ns_copy_client_recv_any(int sock, int flags,
                                                  uint64_t *reg_id_p,
                                                  uint64_t *seq_p,
                                                  ucs_status_t *op_status_p)
{
    uint8_t reply[UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE];
    ucs_status_t status;
    unsigned bstatus;
    size_t len;
    int fd;

    status = uct_cuda_ipc_ns_scm_recv_fd(sock, reply, sizeof(reply), flags,
                                         &len, &fd);
    if (status == UCS_ERR_MESSAGE_TRUNCATED || status == UCS_ERR_INVALID_PARAM) {
        ucs_error("cuda_ipc_ns: the owner's broker sent a malformed copy "
                  "answer (%s)", ucs_status_string(status));
        return UCS_ERR_IO_ERROR;
    } else if (status != UCS_OK) {
        return status;
    }

    if (fd >= 0) {
        close(fd);
        ucs_error("cuda_ipc_ns: the owner's broker sent an fd with a copy "
                  "answer: refused");
        return UCS_ERR_IO_ERROR;
    }

    if (uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(reply, len, &bstatus,
                                                       reg_id_p, seq_p) != UCS_OK) {
        ucs_error("cuda_ipc_ns: the owner's broker sent a malformed copy "
                  "answer (%zu bytes)", len);
        return UCS_ERR_IO_ERROR;
    }

    if (len != UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE) {
        /* a plain refusal (uid, old broker) carries no registration id */
        *reg_id_p = 0;
    }

    *op_status_p = uct_cuda_ipc_ns_broker_proto_status_to_ucs(bstatus);
    if (bstatus != UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        ucs_debug("cuda_ipc_ns: the owner's broker refused copy %" PRIu64
                  " of registration 0x%" PRIx64 ": %s", *seq_p, *reg_id_p,
                  uct_cuda_ipc_ns_broker_proto_status_str(bstatus));
    }
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_copy_client_recv(int sock, uint64_t reg_id,
                                              int flags, uint64_t *seq_p,
                                              ucs_status_t *op_status_p)
{
    uint64_t reply_reg_id;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_copy_client_recv_any(sock, flags, &reply_reg_id,
                                                  seq_p, op_status_p);
    if (status != UCS_OK) {
        return status;
    }

    /* a plain refusal carries no registration id: 0, seq 0, an error */
    if ((reply_reg_id != reg_id) &&
        ((reply_reg_id != 0) || (*seq_p != 0) || (*op_status_p == UCS_OK))) {
        ucs_error("cuda_ipc_ns: the owner's broker answered a copy of "
                  "registration 0x%" PRIx64 " for 0x%" PRIx64, reply_reg_id,
                  reg_id);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}
