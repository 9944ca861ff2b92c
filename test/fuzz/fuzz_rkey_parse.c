/*
 * cuda_ipc_ns: libFuzzer target for the rkey, address and broker message
 * parsers (docs/wire-format.md).
 *
 * Any input may be rejected; an accepted one must survive pack/parse
 * unchanged, otherwise abort() so the fuzzer records the input. Built with
 * clang -fsanitize=fuzzer, or with fuzz_replay_main.c where libFuzzer is
 * missing (see run_fuzz.sh).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_broker_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


#define FUZZ_CHECK(_cond) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "fuzz_rkey_parse: check failed: %s (line %d)\n", \
                    #_cond, __LINE__); \
            abort(); \
        } \
    } while (0)


/* Field by field: union and padding bytes of the host struct do not count */
static void fuzz_check_same_info(const uct_cuda_ipc_ns_rkey_info_t *a,
                                 const uct_cuda_ipc_ns_rkey_info_t *b)
{
    FUZZ_CHECK(a->handle_type == b->handle_type);
    if (a->handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) {
        FUZZ_CHECK(!memcmp(a->handle.legacy, b->handle.legacy,
                           UCT_CUDA_IPC_NS_HANDLE_SIZE));
    } else {
        FUZZ_CHECK(a->handle.posix.fd == b->handle.posix.fd);
        FUZZ_CHECK(a->handle.posix.alloc_id == b->handle.posix.alloc_id);
    }
    if (a->handle_type == UCT_CUDA_IPC_NS_HANDLE_CHUNKS) {
        FUZZ_CHECK(a->handle.posix.reg_id == b->handle.posix.reg_id);
        FUZZ_CHECK(a->handle.posix.num_chunks == b->handle.posix.num_chunks);
        FUZZ_CHECK(a->handle.posix.num_chunks != 0);
    }
    FUZZ_CHECK(a->pid == b->pid);
    FUZZ_CHECK(a->base == b->base);
    FUZZ_CHECK(a->length == b->length);
    FUZZ_CHECK(!memcmp(a->dev_uuid, b->dev_uuid, UCT_CUDA_IPC_NS_UUID_SIZE));
    FUZZ_CHECK(!!a->has_ext == !!b->has_ext);
    FUZZ_CHECK(a->pid_ns == b->pid_ns);
    FUZZ_CHECK(a->start_time == b->start_time);
    FUZZ_CHECK(!memcmp(a->token, b->token, UCT_CUDA_IPC_NS_TOKEN_SIZE));
    FUZZ_CHECK(a->broker_addr_len == b->broker_addr_len);
    FUZZ_CHECK(!memcmp(a->broker_addr, b->broker_addr, a->broker_addr_len));
}

static void fuzz_rkey(const uint8_t *data, size_t size)
{
    uint8_t packed[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uint8_t repacked[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info, info2;

    if (uct_cuda_ipc_ns_rkey_parse(data, size, &info) != UCS_OK) {
        return;
    }

    /* invariants of an accepted key */
    FUZZ_CHECK(!(info.pid & UCT_CUDA_IPC_NS_RKEY_PID_EXT_FLAG));
    FUZZ_CHECK(info.broker_addr_len <= UCT_CUDA_IPC_NS_BROKER_ADDR_MAX);
    FUZZ_CHECK((info.handle_type != UCT_CUDA_IPC_NS_HANDLE_POSIX_FD) ||
               info.has_ext);
    FUZZ_CHECK(!info.has_ext || (info.ext_version != 0));

    /* whatever is accepted can be packed, and reads back the same */
    FUZZ_CHECK(uct_cuda_ipc_ns_rkey_pack(&info, packed) == UCS_OK);
    FUZZ_CHECK(uct_cuda_ipc_ns_rkey_parse(packed, sizeof(packed), &info2) ==
               UCS_OK);
    fuzz_check_same_info(&info, &info2);
    /* this writer emits version 2 only for a legacy key its owner copies */
    FUZZ_CHECK(!info2.has_ext ||
               (info2.ext_version ==
                (((info2.handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) &&
                  (info2.broker_addr_len > 0)) ?
                 UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY :
                 UCT_CUDA_IPC_NS_RKEY_EXT_VERSION)));

    /* the packed form is canonical */
    FUZZ_CHECK(uct_cuda_ipc_ns_rkey_pack(&info2, repacked) == UCS_OK);
    FUZZ_CHECK(!memcmp(packed, repacked, sizeof(packed)));
}

static void fuzz_addr(const uint8_t *data, size_t size)
{
    uint8_t buf[UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE];
    uct_cuda_ipc_ns_addr_device_t dev;
    uct_cuda_ipc_ns_addr_iface_t iface;

    /* addresses have no spare bits: pack(parse(x)) is x's prefix */
    if (uct_cuda_ipc_ns_addr_device_parse(data, size, &dev) == UCS_OK) {
        FUZZ_CHECK(size >= UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);
        uct_cuda_ipc_ns_addr_device_pack(&dev, buf);
        FUZZ_CHECK(!memcmp(buf, data, UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE));
    } else {
        FUZZ_CHECK(size < UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);
    }

    if (uct_cuda_ipc_ns_addr_iface_parse(data, size, &iface) == UCS_OK) {
        FUZZ_CHECK(size >= UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);
        uct_cuda_ipc_ns_addr_iface_pack(&iface, buf);
        FUZZ_CHECK(!memcmp(buf, data, UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE));
    } else {
        FUZZ_CHECK(size < UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);
    }
}

/* Broker requests, layout, chunk-fds and copy replies: an accepted message repacks to
 * itself (but the version of a reply, which its parser does not read), and
 * a layout of any content is checked without a read past its entries */
static void fuzz_broker(const uint8_t *data, size_t size)
{
    static uct_cuda_ipc_ns_broker_proto_chunk_t chunks[UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX];
    static uint8_t buf[UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX];
    uint64_t alloc_ids[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
    uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t fds_reply;
    uct_cuda_ipc_ns_broker_proto_layout_page_t page;
    uct_cuda_ipc_ns_broker_proto_req_t req;
    uint64_t length = 0, reg_id, seq;
    unsigned status;
    uint32_t i;

    if (uct_cuda_ipc_ns_broker_proto_unpack_request(data, size, &req) ==
        UCT_CUDA_IPC_NS_BROKER_STATUS_OK) {
        if (req.op == UCT_CUDA_IPC_NS_BROKER_OP_GET_FD) {
            FUZZ_CHECK(size == UCT_CUDA_IPC_NS_BROKER_REQ_SIZE);
            uct_cuda_ipc_ns_broker_proto_pack_request(buf, req.alloc_id, req.token);
        } else if (req.op == UCT_CUDA_IPC_NS_BROKER_OP_COPY) {
            /* what the owner's copier relies on without checking again */
            FUZZ_CHECK(size == UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE);
            FUZZ_CHECK(req.copy.length >= 1);
            FUZZ_CHECK((req.copy.direction == UCT_CUDA_IPC_NS_COPY_TO_IMPORTER) ||
                       (req.copy.direction ==
                        UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER));
            FUZZ_CHECK(!(req.copy.flags & ~UCT_CUDA_IPC_NS_COPY_FLAGS_KNOWN));
            FUZZ_CHECK(req.copy.buf_offset <= req.copy.buf_size);
            FUZZ_CHECK(req.copy.length <=
                       req.copy.buf_size - req.copy.buf_offset);
            uct_cuda_ipc_ns_broker_proto_pack_copy_request(buf, req.alloc_id,
                                                           req.token, &req.copy);
        } else if (req.op == UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS) {
            /* what the broker's fd array relies on */
            FUZZ_CHECK(size == UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE);
            FUZZ_CHECK((req.count >= 1) &&
                       (req.count <= UCT_CUDA_IPC_NS_BROKER_FDS_MAX));
            uct_cuda_ipc_ns_broker_proto_pack_fds_request(buf, req.alloc_id,
                                                          req.token, req.index,
                                                          req.count);
        } else {
            FUZZ_CHECK(req.op == UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT);
            FUZZ_CHECK(size == UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE);
            uct_cuda_ipc_ns_broker_proto_pack_chunk_request(buf, req.op, req.alloc_id,
                                                            req.token, req.index);
        }
        FUZZ_CHECK(!memcmp(buf, data, size));
    }

    if (uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(data, size, &status, &reg_id,
                                                       &seq) == UCS_OK) {
        if (size == UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE) {
            /* a plain reply is only ever a refusal */
            FUZZ_CHECK(status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK);
            FUZZ_CHECK(seq == 0);
        } else {
            FUZZ_CHECK(size == UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE);
            uct_cuda_ipc_ns_broker_proto_pack_copy_reply(buf, status, reg_id, seq);
            FUZZ_CHECK(!memcmp(buf, data, 4) &&
                       !memcmp(buf + 6, data + 6, size - 6));
        }
    }

    if ((uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(data, size, &fds_reply,
                                                       alloc_ids) == UCS_OK) &&
        (fds_reply.status == UCT_CUDA_IPC_NS_BROKER_STATUS_OK)) {
        /* what the importer's fd count check relies on */
        FUZZ_CHECK((fds_reply.count >= 1) &&
                   (fds_reply.count <= UCT_CUDA_IPC_NS_BROKER_FDS_MAX));
        FUZZ_CHECK(uct_cuda_ipc_ns_broker_proto_pack_fds_reply(buf, fds_reply.reg_id,
                                                               fds_reply.first,
                                                               fds_reply.count,
                                                               alloc_ids) == size);
        FUZZ_CHECK(!memcmp(buf, data, 4) &&
                   !memcmp(buf + 6, data + 6, size - 6));
    }

    if ((uct_cuda_ipc_ns_broker_proto_unpack_layout(data, size, &page, chunks) !=
         UCS_OK) || (page.status != UCT_CUDA_IPC_NS_BROKER_STATUS_OK)) {
        return;
    }

    FUZZ_CHECK((page.count >= 1) &&
               (page.count <= UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX));
    FUZZ_CHECK(uct_cuda_ipc_ns_broker_proto_pack_layout(buf, page.reg_id,
                                                        page.total, page.first,
                                                        page.count, chunks) == size);
    FUZZ_CHECK(!memcmp(buf, data, 4) && !memcmp(buf + 6, data + 6, size - 6));
    for (i = 0; i < page.count; ++i) {
        length += chunks[i].size;
    }
    (void)uct_cuda_ipc_ns_broker_proto_layout_check(chunks, page.count, length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_rkey(data, size);
    fuzz_addr(data, size);
    fuzz_broker(data, size);
    return 0;
}
