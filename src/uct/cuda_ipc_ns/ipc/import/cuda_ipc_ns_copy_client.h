/*
 * cuda_ipc_ns: the importer's side of copies made by the owner
 * (docs/owner-copies.md).
 *
 * A session is one connection to the owner's broker, checked as the key's
 * owner before anything is sent; it carries COPY requests, each with the
 * fd of the importer's buffer (exportable VMM memory) or none when the
 * owner holds that buffer already, and the answers that come when each copy
 * is done, in any order (matched by seq). Sending and receiving take flags
 * (MSG_DONTWAIT) so that a caller can drive them from progress.
 */
#ifndef UCT_CUDA_IPC_NS_COPY_CLIENT_H
#define UCT_CUDA_IPC_NS_COPY_CLIENT_H

#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>
#include <stdint.h>


/**
 * Open a session to the broker of @a key (broker_addr, token, owner
 * identity), authenticated as uct_cuda_ipc_ns_fdx_broker_session() does.
 * @return UCS_OK with *sock_p, or its statuses.
 */
ucs_status_t uct_cuda_ipc_ns_copy_client_open(const uct_cuda_ipc_ns_broker_proto_fdx_config_t *cfg,
                                              const uct_cuda_ipc_ns_rkey_info_t *key,
                                              int *sock_p);


/**
 * Ask for the copy @a copy of registration @a reg_id (@a token), with the
 * buffer's fd @a buf_fd (borrowed; -1 when the owner holds it already).
 * @return UCS_OK, or the status of uct_cuda_ipc_ns_scm_send_fd().
 */
ucs_status_t uct_cuda_ipc_ns_copy_client_send(int sock, uint64_t reg_id,
                                              const uint8_t *token,
                                              const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy,
                                              int buf_fd, int flags);


/**
 * Receive one answer: *seq_p the copy's, *op_status_p UCS_OK when it was
 * done, else the refusal as a UCS status (debug line naming it).
 * @return UCS_OK when an answer came; UCS_ERR_TIMED_OUT when none is there
 *         (MSG_DONTWAIT) or SO_RCVTIMEO expired; UCS_ERR_CONNECTION_RESET
 *         when the owner closed; UCS_ERR_IO_ERROR for a malformed answer, one
 *         for another registration or one carrying an fd.
 */
/**
 * Receive one answer of a session that carries copies of several
 * registrations: as uct_cuda_ipc_ns_copy_client_recv(), with the answer's
 * registration id in *reg_id_p for the caller to check (a plain refusal,
 * sent before any request was read, has seq 0).
 */
ucs_status_t uct_cuda_ipc_ns_copy_client_recv_any(int sock, int flags,
                                                  uint64_t *reg_id_p,
                                                  uint64_t *seq_p,
                                                  ucs_status_t *op_status_p);


ucs_status_t uct_cuda_ipc_ns_copy_client_recv(int sock, uint64_t reg_id,
                                              int flags, uint64_t *seq_p,
                                              ucs_status_t *op_status_p);

#endif
