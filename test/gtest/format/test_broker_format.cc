/*
 * cuda_ipc_ns: the broker's requests and replies for registrations of
 * several allocations (docs/wire-format.md, "Broker protocol"): golden
 * vectors written by hand from cuda_ipc_ns_broker_proto.h, refusal of
 * malformed replies, and the check of a layout an owner answers
 * (docs/framework-memory.md); the batched chunk-fd request and its reply;
 * the COPY request and its answer
 * (docs/owner-copies.md).
 */
#include <gtest/gtest.h>

extern "C" {
#include "cuda_ipc_ns_broker_proto.h"
}

#include <stdint.h>
#include <string.h>
#include <vector>


namespace {

typedef std::vector<uint8_t> bytes_t;

#define TOKEN_BYTES \
    0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, \
    0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf

const uint8_t token[] = {TOKEN_BYTES};

/* LAYOUT of registration 0x0807060504030201 from chunk 128 */
const uint8_t golden_layout_req[] = {
    0x63, 0x69, 0x6e, 0x73,                         /* magic "cins" */
    0x01, 0x00,                                     /* version 1 */
    0x02, 0x00,                                     /* op LAYOUT */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* registration id */
    TOKEN_BYTES,
    0x80, 0x00, 0x00, 0x00                          /* first chunk 128 */
};

/* GET_CHUNK_FDS of chunks 2032..2047 of the same registration */
const uint8_t golden_fds_req[] = {
    0x63, 0x69, 0x6e, 0x73,
    0x01, 0x00,
    0x05, 0x00,                                     /* op GET_CHUNK_FDS */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
    TOKEN_BYTES,
    0xf0, 0x07, 0x00, 0x00,                         /* first chunk 2032 */
    0x10, 0x00, 0x00, 0x00                          /* count 16 */
};

/* OK GET_CHUNK_FDS reply: chunks 5 and 6 (their fds come with it) */
const uint8_t golden_fds_reply[] = {
    0x63, 0x69, 0x6e, 0x73,
    0x01, 0x00,
    0x00, 0x00,                                     /* status OK */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* registration id */
    0x05, 0x00, 0x00, 0x00,                         /* first 5 */
    0x02, 0x00, 0x00, 0x00,                         /* count 2 */
    0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* alloc_id 0x11 */
    0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00  /* alloc_id 0x12 */
};

/* OK layout reply: chunks 1 and 2 of 3 */
const uint8_t golden_layout_reply[] = {
    0x63, 0x69, 0x6e, 0x73,
    0x01, 0x00,
    0x00, 0x00,                                     /* status OK */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* registration id */
    0x03, 0x00, 0x00, 0x00,                         /* total 3 */
    0x01, 0x00, 0x00, 0x00,                         /* first 1 */
    0x02, 0x00, 0x00, 0x00,                         /* count 2 */
    0x00, 0x00, 0x40, 0x01, 0x00, 0x00, 0x00, 0x00, /* offset 20 MiB */
    0x00, 0x00, 0x40, 0x01, 0x00, 0x00, 0x00, 0x00, /* size 20 MiB */
    0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* alloc_id 0x11 */
    0x00, 0x00, 0x80, 0x02, 0x00, 0x00, 0x00, 0x00, /* offset 40 MiB */
    0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, /* size 2 MiB */
    0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00  /* alloc_id 0x12 */
};

/* COPY (put) of 4 KiB at offset 1 MiB of the same registration, from
 * offset 0x40 of the importer's buffer 0x77 of 2 MiB, copy number 9 */
const uint8_t golden_copy_req[] = {
    0x63, 0x69, 0x6e, 0x73,
    0x01, 0x00,
    0x04, 0x00,                                     /* op COPY */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* registration id */
    TOKEN_BYTES,
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 9 */
    0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, /* offset 1 MiB */
    0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* length 4 KiB */
    0x77, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* buf_id 0x77 */
    0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, /* buf_size 2 MiB */
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* buf_offset 0x40 */
    0x02, 0x00,                                     /* from the importer */
    0x00, 0x00                                      /* flags: none */
};

/* The same request for a get into a host buffer (the pinned host ring) */
const uint8_t golden_copy_req_host[] = {
    0x63, 0x69, 0x6e, 0x73,
    0x01, 0x00,
    0x04, 0x00,                                     /* op COPY */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* registration id */
    TOKEN_BYTES,
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* seq 9 */
    0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, /* offset 1 MiB */
    0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* length 4 KiB */
    0x77, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* buf_id 0x77 */
    0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, /* buf_size 2 MiB */
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* buf_offset 0x40 */
    0x01, 0x00,                                     /* to the importer */
    0x01, 0x00                                      /* flags: host buffer */
};

/* Its answer: done */
const uint8_t golden_copy_reply[] = {
    0x63, 0x69, 0x6e, 0x73,
    0x01, 0x00,
    0x00, 0x00,                                     /* status OK */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* registration id */
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00  /* seq 9 */
};

const uint64_t REG_ID = 0x0807060504030201ull;
const uint64_t MiB    = 1ull << 20;


TEST(cuda_ipc_ns_broker_format, golden_chunk_requests) {
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE];
    uct_cuda_ipc_ns_broker_proto_req_t req;

    ASSERT_EQ(sizeof(golden_layout_req), sizeof(buf));
    uct_cuda_ipc_ns_broker_proto_pack_chunk_request(
            buf, UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT, REG_ID, token, 128);
    EXPECT_EQ(0, memcmp(buf, golden_layout_req, sizeof(buf)));
    ASSERT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
              uct_cuda_ipc_ns_broker_proto_unpack_request(buf, sizeof(buf), &req));
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT, req.op);
    EXPECT_EQ(REG_ID, req.alloc_id);
    EXPECT_EQ(128u, req.index);
    EXPECT_EQ(0, memcmp(req.token, token, sizeof(token)));

    uint8_t fds_buf[UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE];
    ASSERT_EQ(sizeof(golden_fds_req), sizeof(fds_buf));
    uct_cuda_ipc_ns_broker_proto_pack_fds_request(fds_buf, REG_ID, token, 2032, 16);
    EXPECT_EQ(0, memcmp(fds_buf, golden_fds_req, sizeof(fds_buf)));
    ASSERT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
              uct_cuda_ipc_ns_broker_proto_unpack_request(golden_fds_req,
                                                          sizeof(golden_fds_req),
                                                          &req));
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS, req.op);
    EXPECT_EQ(REG_ID, req.alloc_id);
    EXPECT_EQ(2032u, req.index);
    EXPECT_EQ(16u, req.count);
    EXPECT_EQ(0, memcmp(req.token, token, sizeof(token)));
}


/* Each op has its exact size: a chunk request cut to a GET_FD's size, a
 * GET_FD or LAYOUT request with 4 more bytes, is malformed; op 3
 * (GET_CHUNK_FD, retired) is unknown */
TEST(cuda_ipc_ns_broker_format, request_size_per_op) {
    uct_cuda_ipc_ns_broker_proto_req_t req;
    bytes_t buf(golden_layout_req, golden_layout_req + sizeof(golden_layout_req));

    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(
                      buf.data(), UCT_CUDA_IPC_NS_BROKER_REQ_SIZE, &req));
    buf[6] = UCT_CUDA_IPC_NS_BROKER_OP_GET_FD;
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(buf.data(), buf.size(),
                                                          &req));
    buf[6] = 3; /* GET_CHUNK_FD, retired */
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(buf.data(), buf.size(),
                                                          &req));
    buf[6] = 6; /* unknown op */
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(buf.data(), buf.size(),
                                                          &req));
    buf[6] = UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS; /* 4 bytes short */
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(buf.data(), buf.size(),
                                                          &req));
    buf.push_back(0);
    buf[6] = UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT;
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(buf.data(), buf.size(),
                                                          &req));
}


/* A GET_CHUNK_FDS of no chunk, or of more than a message carries, is
 * malformed; 1 and the maximum are not */
TEST(cuda_ipc_ns_broker_format, fds_request_count) {
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE + 1] = {};
    uct_cuda_ipc_ns_broker_proto_req_t req;
    const struct {
        uint32_t                        count;
        uct_cuda_ipc_ns_broker_proto_status_t expected;
    } cases[] = {
        {0, UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST},
        {1, UCT_CUDA_IPC_NS_BROKER_STATUS_OK},
        {UCT_CUDA_IPC_NS_BROKER_FDS_MAX, UCT_CUDA_IPC_NS_BROKER_STATUS_OK},
        {UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1,
         UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST},
        {253, UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST},
        {UINT32_MAX, UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST}
    };

    EXPECT_EQ(16, UCT_CUDA_IPC_NS_BROKER_FDS_MAX) << "the protocol's bound";
    for (const auto &c : cases) {
        uct_cuda_ipc_ns_broker_proto_pack_fds_request(buf, REG_ID, token, 7, c.count);
        EXPECT_EQ(c.expected, uct_cuda_ipc_ns_broker_proto_unpack_request(
                                      buf, UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE,
                                      &req))
                << "count " << c.count;
    }
    uct_cuda_ipc_ns_broker_proto_pack_fds_request(buf, REG_ID, token, 7, 1);
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(
                      buf, UCT_CUDA_IPC_NS_BROKER_FDS_REQ_SIZE + 1, &req));
}


TEST(cuda_ipc_ns_broker_format, golden_fds_reply) {
    const uint64_t ids[] = {0x11, 0x12};
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX];
    uint64_t out[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
    uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t reply;

    ASSERT_EQ(sizeof(golden_fds_reply),
              uct_cuda_ipc_ns_broker_proto_pack_fds_reply(buf, REG_ID, 5, 2, ids));
    EXPECT_EQ(0, memcmp(buf, golden_fds_reply, sizeof(golden_fds_reply)));

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(
                              golden_fds_reply, sizeof(golden_fds_reply),
                              &reply, out));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_OK, reply.status);
    EXPECT_EQ(REG_ID, reply.reg_id);
    EXPECT_EQ(5u, reply.first);
    ASSERT_EQ(2u, reply.count);
    EXPECT_EQ(0x11u, out[0]);
    EXPECT_EQ(0x12u, out[1]);

    /* the largest reply fits its buffer */
    uint64_t many[UCT_CUDA_IPC_NS_BROKER_FDS_MAX] = {};
    EXPECT_EQ((size_t)UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX,
              uct_cuda_ipc_ns_broker_proto_pack_fds_reply(
                      buf, REG_ID, 0, UCT_CUDA_IPC_NS_BROKER_FDS_MAX, many));
}


TEST(cuda_ipc_ns_broker_format, fds_reply_rejects) {
    uint64_t out[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
    uct_cuda_ipc_ns_broker_proto_chunk_fds_reply_t reply;
    bytes_t good(golden_fds_reply, golden_fds_reply + sizeof(golden_fds_reply));
    bytes_t bad;

    /* every length but the exact one */
    for (size_t len = 0; len < UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX + 9; ++len) {
        if (len == good.size()) {
            continue;
        }
        bad = good;
        bad.resize(len);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(bad.data(),
                                                                bad.size(), &reply,
                                                                out))
                << "length " << len;
    }

    bad    = good;
    bad[0] = 0; /* magic */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(bad.data(), bad.size(),
                                                            &reply, out));
    bad     = good;
    bad[20] = 0; /* count 0 */
    bad.resize(UCT_CUDA_IPC_NS_BROKER_FDS_HEAD_SIZE);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(bad.data(), bad.size(),
                                                            &reply, out));
    /* more chunks than a reply may carry, with the bytes for them */
    bad = good;
    bad.resize(UCT_CUDA_IPC_NS_BROKER_FDS_HEAD_SIZE +
               (UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1) * 8);
    bad[20] = UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(bad.data(), bad.size(),
                                                            &reply, out));

    /* a refusal is a plain 16-byte reply; an OK one needs its entries */
    bad = good;
    bad.resize(UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(bad.data(), bad.size(),
                                                            &reply, out));
    bad[6] = UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY;
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(
                              bad.data(), bad.size(), &reply, out));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY, reply.status);
    bad = good;
    bad[6] = UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY; /* refusal with entries */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_fds_reply(bad.data(), bad.size(),
                                                            &reply, out));
}


uct_cuda_ipc_ns_broker_proto_copy_args_t golden_copy_args()
{
    uct_cuda_ipc_ns_broker_proto_copy_args_t copy = {};
    copy.seq        = 9;
    copy.offset     = MiB;
    copy.length     = 4096;
    copy.buf_id     = 0x77;
    copy.buf_size   = 2 * MiB;
    copy.buf_offset = 0x40;
    copy.direction  = UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER;
    return copy;
}


TEST(cuda_ipc_ns_broker_format, golden_copy_request) {
    const uct_cuda_ipc_ns_broker_proto_copy_args_t copy = golden_copy_args();
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE];
    uct_cuda_ipc_ns_broker_proto_req_t req;

    ASSERT_EQ(sizeof(golden_copy_req), sizeof(buf));
    uct_cuda_ipc_ns_broker_proto_pack_copy_request(buf, REG_ID, token, &copy);
    EXPECT_EQ(0, memcmp(buf, golden_copy_req, sizeof(buf)));
    ASSERT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
              uct_cuda_ipc_ns_broker_proto_unpack_request(golden_copy_req,
                                                          sizeof(golden_copy_req),
                                                          &req));
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_OP_COPY, req.op);
    EXPECT_EQ(REG_ID, req.alloc_id);
    EXPECT_EQ(0, memcmp(req.token, token, sizeof(token)));
    EXPECT_EQ(copy.seq, req.copy.seq);
    EXPECT_EQ(copy.offset, req.copy.offset);
    EXPECT_EQ(copy.length, req.copy.length);
    EXPECT_EQ(copy.buf_id, req.copy.buf_id);
    EXPECT_EQ(copy.buf_size, req.copy.buf_size);
    EXPECT_EQ(copy.buf_offset, req.copy.buf_offset);
    EXPECT_EQ(copy.direction, req.copy.direction);
    EXPECT_EQ(0, req.copy.flags);
}


TEST(cuda_ipc_ns_broker_format, golden_copy_request_host_buffer) {
    uct_cuda_ipc_ns_broker_proto_copy_args_t copy = golden_copy_args();
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE];
    uct_cuda_ipc_ns_broker_proto_req_t req;

    copy.direction = UCT_CUDA_IPC_NS_COPY_TO_IMPORTER;
    copy.flags     = UCT_CUDA_IPC_NS_COPY_BUF_HOST;
    ASSERT_EQ(sizeof(golden_copy_req_host), sizeof(buf));
    uct_cuda_ipc_ns_broker_proto_pack_copy_request(buf, REG_ID, token, &copy);
    EXPECT_EQ(0, memcmp(buf, golden_copy_req_host, sizeof(buf)));
    ASSERT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
              uct_cuda_ipc_ns_broker_proto_unpack_request(golden_copy_req_host,
                                                          sizeof(golden_copy_req_host),
                                                          &req));
    EXPECT_EQ(UCT_CUDA_IPC_NS_COPY_TO_IMPORTER, req.copy.direction);
    EXPECT_EQ(UCT_CUDA_IPC_NS_COPY_BUF_HOST, req.copy.flags);
    EXPECT_EQ(copy.buf_size, req.copy.buf_size);
}


/* A COPY whose own fields do not hold together is malformed; the
 * registration's range is the broker's check, not the parser's */
TEST(cuda_ipc_ns_broker_format, copy_request_rejects) {
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE + 1];
    uct_cuda_ipc_ns_broker_proto_req_t req;
    struct {
        const char *what;
        void (*change)(uct_cuda_ipc_ns_broker_proto_copy_args_t *copy);
    } cases[] = {
        {"length 0", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) { c->length = 0; }},
        {"direction 0", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) { c->direction = 0; }},
        {"direction 3", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) { c->direction = 3; }},
        {"unknown flag", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) { c->flags = 2; }},
        {"flag bit 15", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) {
             c->flags = UCT_CUDA_IPC_NS_COPY_BUF_HOST | 0x8000; }},
        {"past the buffer's end", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) {
             c->buf_offset = c->buf_size - c->length + 1; }},
        {"offset past the buffer", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) {
             c->buf_offset = c->buf_size + 1; c->length = 1; }},
        {"wrapping buffer range", [](uct_cuda_ipc_ns_broker_proto_copy_args_t *c) {
             c->buf_offset = 16; c->length = UINT64_MAX - 8; }}
    };

    for (const auto &c : cases) {
        uct_cuda_ipc_ns_broker_proto_copy_args_t copy = golden_copy_args();
        c.change(&copy);
        uct_cuda_ipc_ns_broker_proto_pack_copy_request(buf, REG_ID, token, &copy);
        EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
                  uct_cuda_ipc_ns_broker_proto_unpack_request(
                          buf, UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE, &req))
                << c.what;
    }

    /* the last byte of the buffer is in range; one byte more or less of
     * message is not a COPY */
    uct_cuda_ipc_ns_broker_proto_copy_args_t copy = golden_copy_args();
    copy.buf_offset                  = copy.buf_size - copy.length;
    uct_cuda_ipc_ns_broker_proto_pack_copy_request(buf, REG_ID, token, &copy);
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
              uct_cuda_ipc_ns_broker_proto_unpack_request(
                      buf, UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE, &req));
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(
                      buf, UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE + 1, &req));
    EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST,
              uct_cuda_ipc_ns_broker_proto_unpack_request(
                      buf, UCT_CUDA_IPC_NS_BROKER_COPY_REQ_SIZE - 1, &req));
}


TEST(cuda_ipc_ns_broker_format, golden_copy_reply) {
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE];
    uint64_t reg_id, seq;
    unsigned status;

    ASSERT_EQ(sizeof(golden_copy_reply), sizeof(buf));
    uct_cuda_ipc_ns_broker_proto_pack_copy_reply(buf, UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                                                 REG_ID, 9);
    EXPECT_EQ(0, memcmp(buf, golden_copy_reply, sizeof(buf)));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(
                              golden_copy_reply, sizeof(golden_copy_reply),
                              &status, &reg_id, &seq));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_OK, status);
    EXPECT_EQ(REG_ID, reg_id);
    EXPECT_EQ(9u, seq);
}


/* A plain reply is a refusal (our uid, a broker without COPY), never a
 * copy done; sizes other than the two are malformed */
TEST(cuda_ipc_ns_broker_format, copy_reply_rejects) {
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE + 1] = {};
    uint64_t reg_id, seq;
    unsigned status;

    uct_cuda_ipc_ns_broker_proto_pack_reply(buf, UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED,
                                            0);
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(
                              buf, UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE, &status,
                              &reg_id, &seq));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_DENIED, status);
    EXPECT_EQ(0u, seq);

    uct_cuda_ipc_ns_broker_proto_pack_reply(buf, UCT_CUDA_IPC_NS_BROKER_STATUS_OK, 0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(
                      buf, UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE, &status, &reg_id,
                      &seq));

    uct_cuda_ipc_ns_broker_proto_pack_copy_reply(buf, UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                                                 REG_ID, 9);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(
                      buf, sizeof(buf), &status, &reg_id, &seq));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(
                      buf, UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE - 1, &status,
                      &reg_id, &seq));
    buf[0] ^= 1; /* magic */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_copy_reply(
                      buf, UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE, &status,
                      &reg_id, &seq));
}


TEST(cuda_ipc_ns_broker_format, golden_layout_reply) {
    const uct_cuda_ipc_ns_broker_proto_chunk_t chunks[] = {
        {20 * MiB, 20 * MiB, 0x11}, {40 * MiB, 2 * MiB, 0x12}
    };
    uint8_t buf[UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX];
    uct_cuda_ipc_ns_broker_proto_chunk_t out[UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX];
    uct_cuda_ipc_ns_broker_proto_layout_page_t page;

    ASSERT_EQ(sizeof(golden_layout_reply),
              uct_cuda_ipc_ns_broker_proto_pack_layout(buf, REG_ID, 3, 1, 2, chunks));
    EXPECT_EQ(0, memcmp(buf, golden_layout_reply, sizeof(golden_layout_reply)));

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_layout(
                              golden_layout_reply, sizeof(golden_layout_reply),
                              &page, out));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_OK, page.status);
    EXPECT_EQ(REG_ID, page.reg_id);
    EXPECT_EQ(3u, page.total);
    EXPECT_EQ(1u, page.first);
    ASSERT_EQ(2u, page.count);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(chunks[i].offset, out[i].offset);
        EXPECT_EQ(chunks[i].size, out[i].size);
        EXPECT_EQ(chunks[i].alloc_id, out[i].alloc_id);
    }
}


TEST(cuda_ipc_ns_broker_format, layout_reply_rejects) {
    uct_cuda_ipc_ns_broker_proto_chunk_t out[UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX];
    uct_cuda_ipc_ns_broker_proto_layout_page_t page;
    bytes_t good(golden_layout_reply,
                 golden_layout_reply + sizeof(golden_layout_reply));
    bytes_t bad;

    /* every length but the exact one */
    for (size_t len = 0; len < good.size() + 30; ++len) {
        if (len == good.size()) {
            continue;
        }
        bad = good;
        bad.resize(len);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_cuda_ipc_ns_broker_proto_unpack_layout(bad.data(), bad.size(),
                                                             &page, out))
                << "length " << len;
    }

    bad    = good;
    bad[0] = 0; /* magic */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_layout(bad.data(), bad.size(),
                                                         &page, out));
    bad     = good;
    bad[24] = 0; /* count 0 */
    bad.resize(UCT_CUDA_IPC_NS_BROKER_LAYOUT_HEAD_SIZE);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_layout(bad.data(), bad.size(),
                                                         &page, out));
    /* more entries than a reply may carry, with the bytes for them */
    bad = good;
    bad.resize(UCT_CUDA_IPC_NS_BROKER_LAYOUT_HEAD_SIZE +
               (UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX + 1) *
               UCT_CUDA_IPC_NS_BROKER_LAYOUT_ENTRY_SIZE);
    bad[24] = (UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX + 1) & 0xff;
    bad[25] = (UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX + 1) >> 8;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_layout(bad.data(), bad.size(),
                                                         &page, out));

    /* a refusal is a plain 16-byte reply; an OK one needs its entries */
    bad = good;
    bad.resize(UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_unpack_layout(bad.data(), bad.size(),
                                                         &page, out));
    bad[6] = UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY;
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_layout(
                              bad.data(), bad.size(), &page, out));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY, page.status);
}


/* An owner's layout is hostile until it tiles the key's range exactly */
TEST(cuda_ipc_ns_broker_format, layout_check) {
    const uint64_t G = 2 * MiB;
    typedef std::vector<uct_cuda_ipc_ns_broker_proto_chunk_t> layout_t;
    const layout_t good = {{0, G, 1}, {G, G, 2}, {2 * G, 4 * G, 3}};

    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_layout_check(good.data(), 3, 6 * G));

    struct {
        const char *what;
        layout_t   chunks;
        uint64_t   length;
    } bad[] = {
        {"overlapping", {{0, G, 1}, {G / 2, G, 2}, {2 * G, 4 * G, 3}}, 6 * G},
        {"gap", {{0, G, 1}, {2 * G, G, 2}, {3 * G, 3 * G, 3}}, 6 * G},
        {"not from 0", {{G, G, 1}, {2 * G, G, 2}, {3 * G, 3 * G, 3}}, 6 * G},
        {"past the end", {{0, G, 1}, {G, G, 2}, {2 * G, 5 * G, 3}}, 6 * G},
        {"short of the end", {{0, G, 1}, {G, G, 2}, {2 * G, 3 * G, 3}}, 6 * G},
        {"empty chunk", {{0, G, 1}, {G, 0, 2}, {G, 5 * G, 3}}, 6 * G},
        {"wrapping size", {{0, G, 1}, {G, ~0ull - G + 1, 2}, {0, 6 * G, 3}},
         6 * G},
        {"allocation id 0", {{0, G, 1}, {G, G, 0}, {2 * G, 4 * G, 3}}, 6 * G},
        {"out of order", {{G, G, 2}, {0, G, 1}, {2 * G, 4 * G, 3}}, 6 * G},
    };

    for (const auto &b : bad) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_cuda_ipc_ns_broker_proto_layout_check(b.chunks.data(),
                                                            (uint32_t)b.chunks.size(),
                                                            b.length))
                << b.what;
    }
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_broker_proto_layout_check(good.data(), 0, 0)) << "no chunks";
}

} // namespace
