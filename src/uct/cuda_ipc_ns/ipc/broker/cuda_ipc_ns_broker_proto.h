/*
 * cuda_ipc_ns: the fd broker's wire protocol and the fd-exchange settings
 * shared by the broker (server, cuda_ipc_ns_broker.h) and the importer
 * (client, cuda_ipc_ns_fdx.h). Byte diagrams and compatibility rules:
 * docs/wire-format.md; why each check exists: docs/security.md.
 *
 * One AF_UNIX SOCK_SEQPACKET message each way, little-endian:
 *
 *   request  (UCT_CUDA_IPC_NS_BROKER_REQ_SIZE = 32 bytes)
 *     u32  magic       UCT_CUDA_IPC_NS_BROKER_MAGIC ("cins")
 *     u16  version     UCT_CUDA_IPC_NS_BROKER_VERSION
 *     u16  op          UCT_CUDA_IPC_NS_BROKER_OP_GET_FD
 *     u64  alloc_id
 *     u8   token[16]
 *   reply    (UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE = 16 bytes), with one fd by
 *            SCM_RIGHTS when status is OK
 *     u32  magic
 *     u16  version
 *     u16  status      UCT_CUDA_IPC_NS_BROKER_STATUS_*
 *     u64  alloc_id    echoed from the request (0 when the request was
 *                      not read)
 *
 * Registrations of several allocations (docs/framework-memory.md) add a
 * LAYOUT request of UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE = 36 bytes: the
 * head above with op LAYOUT, the registration id in place of alloc_id, the
 * token, then
 *     u32  index       first chunk wanted
 *   LAYOUT reply: the 16-byte reply (alloc_id: the registration id), and
 *   when its status is OK
 *     u32  total       chunks of the registration
 *     u32  first       index of the first entry below
 *     u32  count       entries, 1..UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX
 *     count x { u64 offset, u64 size, u64 alloc_id }
 * and a GET_CHUNK_FDS request of UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE = 40
 * bytes: the LAYOUT request with op GET_CHUNK_FDS (index: the first chunk
 * wanted), then
 *     u32  count       chunks wanted, 1..UCT_CUDA_IPC_NS_BROKER_FDS_MAX
 *   GET_CHUNK_FDS reply: the 16-byte reply (alloc_id: the registration id),
 *   and when its status is OK
 *     u32  first       as asked
 *     u32  count       as asked
 *     count x u64 alloc_id   of each chunk, in order
 *   with the chunks' count fds, in order, in one SCM_RIGHTS header. A
 *   refusal is the 16-byte reply alone. (Op 3, GET_CHUNK_FD, one chunk per
 *   request, is retired: answered as an unknown op.)
 *
 * Copies made by the owner (docs/owner-copies.md): a COPY request of
 * UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE = 84 bytes, the head above with op
 * COPY and the registration id, the token, then
 *     u64  seq         the importer's number for the copy, echoed
 *     u64  offset      in the registration
 *     u64  length      bytes to copy, >= 1
 *     u64  buf_id      the importer's allocation id of its buffer
 *     u64  buf_size    that allocation's size, exactly
 *     u64  buf_offset  where the copy starts in it
 *     u16  direction   UCT_CUDA_IPC_NS_COPY_TO_IMPORTER (get) or
 *                      UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER (put)
 *     u16  flags       UCT_CUDA_IPC_NS_COPY_BUF_HOST: the buffer is host
 *                      memory (a sealed memfd), not a VMM allocation; an
 *                      unknown bit is a bad request
 *   with the buffer's POSIX fd by SCM_RIGHTS, or none when the owner holds
 *   that buffer from an earlier request on the same connection. The
 *   connection stays open for further COPY requests.
 *   COPY reply (UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE = 24 bytes): the
 *   16-byte reply (alloc_id: the registration id), then
 *     u64  seq         the request's
 *   sent when the copy is done, or refused; a refusal before the request
 *   was read (uid) is the plain 16-byte reply.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_PROTO_H
#define UCT_CUDA_IPC_NS_BROKER_PROTO_H

#include "cuda_ipc_ns_rkey.h"

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


#define UCT_CUDA_IPC_NS_BROKER_MAGIC        0x736e6963u /* "cins" */
#define UCT_CUDA_IPC_NS_BROKER_VERSION      1
#define UCT_CUDA_IPC_NS_BROKER_OP_GET_FD    1
#define UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT    2
/* 3 was GET_CHUNK_FD (one chunk per request), retired */
#define UCT_CUDA_IPC_NS_BROKER_OP_COPY      4
#define UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS 5
#define UCT_CUDA_IPC_NS_BROKER_REQ_SIZE     (4 + 2 + 2 + 8 + UCT_CUDA_IPC_NS_TOKEN_SIZE)
#define UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE (UCT_CUDA_IPC_NS_BROKER_REQ_SIZE + 4)
#define UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE (UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE + 4)
#define UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE   (4 + 2 + 2 + 8)
#define UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE \
    (UCT_CUDA_IPC_NS_BROKER_REQ_SIZE + 6 * 8 + 4)
#define UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE \
    (UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE + 8)
/* the longest request the broker reads */
#define UCT_CUDA_IPC_NS_BROKER_REQ_MAX      UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE
/* layout entries per reply: one reply stays a few KiB, sent at once */
#define UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX   128
#define UCT_CUDA_IPC_NS_BROKER_LAYOUT_HEAD_SIZE \
    (UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE + 4 + 4 + 4)
#define UCT_CUDA_IPC_NS_BROKER_LAYOUT_ENTRY_SIZE (8 + 8 + 8)
#define UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX \
    (UCT_CUDA_IPC_NS_BROKER_LAYOUT_HEAD_SIZE + \
     UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX * UCT_CUDA_IPC_NS_BROKER_LAYOUT_ENTRY_SIZE)
/* chunks per GET_CHUNK_FDS: one round trip imports this many, and an
 * importer holds at most this many fds at once (SCM_RIGHTS allows 253) */
#define UCT_CUDA_IPC_NS_BROKER_FDS_MAX      16
#define UCT_CUDA_IPC_NS_BROKER_FDS_HEAD_SIZE \
    (UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE + 4 + 4)
#define UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX \
    (UCT_CUDA_IPC_NS_BROKER_FDS_HEAD_SIZE + UCT_CUDA_IPC_NS_BROKER_FDS_MAX * 8)
/* chunks of one registration: 2,048 x 20 MiB is a 40 GiB KV cache; the
 * bound keeps a hostile key from making us allocate without end */
#define UCT_CUDA_IPC_NS_MAX_CHUNKS          (1u << 20)


/* UCX 1.13.1 has no UCS_ERR_NO_PERMISSION: permission refusals (pidfd_getfd
 * blocked, uid refused by the broker) are reported as this status */
#define UCT_CUDA_IPC_NS_ERR_NO_PERMISSION  UCS_ERR_REJECTED


typedef enum {
    UCT_CUDA_IPC_NS_BROKER_STATUS_OK          = 0,
    UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST = 1, /* malformed, bad magic/op */
    UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION = 2, /* protocol version */
    UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED      = 3, /* uid not allowed */
    UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY    = 4, /* unknown or released token */
    UCT_CUDA_IPC_NS_BROKER_STATUS_INTERNAL    = 5, /* broker-side failure */
    /* COPY: [offset, offset + length) is not within the registration */
    UCT_CUDA_IPC_NS_BROKER_STATUS_RANGE       = 6,
    /* COPY: the importer's buffer cannot be mapped by the owner (no fd and
     * none held, not exportable device memory, not buf_size bytes) */
    UCT_CUDA_IPC_NS_BROKER_STATUS_NO_BUFFER   = 7
} uct_cuda_ipc_ns_broker_proto_status_t;


/* Direction of a COPY, as the importer sees it */
typedef enum {
    UCT_CUDA_IPC_NS_COPY_TO_IMPORTER   = 1, /* get: registration -> buffer */
    UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER = 2  /* put: buffer -> registration */
} uct_cuda_ipc_ns_broker_proto_copy_dir_t;


/* Flags of a COPY request */
#define UCT_CUDA_IPC_NS_COPY_BUF_HOST       0x1 /* buffer: host memfd */
#define UCT_CUDA_IPC_NS_COPY_FLAGS_KNOWN    UCT_CUDA_IPC_NS_COPY_BUF_HOST

/* Importer buffers the owner keeps mapped per COPY connection, the most
 * recently named first: an importer may name again, without their fd, only
 * the buffers it can count on still being there */
#define UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX    16


/* The fields of a COPY request after its head */
typedef struct uct_cuda_ipc_ns_broker_proto_copy_args {
    uint64_t seq;
    uint64_t offset;
    uint64_t length;
    uint64_t buf_id;
    uint64_t buf_size;
    uint64_t buf_offset;
    uint16_t direction;  /* uct_cuda_ipc_ns_broker_proto_copy_dir_t */
    uint16_t flags;      /* UCT_CUDA_IPC_NS_COPY_BUF_* */
} uct_cuda_ipc_ns_broker_proto_copy_args_t;


/* A request as the broker reads it; token points into the received bytes */
typedef struct uct_cuda_ipc_ns_broker_proto_req {
    uint16_t                                 version;
    uint16_t                                 op;
    uint64_t                                 alloc_id;  /* LAYOUT, GET_CHUNK_FDS: the registration id */
    const uint8_t                            *token;
    uint32_t                                 index;     /* LAYOUT, GET_CHUNK_FDS: the first chunk */
    uint32_t                                 count;     /* GET_CHUNK_FDS: 1..UCT_CUDA_IPC_NS_BROKER_FDS_MAX */
    uct_cuda_ipc_ns_broker_proto_copy_args_t copy; /* COPY */
} uct_cuda_ipc_ns_broker_proto_req_t;


/* One allocation of a registration, at @a offset from its base */
typedef struct uct_cuda_ipc_ns_broker_proto_chunk {
    uint64_t offset;
    uint64_t size;
    uint64_t alloc_id;
} uct_cuda_ipc_ns_broker_proto_chunk_t;


/* The head of a GET_CHUNK_FDS reply, as the importer reads it */
typedef struct uct_cuda_ipc_ns_broker_proto_chunk_fds_reply {
    unsigned status;  /* UCT_CUDA_IPC_NS_BROKER_STATUS_* */
    uint64_t reg_id;
    uint32_t first;
    uint32_t count;
} uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t;


/* A page of a registration's layout, as the importer reads it */
typedef struct uct_cuda_ipc_ns_broker_proto_layout_page {
    unsigned status;  /* UCT_CUDA_IPC_NS_BROKER_STATUS_* */
    uint64_t reg_id;
    uint32_t total;
    uint32_t first;
    uint32_t count;
} uct_cuda_ipc_ns_broker_proto_layout_page_t;


typedef enum {
    UCT_CUDA_IPC_NS_FDX_AUTO,   /* pidfd in the same PID ns, else the broker */
    UCT_CUDA_IPC_NS_FDX_PIDFD,  /* pidfd_getfd only */
    UCT_CUDA_IPC_NS_FDX_BROKER, /* broker only */
    UCT_CUDA_IPC_NS_FDX_LAST
} uct_cuda_ipc_ns_broker_proto_fdx_mode_t;


/* "auto", "pidfd", "broker", NULL: for a UCS_CONFIG_TYPE_ENUM config field */
extern const char *uct_cuda_ipc_ns_fdx_mode_names[];


/* Fd-exchange settings of an MD: the broker serves with them, the importer
 * fetches with them (docs/configuration.md) */
typedef struct uct_cuda_ipc_ns_broker_proto_fdx_config {
    uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode;
    /* NULL or "": the broker listens on an abstract socket with a random
     * name (reachable only from the same network namespace). Otherwise a
     * pathname socket in this directory, which is created with mode 0700
     * when absent and refused when it is not owned by our effective uid or
     * grants any group/other permission. */
    const char                 *sock_dir;
    /* seconds; bounds a whole import, from connect to the fd */
    double                     timeout;
    /* seconds; the broker closes a connection that sent no request by then */
    double                     req_timeout;
    /* uid allowed, besides our own effective uid, to fetch fds from our
     * broker, and to be the uid of a broker we import from; -1 for none. A
     * pathname socket in a 0700 directory is reachable by another uid only
     * when that uid can traverse the directory (root). */
    int                        allowed_uid;
    /* nonzero: also serve, and import from, a peer whose uid our user
     * namespace does not map (cuda_ipc_ns_userns.h) */
    int                        userns_peers;
} uct_cuda_ipc_ns_broker_proto_fdx_config_t;


/* Client: write a GET_FD request (UCT_CUDA_IPC_NS_BROKER_REQ_SIZE bytes) */
void uct_cuda_ipc_ns_broker_proto_pack_request(uint8_t *buf, uint64_t alloc_id,
                                               const uint8_t *token);


/* Client: write a LAYOUT request (UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE
 * bytes) */
void uct_cuda_ipc_ns_broker_proto_pack_chunk_request(uint8_t *buf, uint16_t op,
                                                     uint64_t reg_id,
                                                     const uint8_t *token,
                                                     uint32_t index);


/* Client: write a GET_CHUNK_FDS request of chunks @a first..first+count-1
 * (UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE bytes) */
void uct_cuda_ipc_ns_broker_proto_pack_fds_request(uint8_t *buf, uint64_t reg_id,
                                                   const uint8_t *token,
                                                   uint32_t first, uint32_t count);


/**
 * Server: write an OK GET_CHUNK_FDS reply for chunks @a first..first+count-1
 * (count 1..UCT_CUDA_IPC_NS_BROKER_FDS_MAX) with their allocation ids into
 * @a buf of UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX bytes. @return its length.
 */
size_t uct_cuda_ipc_ns_broker_proto_pack_fds_reply(uint8_t *buf, uint64_t reg_id,
                                                   uint32_t first, uint32_t count,
                                                   const uint64_t *alloc_ids);


/**
 * Client: parse a GET_CHUNK_FDS reply of @a len bytes: either a plain reply
 * (an error status) or an OK one whose allocation ids go to @a alloc_ids
 * (room for UCT_CUDA_IPC_NS_BROKER_FDS_MAX). The fds that came with it are
 * the caller's to count against reply->count.
 *
 * @return UCS_OK with @a reply set, or UCS_ERR_INVALID_PARAM for a
 *         malformed reply (size, magic, count 0 or above the maximum, an
 *         OK status without entries, a refusal with more than the plain
 *         reply).
 */
ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(const uint8_t *buf,
                                                           size_t len,
                                                           uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t *reply,
                                                           uint64_t *alloc_ids);


/* Client: write a COPY request (UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE bytes) */
void uct_cuda_ipc_ns_broker_proto_pack_copy_request(uint8_t *buf, uint64_t reg_id,
                                                    const uint8_t *token,
                                                    const uct_cuda_ipc_ns_broker_proto_copy_args_t *copy);


/* Server: write a COPY reply (UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE bytes) */
void uct_cuda_ipc_ns_broker_proto_pack_copy_reply(uint8_t *buf,
                                                  uct_cuda_ipc_ns_broker_proto_status_t status,
                                                  uint64_t reg_id, uint64_t seq);


/**
 * Client: parse a COPY reply of @a len bytes.
 *
 * @return UCS_OK with *status_p, *reg_id_p and *seq_p set: a COPY reply,
 *         or a plain reply with an error status (a refusal at accept, or
 *         from a broker that knows no COPY; *seq_p is 0 then), or
 *         UCS_ERR_INVALID_PARAM for a malformed reply (size, magic, a plain
 *         reply saying OK).
 */
ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(const uint8_t *buf,
                                                            size_t len,
                                                            unsigned *status_p,
                                                            uint64_t *reg_id_p,
                                                            uint64_t *seq_p);


/**
 * Server: write an OK layout reply of @a count entries of @a chunks (the
 * registration's chunks @a first..first+count-1 of @a total) into @a buf of
 * UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX bytes. @return its length.
 */
size_t uct_cuda_ipc_ns_broker_proto_pack_layout(uint8_t *buf, uint64_t reg_id,
                                                uint32_t total, uint32_t first,
                                                uint32_t count,
                                                const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks);


/**
 * Client: parse a layout reply of @a len bytes: either a plain reply (an
 * error status) or an OK one whose entries go to @a chunks (room for
 * UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX).
 *
 * @return UCS_OK with @a page set, or UCS_ERR_INVALID_PARAM for a
 *         malformed reply (size, magic, count 0 or above the maximum, an
 *         OK status without entries).
 */
ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_layout(const uint8_t *buf, size_t len,
                                                        uct_cuda_ipc_ns_broker_proto_layout_page_t *page,
                                                        uct_cuda_ipc_ns_broker_proto_chunk_t *chunks);


/**
 * Whether @a chunks (@a count of them) tile [0, @a length) exactly: the
 * first at offset 0, each one where the previous ends, none empty, the last
 * ending at @a length, no offset or size wrapping around, and no allocation
 * id 0. An owner's answer is hostile until this holds.
 *
 * @return UCS_OK, or UCS_ERR_INVALID_PARAM with a debug line naming the
 *         first bad entry.
 */
ucs_status_t uct_cuda_ipc_ns_broker_proto_layout_check(const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                                       uint32_t count, uint64_t length);


/**
 * Server: parse a request of @a len bytes into @a req.
 *
 * @return UCT_CUDA_IPC_NS_BROKER_STATUS_OK, or the status to answer:
 *         BAD_REQUEST for a wrong size, magic or op (then req->alloc_id is 0
 *         unless the size and magic were right), a COPY whose own fields
 *         do not hold together (length 0, an unknown direction or flag, a buffer
 *         range that wraps or runs past buf_size), or a GET_CHUNK_FDS of
 *         count 0 or above UCT_CUDA_IPC_NS_BROKER_FDS_MAX; BAD_VERSION for another
 *         protocol version. The fields that could be read are set.
 */
uct_cuda_ipc_ns_broker_proto_status_t
uct_cuda_ipc_ns_broker_proto_unpack_request(const uint8_t *buf, size_t len,
                                            uct_cuda_ipc_ns_broker_proto_req_t *req);


/* Server: write a reply (UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE bytes) */
void uct_cuda_ipc_ns_broker_proto_pack_reply(uint8_t *buf,
                                             uct_cuda_ipc_ns_broker_proto_status_t status,
                                             uint64_t alloc_id);


/**
 * Client: parse a reply of @a len bytes.
 *
 * @return UCS_OK with *status_p (UCT_CUDA_IPC_NS_BROKER_STATUS_*) and
 *         *alloc_id_p set, or UCS_ERR_INVALID_PARAM for a malformed reply.
 */
ucs_status_t uct_cuda_ipc_ns_broker_proto_unpack_reply(const uint8_t *buf, size_t len,
                                                       unsigned *status_p,
                                                       uint64_t *alloc_id_p);


/* Client: map a broker status code to a UCS status */
ucs_status_t uct_cuda_ipc_ns_broker_proto_status_to_ucs(unsigned status);


/* Printable name of a broker status code */
const char *uct_cuda_ipc_ns_broker_proto_status_str(unsigned status);


/**
 * Printable form of a broker address (sun_path bytes, @a addr_len of them;
 * abstract names start with '\0' and are shown with '@', as ss(8) does).
 * @return @a buf, NUL-terminated.
 */
const char *uct_cuda_ipc_ns_broker_proto_addr_str(const char *addr, uint8_t addr_len,
                                                  char *buf, size_t max);

#endif
