/*
 * cuda_ipc_ns: rkey wire format tests (docs/wire-format.md).
 *
 * The golden vectors below are written by hand from the layout documented in
 * cuda_ipc_ns_rkey.h, not dumped from pack(): they pin the format. If one of
 * them has to change, the wire format changed; bump the extension version.
 */
#include <gtest/gtest.h>

extern "C" {
#include "cuda_ipc_ns_rkey.h"
}

#include <stdint.h>
#include <string.h>
#include <random>
#include <vector>


typedef std::vector<uint8_t> bytes_t;

namespace {

/* ---------------------------------------------------------------------------
 * Golden vectors
 * ------------------------------------------------------------------------ */

/* Shared pieces, spelled out byte by byte */
#define LEGACY_HANDLE_BYTES \
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, \
    0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, \
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, \
    0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, \
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, \
    0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, \
    0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, \
    0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f

#define UUID_BYTES \
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, \
    0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf

/* legacy key base fields after the handle: base 0x00007f1234560000,
 * length 0x200000 */
#define LEGACY_BASE_LEN_UUID \
    0x00, 0x00, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00, \
    0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, \
    UUID_BYTES

/* 1) base key: legacy handle, pid 0x1234, no extension: 101 bytes */
const uint8_t golden_legacy_base[] = {
    0x01,                                           /* handle type legacy */
    LEGACY_HANDLE_BYTES,
    0x34, 0x12, 0x00, 0x00,                         /* pid 0x1234 */
    LEGACY_BASE_LEN_UUID
};

/* 2) extended legacy key: pid_ns 0xf0000123, start 0x1122334455667788 */
const uint8_t golden_legacy_ext[] = {
    0x01,
    LEGACY_HANDLE_BYTES,
    0x34, 0x12, 0x00, 0x80,                         /* pid | ext flag */
    LEGACY_BASE_LEN_UUID,
    0x12,                                           /* ext_length 18 */
    0x01,                                           /* version 1 */
    0x23, 0x01, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, /* pid_ns */
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11  /* start_time */
};

#define POSIX_BASE_KEY \
    0x02,                                           /* handle type posix fd */\
    0x07, 0x00, 0x00, 0x00,                         /* fd 7 */               \
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* alloc id */           \
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 52 reserved bytes */  \
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                          \
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                          \
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                          \
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                          \
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                          \
    0x00, 0x00, 0x00, 0x00,                                                  \
    0xef, 0xcd, 0xab, 0x80,                         /* pid 0xabcdef | ext */ \
    0x00, 0x00, 0x20, 0x00, 0x00, 0x7f, 0x00, 0x00, /* base */               \
    0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, /* length 1 GiB */       \
    UUID_BYTES

#define POSIX_EXT_V1_FIELDS \
    0x56, 0x04, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, /* pid_ns 0xf0000456 */  \
    0xef, 0xcd, 0xab, 0x00, 0x00, 0x00, 0x00, 0x00, /* start 0xabcdef */     \
    0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, /* token */              \
    0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf,                          \
    0x15,                                           /* broker_addr_len 21 */ \
    0x00, 'c',  'u',  'd',  'a',  '_',  'i',  'p',  /* "\0cuda_ipc_ns-" */  \
    'c',  '_',  'n',  's',  '-',                                             \
    '0',  '1',  '2',  '3',  'a',  'b',  'c',  'd'   /* "0123abcd" */

/* 3) extended posix fd key, abstract broker address "\0cuda_ipc_ns-0123abcd" */
const uint8_t golden_posix_ext[] = {
    POSIX_BASE_KEY,
    0x38,                                           /* ext_length 56 */
    0x01,                                           /* version 1 */
    POSIX_EXT_V1_FIELDS
};

/* 4a) the same posix key from a newer writer: version 2, 8 more bytes */
const uint8_t golden_posix_v2[] = {
    POSIX_BASE_KEY,
    0x40,                                           /* ext_length 64 */
    0x02,                                           /* version 2 */
    POSIX_EXT_V1_FIELDS,
    0xde, 0xad, 0xbe, 0xef, 0xfe, 0xed, 0xfa, 0xce  /* unknown v2 fields */
};

#define LEGACY_OWNER_COPY_FIELDS \
    0x23, 0x01, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, /* pid_ns */             \
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* start_time */         \
    0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, /* token */              \
    0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf,                          \
    0x15,                                           /* broker_addr_len 21 */ \
    0x00, 'c',  'u',  'd',  'a',  '_',  'i',  'p',                           \
    'c',  '_',  'n',  's',  '-',                                             \
    '0',  '1',  '2',  '3',  'a',  'b',  'c',  'd'

/* 4b) legacy key its owner copies (version 2): token and broker address
 *     after the common fields, as in a posix fd key (docs/owner-copies.md) */
const uint8_t golden_legacy_owner_copy[] = {
    0x01,
    LEGACY_HANDLE_BYTES,
    0x34, 0x12, 0x00, 0x80,
    LEGACY_BASE_LEN_UUID,
    0x38,                                           /* ext_length 56 */
    0x02,                                           /* version 2 */
    LEGACY_OWNER_COPY_FIELDS
};

/* 4c) that legacy key from a newer writer: version 3, 8 more bytes after
 *     the version 2 fields */
const uint8_t golden_legacy_v2[] = {
    0x01,
    LEGACY_HANDLE_BYTES,
    0x34, 0x12, 0x00, 0x80,
    LEGACY_BASE_LEN_UUID,
    0x40,                                           /* ext_length 64 */
    0x03,                                           /* version 3 */
    LEGACY_OWNER_COPY_FIELDS,
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08  /* unknown v3 fields */
};

/* 5) a registration of 2,048 chunks (handle type 3): no fd number, the
 *    registration id and the chunk count in the handle, the extension of a
 *    posix fd key */
const uint8_t golden_chunks_ext[] = {
    0x03,                                           /* handle type chunks */
    0xff, 0xff, 0xff, 0xff,                         /* fd -1: none */
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x08, /* registration id */
    0x00, 0x08, 0x00, 0x00,                         /* 2,048 chunks */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 48 reserved bytes */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xef, 0xcd, 0xab, 0x80,                         /* pid 0xabcdef | ext */
    0x00, 0x00, 0x20, 0x00, 0x00, 0x7f, 0x00, 0x00, /* base */
    0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, /* length 40 GiB */
    UUID_BYTES,
    0x38,                                           /* ext_length 56 */
    0x01,                                           /* version 1 */
    POSIX_EXT_V1_FIELDS
};

/* 6) a copy key (handle type 4): VMM memory without a shareable handle
 *    type, which only its owner copies; no handle, the extension of a
 *    posix fd key (docs/owner-copies.md) */
const uint8_t golden_copy[] = {
    0x04,                                           /* handle type copy */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 64 reserved bytes */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xef, 0xcd, 0xab, 0x80,                         /* pid 0xabcdef | ext */
    0x00, 0x00, 0x20, 0x00, 0x00, 0x7f, 0x00, 0x00, /* base */
    0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, /* length 1 GiB */
    UUID_BYTES,
    0x38,                                           /* ext_length 56 */
    0x01,                                           /* version 1 */
    POSIX_EXT_V1_FIELDS
};

/* a pool key: the allocation's export data as handle, the pool's fd after
 * the broker address */
const uint8_t golden_pool[] = {
    0x05,                                           /* handle type pool */
    0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, /* export data 0x80.. */
    0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
    0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97,
    0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
    0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7,
    0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
    0xef, 0xcd, 0xab, 0x80,                         /* pid 0xabcdef | ext */
    0x00, 0x00, 0x20, 0x00, 0x00, 0x7f, 0x00, 0x00, /* base */
    0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, /* length 1 GiB */
    UUID_BYTES,
    0x3c,                                           /* ext_length 60 */
    0x01,                                           /* version 1 */
    POSIX_EXT_V1_FIELDS,
    0x2a, 0x04, 0x00, 0x00                          /* pool_fd 1066 */
};

const char golden_broker_addr[] = "\0cuda_ipc_ns-0123abcd";
const uint8_t golden_broker_addr_len = sizeof(golden_broker_addr) - 1; /* 21 */


uct_cuda_ipc_ns_rkey_info_t expected_legacy(bool ext)
{
    uct_cuda_ipc_ns_rkey_info_t info;

    memset(&info, 0, sizeof(info));
    info.handle_type = UCT_CUDA_IPC_NS_HANDLE_LEGACY;
    for (int i = 0; i < UCT_CUDA_IPC_NS_HANDLE_SIZE; ++i) {
        info.handle.legacy[i] = (uint8_t)i;
    }
    info.pid    = 0x1234;
    info.base   = 0x00007f1234560000ull;
    info.length = 0x200000;
    for (int i = 0; i < UCT_CUDA_IPC_NS_UUID_SIZE; ++i) {
        info.dev_uuid[i] = (uint8_t)(0xa0 + i);
    }
    if (ext) {
        info.has_ext     = 1;
        info.ext_version = 1;
        info.pid_ns      = 0xf0000123ull;
        info.start_time  = 0x1122334455667788ull;
    }
    return info;
}

/* The key of golden_legacy_owner_copy */
uct_cuda_ipc_ns_rkey_info_t expected_legacy_owner_copy();

uct_cuda_ipc_ns_rkey_info_t expected_posix()
{
    uct_cuda_ipc_ns_rkey_info_t info;

    memset(&info, 0, sizeof(info));
    info.handle_type             = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    info.handle.posix.fd         = 7;
    info.handle.posix.alloc_id   = 0x0102030405060708ull;
    info.pid                     = 0xabcdef;
    info.base                    = 0x00007f0000200000ull;
    info.length                  = 0x40000000ull;
    for (int i = 0; i < UCT_CUDA_IPC_NS_UUID_SIZE; ++i) {
        info.dev_uuid[i] = (uint8_t)(0xa0 + i);
    }
    info.has_ext     = 1;
    info.ext_version = 1;
    info.pid_ns      = 0xf0000456ull;
    info.start_time  = 0xabcdefull;
    for (int i = 0; i < UCT_CUDA_IPC_NS_TOKEN_SIZE; ++i) {
        info.token[i] = (uint8_t)(0xc0 + i);
    }
    info.broker_addr_len = golden_broker_addr_len;
    memcpy(info.broker_addr, golden_broker_addr, golden_broker_addr_len);
    return info;
}


uct_cuda_ipc_ns_rkey_info_t expected_legacy_owner_copy()
{
    uct_cuda_ipc_ns_rkey_info_t info = expected_legacy(true);

    info.ext_version = UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY;
    for (int i = 0; i < UCT_CUDA_IPC_NS_TOKEN_SIZE; ++i) {
        info.token[i] = (uint8_t)(0xc0 + i);
    }
    info.broker_addr_len = golden_broker_addr_len;
    memcpy(info.broker_addr, golden_broker_addr, golden_broker_addr_len);
    return info;
}


uct_cuda_ipc_ns_rkey_info_t expected_chunks()
{
    uct_cuda_ipc_ns_rkey_info_t info = expected_posix();

    info.handle_type             = UCT_CUDA_IPC_NS_HANDLE_CHUNKS;
    info.handle.posix.fd         = -1;
    info.handle.posix.reg_id     = 0x0877665544332211ull;
    info.handle.posix.alloc_id   = info.handle.posix.reg_id;
    info.handle.posix.num_chunks = 2048;
    info.length                  = 40ull << 30;
    return info;
}


uct_cuda_ipc_ns_rkey_info_t expected_copy()
{
    uct_cuda_ipc_ns_rkey_info_t info = expected_posix();

    info.handle_type           = UCT_CUDA_IPC_NS_HANDLE_COPY;
    info.handle.posix.fd       = 0;
    info.handle.posix.alloc_id = 0;
    return info;
}


uct_cuda_ipc_ns_rkey_info_t expected_pool()
{
    uct_cuda_ipc_ns_rkey_info_t info = expected_posix();

    info.handle_type = UCT_CUDA_IPC_NS_HANDLE_POOL;
    for (int i = 0; i < UCT_CUDA_IPC_NS_HANDLE_SIZE; ++i) {
        info.handle.bytes[i] = (uint8_t)(0x80 + i);
    }
    info.pool_fd = 1066;
    return info;
}


/* Field by field, so union/padding bytes never matter */
void expect_info_eq(const uct_cuda_ipc_ns_rkey_info_t &exp,
                    const uct_cuda_ipc_ns_rkey_info_t &act,
                    bool compare_version = true)
{
    ASSERT_EQ(exp.handle_type, act.handle_type);
    if (uct_cuda_ipc_ns_handle_is_opaque(exp.handle_type)) {
        EXPECT_EQ(0, memcmp(exp.handle.bytes, act.handle.bytes,
                            UCT_CUDA_IPC_NS_HANDLE_SIZE));
        EXPECT_EQ(exp.pool_fd, act.pool_fd);
    } else {
        EXPECT_EQ(exp.handle.posix.fd, act.handle.posix.fd);
        EXPECT_EQ(exp.handle.posix.alloc_id, act.handle.posix.alloc_id);
        EXPECT_EQ(exp.handle.posix.reg_id, act.handle.posix.reg_id);
        EXPECT_EQ(exp.handle.posix.num_chunks, act.handle.posix.num_chunks);
    }
    EXPECT_EQ(exp.pid, act.pid);
    EXPECT_EQ(exp.base, act.base);
    EXPECT_EQ(exp.length, act.length);
    EXPECT_EQ(0, memcmp(exp.dev_uuid, act.dev_uuid, UCT_CUDA_IPC_NS_UUID_SIZE));
    EXPECT_EQ(!!exp.has_ext, !!act.has_ext);
    if (compare_version) {
        EXPECT_EQ(exp.ext_version, act.ext_version);
    }
    EXPECT_EQ(exp.pid_ns, act.pid_ns);
    EXPECT_EQ(exp.start_time, act.start_time);
    EXPECT_EQ(0, memcmp(exp.token, act.token, UCT_CUDA_IPC_NS_TOKEN_SIZE));
    ASSERT_EQ(exp.broker_addr_len, act.broker_addr_len);
    EXPECT_EQ(0, memcmp(exp.broker_addr, act.broker_addr,
                        exp.broker_addr_len));
}

bytes_t to_bytes(const uint8_t *p, size_t n)
{
    return bytes_t(p, p + n);
}

#define GOLDEN(_v) to_bytes(_v, sizeof(_v))

/* Pack output must be the golden bytes followed by zero padding */
void expect_pack_equals(const uct_cuda_ipc_ns_rkey_info_t &info,
                        const bytes_t &golden)
{
    bytes_t buf(UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE, 0xee);

    ASSERT_LE(golden.size(), (size_t)UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE);
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&info, buf.data()));
    for (size_t i = 0; i < buf.size(); ++i) {
        uint8_t exp = (i < golden.size()) ? golden[i] : 0;
        ASSERT_EQ(exp, buf[i]) << "byte " << i;
    }
}

/* Parse from a heap buffer of exactly @a len bytes so ASan sees overreads */
ucs_status_t parse_exact(const uint8_t *data, size_t len,
                         uct_cuda_ipc_ns_rkey_info_t *info)
{
    uint8_t *copy = new uint8_t[len ? len : 1];
    ucs_status_t status;

    if (len) {
        memcpy(copy, data, len);
    }
    status = uct_cuda_ipc_ns_rkey_parse(copy, len, info);
    delete[] copy;
    return status;
}

ucs_status_t parse_exact(const bytes_t &b, uct_cuda_ipc_ns_rkey_info_t *info)
{
    return parse_exact(b.data(), b.size(), info);
}

bytes_t padded(const bytes_t &b)
{
    bytes_t out(b);
    out.resize(UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE, 0);
    return out;
}

const size_t ext_off = UCT_CUDA_IPC_NS_RKEY_BASE_SIZE;

} /* namespace */


TEST(cuda_ipc_ns_rkey_format, sizes) {
    EXPECT_EQ(101, UCT_CUDA_IPC_NS_RKEY_BASE_SIZE);
    EXPECT_EQ(18, UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE);
    EXPECT_EQ(147, UCT_CUDA_IPC_NS_RKEY_EXT_MAX_SIZE);
    EXPECT_EQ(248, UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE);
    EXPECT_LT(UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE, 256);
    EXPECT_EQ(sizeof(golden_legacy_base), (size_t)101);
    EXPECT_EQ(sizeof(golden_legacy_ext), (size_t)101 + 18);
    EXPECT_EQ(sizeof(golden_posix_ext), (size_t)101 + 56);
    EXPECT_EQ(sizeof(golden_posix_v2), (size_t)101 + 64);
    EXPECT_EQ(sizeof(golden_legacy_owner_copy), (size_t)101 + 56);
    EXPECT_EQ(sizeof(golden_legacy_v2), (size_t)101 + 64);
    EXPECT_EQ(21, golden_broker_addr_len);
}

TEST(cuda_ipc_ns_rkey_format, golden_legacy_base) {
    uct_cuda_ipc_ns_rkey_info_t info;

    expect_pack_equals(expected_legacy(false), GOLDEN(golden_legacy_base));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_legacy_base), &info));
    expect_info_eq(expected_legacy(false), info);
    EXPECT_EQ(0, info.has_ext);
}

TEST(cuda_ipc_ns_rkey_format, golden_legacy_ext) {
    uct_cuda_ipc_ns_rkey_info_t info;

    expect_pack_equals(expected_legacy(true), GOLDEN(golden_legacy_ext));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_legacy_ext), &info));
    expect_info_eq(expected_legacy(true), info);
}

TEST(cuda_ipc_ns_rkey_format, golden_legacy_owner_copy) {
    uct_cuda_ipc_ns_rkey_info_t info;

    expect_pack_equals(expected_legacy_owner_copy(),
                       GOLDEN(golden_legacy_owner_copy));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_legacy_owner_copy), &info));
    expect_info_eq(expected_legacy_owner_copy(), info);

    /* a reader of version 1 sees a legacy key, the rest skipped: the same
     * bytes with version 1 parse as golden_legacy_ext */
    bytes_t v1       = padded(GOLDEN(golden_legacy_owner_copy));
    v1[ext_off + 1] = 1;
    ASSERT_EQ(UCS_OK, parse_exact(v1, &info));
    expect_info_eq(expected_legacy(true), info);
}

/* A legacy key of version 2 carries its token and a broker address */
TEST(cuda_ipc_ns_rkey_format, legacy_owner_copy_rejects) {
    uint8_t buf[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key;

    info         = expected_legacy_owner_copy();
    info.has_ext = 0; /* the address travels in the extension only */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
    info                 = expected_legacy_owner_copy();
    info.broker_addr_len = UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    key          = padded(GOLDEN(golden_legacy_owner_copy));
    key[ext_off] = UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE; /* no token */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_legacy_owner_copy));
    key[ext_off + UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE +
        UCT_CUDA_IPC_NS_TOKEN_SIZE] = 22; /* address past the extension */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_legacy_owner_copy));
    key[ext_off + UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE +
        UCT_CUDA_IPC_NS_TOKEN_SIZE] = 0; /* no address */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
}

TEST(cuda_ipc_ns_rkey_format, golden_posix_ext) {
    uct_cuda_ipc_ns_rkey_info_t info;

    expect_pack_equals(expected_posix(), GOLDEN(golden_posix_ext));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_posix_ext), &info));
    expect_info_eq(expected_posix(), info);
    EXPECT_EQ('\0', info.broker_addr[0]); /* abstract socket */
}

TEST(cuda_ipc_ns_rkey_format, golden_chunks_ext) {
    uct_cuda_ipc_ns_rkey_info_t info;

    EXPECT_EQ(sizeof(golden_chunks_ext), (size_t)101 + 56);
    expect_pack_equals(expected_chunks(), GOLDEN(golden_chunks_ext));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_chunks_ext), &info));
    expect_info_eq(expected_chunks(), info);
}

/* A chunks key needs its chunks, its token and its broker: refused without */
TEST(cuda_ipc_ns_rkey_format, chunks_rejects) {
    uint8_t buf[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key;

    info                         = expected_chunks();
    info.handle.posix.num_chunks = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
    info         = expected_chunks();
    info.has_ext = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    key = padded(GOLDEN(golden_chunks_ext));
    key[1 + 12] = key[1 + 13] = 0; /* 0 chunks */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_chunks_ext));
    key[ext_off - 16 - 8 - 8 - 1] &= 0x7f; /* no extension */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_chunks_ext));
    key[ext_off] = 18; /* a legacy key's extension length */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
}

TEST(cuda_ipc_ns_rkey_format, golden_copy) {
    uct_cuda_ipc_ns_rkey_info_t info;

    EXPECT_EQ(sizeof(golden_copy), (size_t)101 + 56);
    expect_pack_equals(expected_copy(), GOLDEN(golden_copy));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_copy), &info));
    expect_info_eq(expected_copy(), info);

    /* the handle bytes are reserved: a newer writer's are ignored */
    bytes_t key = padded(GOLDEN(golden_copy));
    key[1]      = 0x5a;
    ASSERT_EQ(UCS_OK, parse_exact(key, &info));
    expect_info_eq(expected_copy(), info);
}

TEST(cuda_ipc_ns_rkey_format, golden_pool) {
    uct_cuda_ipc_ns_rkey_info_t info;

    EXPECT_EQ(sizeof(golden_pool), (size_t)101 + 60);
    expect_pack_equals(expected_pool(), GOLDEN(golden_pool));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_pool), &info));
    expect_info_eq(expected_pool(), info);
}

/* A pool key is useless without its extension and pool fd: refused */
TEST(cuda_ipc_ns_rkey_format, pool_rejects) {
    uint8_t buf[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key;

    info         = expected_pool();
    info.has_ext = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    key = padded(GOLDEN(golden_pool));
    key[ext_off - 16 - 8 - 8 - 1] &= 0x7f; /* no extension */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_pool));
    key[ext_off] = 56; /* a posix key's extension: no pool fd */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_pool));
    key[ext_off] = 59; /* the pool fd cut short */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
}

/* A copy key is useless without its token and broker address: refused */
TEST(cuda_ipc_ns_rkey_format, copy_rejects) {
    uint8_t buf[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key;

    info         = expected_copy();
    info.has_ext = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
    info                 = expected_copy();
    info.broker_addr_len = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    key = padded(GOLDEN(golden_copy));
    key[ext_off - 16 - 8 - 8 - 1] &= 0x7f; /* no extension */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_copy));
    key[ext_off] = 18; /* a legacy key's extension length: no token */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    key = padded(GOLDEN(golden_copy));
    key[ext_off + UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE +
        UCT_CUDA_IPC_NS_TOKEN_SIZE] = 0; /* no address */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
}

TEST(cuda_ipc_ns_rkey_format, golden_newer_writer) {
    uct_cuda_ipc_ns_rkey_info_t info, exp;

    /* v1 fields read, unknown v2 bytes skipped */
    exp             = expected_posix();
    exp.ext_version = 2;
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_posix_v2), &info));
    expect_info_eq(exp, info);
    ASSERT_EQ(UCS_OK, parse_exact(padded(GOLDEN(golden_posix_v2)), &info));
    expect_info_eq(exp, info);

    exp             = expected_legacy_owner_copy();
    exp.ext_version = 3;
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_legacy_v2), &info));
    expect_info_eq(exp, info);
    ASSERT_EQ(UCS_OK, parse_exact(padded(GOLDEN(golden_legacy_v2)), &info));
    expect_info_eq(exp, info);

    /* repacking a newer key gives this writer's key (v2 for a legacy key
     * with a broker address, v1 for a posix fd key) */
    expect_pack_equals(info, GOLDEN(golden_legacy_owner_copy));
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_posix_v2), &info));
    expect_pack_equals(info, GOLDEN(golden_posix_ext));
}

TEST(cuda_ipc_ns_rkey_format, golden_older_writer) {
    uct_cuda_ipc_ns_rkey_info_t info;

    /* a key without extension, exact size and zero padded */
    ASSERT_EQ(UCS_OK, parse_exact(GOLDEN(golden_legacy_base), &info));
    expect_info_eq(expected_legacy(false), info);
    ASSERT_EQ(UCS_OK, parse_exact(padded(GOLDEN(golden_legacy_base)), &info));
    expect_info_eq(expected_legacy(false), info);
    EXPECT_EQ(0, info.has_ext);
    EXPECT_EQ(0u, info.pid_ns);
    EXPECT_EQ(0u, info.start_time);
}

TEST(cuda_ipc_ns_rkey_format, trailing_padding) {
    uct_cuda_ipc_ns_rkey_info_t info;

    ASSERT_EQ(UCS_OK, parse_exact(padded(GOLDEN(golden_legacy_ext)), &info));
    expect_info_eq(expected_legacy(true), info);
    ASSERT_EQ(UCS_OK, parse_exact(padded(GOLDEN(golden_posix_ext)), &info));
    expect_info_eq(expected_posix(), info);
}

TEST(cuda_ipc_ns_rkey_format, round_trip) {
    std::mt19937_64 rng(12345);
    uint8_t buf[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t in, out;

    for (int iter = 0; iter < 2000; ++iter) {
        memset(&in, 0, sizeof(in));
        in.handle_type = (iter % 2) ? UCT_CUDA_IPC_NS_HANDLE_POSIX_FD :
                                      UCT_CUDA_IPC_NS_HANDLE_LEGACY;
        if (in.handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) {
            for (int i = 0; i < UCT_CUDA_IPC_NS_HANDLE_SIZE; ++i) {
                in.handle.legacy[i] = (uint8_t)rng();
            }
            in.has_ext = (iter % 4) == 0;
        } else {
            in.handle.posix.fd       = (int32_t)rng();
            in.handle.posix.alloc_id = rng();
            in.has_ext               = 1;
        }
        in.pid    = (uint32_t)rng() & ~UCT_CUDA_IPC_NS_RKEY_PID_EXT_FLAG;
        in.base   = rng();
        in.length = rng();
        for (int i = 0; i < UCT_CUDA_IPC_NS_UUID_SIZE; ++i) {
            in.dev_uuid[i] = (uint8_t)rng();
        }
        if (in.has_ext) {
            in.ext_version = UCT_CUDA_IPC_NS_RKEY_EXT_VERSION;
            in.pid_ns      = rng();
            in.start_time  = rng();
        }
        if (in.handle_type == UCT_CUDA_IPC_NS_HANDLE_POSIX_FD) {
            for (int i = 0; i < UCT_CUDA_IPC_NS_TOKEN_SIZE; ++i) {
                in.token[i] = (uint8_t)rng();
            }
            in.broker_addr_len = (uint8_t)(rng() %
                                           (UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 1));
            for (int i = 0; i < in.broker_addr_len; ++i) {
                in.broker_addr[i] = (char)rng();
            }
        }

        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&in, buf));
        ASSERT_EQ(UCS_OK, parse_exact(buf, sizeof(buf), &out));
        expect_info_eq(in, out);
        if (HasFatalFailure() || HasNonfatalFailure()) {
            FAIL() << "iteration " << iter;
        }
    }
}

TEST(cuda_ipc_ns_rkey_format, round_trip_limits) {
    uint8_t buf[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t in, out;

    /* longest key: a full-size pathname broker address */
    in                 = expected_posix();
    in.pid             = 0x7fffffff;
    in.broker_addr_len = UCT_CUDA_IPC_NS_BROKER_ADDR_MAX;
    memset(in.broker_addr, 'x', sizeof(in.broker_addr));
    in.handle.posix.fd = -1;
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&in, buf));
    EXPECT_EQ(UCT_CUDA_IPC_NS_RKEY_EXT_MAX_SIZE - 4, buf[ext_off]);
    ASSERT_EQ(UCS_OK, parse_exact(buf, sizeof(buf), &out));
    expect_info_eq(in, out);

    /* the longest of all: a pool key, its pool fd after that address */
    uct_cuda_ipc_ns_rkey_info_t pool = expected_pool();
    pool.broker_addr_len = UCT_CUDA_IPC_NS_BROKER_ADDR_MAX;
    memset(pool.broker_addr, 'x', sizeof(pool.broker_addr));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&pool, buf));
    EXPECT_EQ(UCT_CUDA_IPC_NS_RKEY_EXT_MAX_SIZE, buf[ext_off]);
    ASSERT_EQ(UCS_OK, parse_exact(buf, sizeof(buf), &out));
    expect_info_eq(pool, out);

    /* posix key with no broker address (broker disabled) */
    in.broker_addr_len = 0;
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&in, buf));
    EXPECT_EQ(35, buf[ext_off]);
    ASSERT_EQ(UCS_OK, parse_exact(buf, sizeof(buf), &out));
    expect_info_eq(in, out);
}

TEST(cuda_ipc_ns_rkey_format, pack_rejects) {
    uint8_t buf[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info;

    info             = expected_legacy(true);
    info.handle_type = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
    info.handle_type = 4;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
    info.handle_type = 0xff;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    info     = expected_legacy(false);
    info.pid = 0x80000000u;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
    info.pid = 0xffffffffu;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    info                 = expected_posix();
    info.broker_addr_len = UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
    info.broker_addr_len = 0xff;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    /* a posix fd key cannot be fetched without token and broker address */
    info         = expected_posix();
    info.has_ext = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));

    /* a legacy key without broker address ignores the token (version 1);
     * with one, the address must fit */
    info = expected_legacy(true);
    memset(info.token, 0x5a, sizeof(info.token));
    expect_pack_equals(info, GOLDEN(golden_legacy_ext));
    info.broker_addr_len = 0xff;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_rkey_pack(&info, buf));
}

TEST(cuda_ipc_ns_rkey_format, parse_short_buffer) {
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key = padded(GOLDEN(golden_legacy_base));

    for (size_t len = 0; len < UCT_CUDA_IPC_NS_RKEY_BASE_SIZE; ++len) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key.data(), len, &info))
                << "length " << len;
    }
}

TEST(cuda_ipc_ns_rkey_format, parse_bad_handle_type) {
    uct_cuda_ipc_ns_rkey_info_t info;
    const uint8_t types[] = {0, 5, 6, 0x7f, 0x80, 0xff};

    for (size_t i = 0; i < sizeof(types); ++i) {
        bytes_t key = padded(GOLDEN(golden_legacy_ext));
        key[0]      = types[i];
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info))
                << "type " << (int)types[i];
    }
}

TEST(cuda_ipc_ns_rkey_format, parse_posix_without_ext) {
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key = padded(GOLDEN(golden_posix_ext));

    key[ext_off - 16 - 8 - 8 - 1] &= 0x7f; /* clear bit 31 of the pid */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
}

TEST(cuda_ipc_ns_rkey_format, parse_ext_flag_without_room) {
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key = GOLDEN(golden_legacy_ext);

    /* flag set, 0 or 1 bytes after the base key */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key.data(), ext_off, &info));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              parse_exact(key.data(), ext_off + 1, &info));
}

TEST(cuda_ipc_ns_rkey_format, parse_bad_ext_length) {
    uct_cuda_ipc_ns_rkey_info_t info;

    /* legacy: below the common size */
    for (unsigned l = 0; l < UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE; ++l) {
        bytes_t key  = padded(GOLDEN(golden_legacy_ext));
        key[ext_off] = (uint8_t)l;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info)) << l;
    }

    /* posix: below token + address length, or address past ext_length */
    for (unsigned l = 0; l < sizeof(golden_posix_ext) - ext_off; ++l) {
        bytes_t key  = padded(GOLDEN(golden_posix_ext));
        key[ext_off] = (uint8_t)l;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info)) << l;
    }

    /* beyond the buffer: exact-size buffers one byte short, and 255 */
    {
        bytes_t key = GOLDEN(golden_legacy_ext);
        key[ext_off]++;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
        key = padded(GOLDEN(golden_legacy_ext));
        key[ext_off] = 0xff;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    }
    {
        bytes_t key = GOLDEN(golden_posix_ext);
        key[ext_off]++;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
        key = padded(GOLDEN(golden_posix_ext));
        key[ext_off] = 0xff;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    }

    /* a larger ext_length within the buffer is a newer writer: accepted */
    {
        bytes_t key  = padded(GOLDEN(golden_posix_ext));
        key[ext_off] = UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE - ext_off;
        ASSERT_EQ(UCS_OK, parse_exact(key, &info));
        expect_info_eq(expected_posix(), info);
    }
}

TEST(cuda_ipc_ns_rkey_format, parse_bad_version) {
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key;

    key              = padded(GOLDEN(golden_legacy_ext));
    key[ext_off + 1] = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));

    key              = padded(GOLDEN(golden_posix_ext));
    key[ext_off + 1] = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));

    /* any later version is read as v1 + unknown fields */
    key              = padded(GOLDEN(golden_posix_ext));
    key[ext_off + 1] = 0xff;
    ASSERT_EQ(UCS_OK, parse_exact(key, &info));
    EXPECT_EQ(0xff, info.ext_version);
}

TEST(cuda_ipc_ns_rkey_format, parse_bad_broker_addr_len) {
    const size_t addr_len_off = ext_off + UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE +
                                UCT_CUDA_IPC_NS_TOKEN_SIZE;
    uct_cuda_ipc_ns_rkey_info_t info;

    ASSERT_EQ(golden_broker_addr_len, golden_posix_ext[addr_len_off]);

    /* longer than sun_path, even with room in the extension and buffer */
    {
        bytes_t key(GOLDEN(golden_posix_ext));
        key.resize(ext_off + 255, 0);
        key[ext_off]      = 0xff;
        key[addr_len_off] = UCT_CUDA_IPC_NS_BROKER_ADDR_MAX + 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
        key[addr_len_off] = 0xff;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
        /* the same buffer with a legal address length parses */
        key[addr_len_off] = UCT_CUDA_IPC_NS_BROKER_ADDR_MAX;
        EXPECT_EQ(UCS_OK, parse_exact(key, &info));
    }

    /* address running past ext_length (but inside the buffer) */
    {
        bytes_t key       = padded(GOLDEN(golden_posix_ext));
        key[addr_len_off] = golden_broker_addr_len + 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse_exact(key, &info));
    }

    /* shorter address than the extension holds: rest skipped as unknown */
    {
        bytes_t key       = padded(GOLDEN(golden_posix_ext));
        key[addr_len_off] = 1;
        ASSERT_EQ(UCS_OK, parse_exact(key, &info));
        EXPECT_EQ(1, info.broker_addr_len);
    }
}

TEST(cuda_ipc_ns_rkey_format, truncations) {
    const bytes_t keys[] = {
        GOLDEN(golden_legacy_base), GOLDEN(golden_legacy_ext),
        GOLDEN(golden_posix_ext),   GOLDEN(golden_posix_v2),
        GOLDEN(golden_legacy_v2),   GOLDEN(golden_legacy_owner_copy),
        GOLDEN(golden_copy)
    };
    uct_cuda_ipc_ns_rkey_info_t full, info;

    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); ++k) {
        bytes_t key = padded(keys[k]);
        ASSERT_EQ(UCS_OK, parse_exact(key, &full));
        for (size_t len = 0; len <= key.size(); ++len) {
            ucs_status_t status = parse_exact(key.data(), len, &info);
            if (len < keys[k].size()) {
                EXPECT_EQ(UCS_ERR_INVALID_PARAM, status)
                        << "key " << k << " length " << len;
            } else {
                ASSERT_EQ(UCS_OK, status) << "key " << k << " length " << len;
                expect_info_eq(full, info);
            }
        }
    }
}


/* ---------------------------------------------------------------------------
 * Bounded random pass: random and mutated buffers must never crash, and
 * what parses must survive a pack/parse round trip.
 * ------------------------------------------------------------------------ */
TEST(cuda_ipc_ns_rkey_format, random_mutations) {
    const bytes_t seeds[] = {
        padded(GOLDEN(golden_legacy_base)), padded(GOLDEN(golden_legacy_ext)),
        padded(GOLDEN(golden_posix_ext)),   padded(GOLDEN(golden_posix_v2)),
        padded(GOLDEN(golden_legacy_v2)),   GOLDEN(golden_posix_ext),
        GOLDEN(golden_legacy_ext), padded(GOLDEN(golden_legacy_owner_copy)),
        padded(GOLDEN(golden_copy))
    };
    const size_t num_seeds = sizeof(seeds) / sizeof(seeds[0]);
    const size_t addr_len_off = ext_off + UCT_CUDA_IPC_NS_RKEY_EXT_COMMON_SIZE +
                                UCT_CUDA_IPC_NS_TOKEN_SIZE;
    std::mt19937 rng(0xc0da1c);
    uint8_t repacked[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info, info2;
    size_t parsed_ok = 0;
    bytes_t buf;

    for (int iter = 0; iter < 100000; ++iter) {
        unsigned kind = rng() % 6;

        if (kind == 0) {
            /* fully random, lengths 0..255 */
            buf.resize(rng() % 256);
            for (size_t i = 0; i < buf.size(); ++i) {
                buf[i] = (uint8_t)rng();
            }
        } else {
            buf = seeds[rng() % num_seeds];
            unsigned nmut = 1 + rng() % 4;
            for (unsigned m = 0; m < nmut; ++m) {
                switch ((kind + m) % 5) {
                case 0: /* bit flips */
                case 1:
                    if (!buf.empty()) {
                        buf[rng() % buf.size()] ^= (uint8_t)(1u << (rng() % 8));
                    }
                    break;
                case 2: /* truncate or extend, keeping lengths 0..255 */
                    buf.resize(rng() % 256, (uint8_t)((rng() % 2) ? 0 : rng()));
                    break;
                case 3: /* edit a length/version/type field */
                {
                    const size_t offs[] = {0, ext_off - 33, ext_off,
                                           ext_off + 1, addr_len_off};
                    const uint8_t vals[] = {0, 1, 2, 17, 18, 19, 34, 35, 36,
                                            55, 56, 57, 108, 109, 143, 144,
                                            255, (uint8_t)rng()};
                    size_t off = offs[rng() % 5];
                    if (off < buf.size()) {
                        buf[off] = vals[rng() % sizeof(vals)];
                    }
                    break;
                }
                case 4: /* toggle the extension flag */
                    if (buf.size() > ext_off - 33) {
                        buf[ext_off - 33] ^= 0x80;
                    }
                    break;
                }
            }
        }

        if (parse_exact(buf, &info) != UCS_OK) {
            continue;
        }
        ++parsed_ok;

        /* whatever parses must repack and parse back the same */
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&info, repacked))
                << "iteration " << iter;
        ASSERT_EQ(UCS_OK, parse_exact(repacked, sizeof(repacked), &info2))
                << "iteration " << iter;
        expect_info_eq(info, info2, false);
        if (info2.has_ext) {
            /* this writer's version: 2 for a legacy key its owner copies */
            ASSERT_EQ(((info2.handle_type == UCT_CUDA_IPC_NS_HANDLE_LEGACY) &&
                       (info2.broker_addr_len > 0)) ?
                      UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY :
                      UCT_CUDA_IPC_NS_RKEY_EXT_VERSION, info2.ext_version);
        }
        if (HasFailure()) {
            FAIL() << "iteration " << iter;
        }
    }

    /* the mutations must exercise the success path too */
    EXPECT_GT(parsed_ok, 1000u);
}
