/*
 * cuda_ipc_ns: per-process fd broker (DESIGN.md 4.3).
 *
 * One broker per process, shared by all MDs (refcounted). It listens on an
 * AF_UNIX SOCK_SEQPACKET socket (abstract name by default, or a pathname in
 * a 0700 directory) and hands a registered fd by SCM_RIGHTS to a requester
 * that (1) has our effective uid or the configured extra uid (SO_PEERCRED),
 * and (2) presents the 16-byte secret token of a live registration together
 * with its allocation id. Everything else is refused, logged once per peer.
 *
 * Wire protocol (little-endian, one SEQPACKET message each way):
 *
 *   request  (32 bytes)
 *     u32  magic       UCT_CUDA_IPC_NS_BROKER_MAGIC ("cins")
 *     u16  version     UCT_CUDA_IPC_NS_BROKER_VERSION
 *     u16  op          UCT_CUDA_IPC_NS_BROKER_OP_GET_FD
 *     u64  alloc_id
 *     u8   token[16]
 *   reply    (16 bytes), + SCM_RIGHTS with one fd when status is OK
 *     u32  magic
 *     u16  version
 *     u16  status      UCT_CUDA_IPC_NS_BROKER_STATUS_*
 *     u64  alloc_id    echoed from the request (0 when the request was
 *                      not read)
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_H
#define UCT_CUDA_IPC_NS_BROKER_H

#include "cuda_ipc_ns_fdx.h"

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


#define UCT_CUDA_IPC_NS_BROKER_MAGIC        0x736e6963u /* "cins" */
#define UCT_CUDA_IPC_NS_BROKER_VERSION      1
#define UCT_CUDA_IPC_NS_BROKER_OP_GET_FD    1
#define UCT_CUDA_IPC_NS_BROKER_REQ_SIZE     (4 + 2 + 2 + 8 + UCT_CUDA_IPC_NS_TOKEN_SIZE)
#define UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE   (4 + 2 + 2 + 8)


typedef enum {
    UCT_CUDA_IPC_NS_BROKER_STATUS_OK          = 0,
    UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST = 1, /* malformed, bad magic/op */
    UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION = 2, /* protocol version */
    UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED      = 3, /* uid not allowed */
    UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY    = 4, /* unknown or released token */
    UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL    = 5  /* broker-side failure */
} uct_cuda_ipc_ns_broker_status_t;


typedef struct uct_cuda_ipc_ns_broker     uct_cuda_ipc_ns_broker_t;
typedef struct uct_cuda_ipc_ns_broker_reg uct_cuda_ipc_ns_broker_reg_t;


/**
 * Get the broker of this process, starting it on first use. The first
 * caller's configuration (sock_dir, timeout, allowed_uid) is the one used.
 * After fork() the child never uses the parent's broker: it starts its own.
 */
ucs_status_t uct_cuda_ipc_ns_broker_get(const uct_cuda_ipc_ns_fdx_config_t *cfg,
                                        uct_cuda_ipc_ns_broker_t **broker_p);


/* Drop a reference; the last one stops the thread and removes the socket */
void uct_cuda_ipc_ns_broker_put(uct_cuda_ipc_ns_broker_t *broker);


/**
 * Address to put in remote keys: the sun_path bytes (abstract names start
 * with '\0', not NUL-terminated), *len_p <= 108.
 */
const char *uct_cuda_ipc_ns_broker_addr(uct_cuda_ipc_ns_broker_t *broker,
                                        uint8_t *len_p);


/**
 * Register @a fd (borrowed: the caller keeps it open until unregister) for
 * allocation @a alloc_id, with a fresh random token returned in @a token.
 */
ucs_status_t uct_cuda_ipc_ns_broker_register(uct_cuda_ipc_ns_broker_t *broker,
                                             int fd, uint64_t alloc_id,
                                             uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                             uct_cuda_ipc_ns_broker_reg_t **reg_p);


/**
 * Release a registration. Once this returns the broker never hands out that
 * fd again (a request being served finishes before, under the same lock), so
 * the caller may close it.
 */
void uct_cuda_ipc_ns_broker_unregister(uct_cuda_ipc_ns_broker_t *broker,
                                       uct_cuda_ipc_ns_broker_reg_t *reg);


/* Client side: write a GET_FD request (UCT_CUDA_IPC_NS_BROKER_REQ_SIZE bytes) */
void uct_cuda_ipc_ns_broker_pack_request(uint8_t *buf, uint64_t alloc_id,
                                         const uint8_t *token);


/**
 * Client side: parse a reply of @a len bytes.
 *
 * @return UCS_OK with *status_p (UCT_CUDA_IPC_NS_BROKER_STATUS_*) and
 *         *alloc_id_p set, or UCS_ERR_INVALID_PARAM for a malformed reply.
 */
ucs_status_t uct_cuda_ipc_ns_broker_unpack_reply(const uint8_t *buf, size_t len,
                                                 unsigned *status_p,
                                                 uint64_t *alloc_id_p);


/* Client side: map a broker status code to a UCS status */
ucs_status_t uct_cuda_ipc_ns_broker_status_to_ucs(unsigned status);


/* Printable name of a broker status code */
const char *uct_cuda_ipc_ns_broker_status_str(unsigned status);

#endif
