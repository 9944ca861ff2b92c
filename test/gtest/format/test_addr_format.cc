/*
 * cuda_ipc_ns: device/iface address format and reachability
 * (docs/wire-format.md).
 * Golden vectors are written by hand from cuda_ipc_ns_addr.h.
 */
#include <gtest/gtest.h>

extern "C" {
#include "cuda_ipc_ns_addr.h"
}

#include <stdint.h>
#include <string.h>
#include <string>
#include <vector>


namespace {

/* system_id 0x0123456789abcdef, flags LEGACY|POSIX_FD|BROKER */
const uint8_t golden_device_addr[] = {
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, /* system_id */
    0x07                                            /* flags */
};

/* pid 0x12345, pid_ns 0xeffffffc (the initial PID namespace inode),
 * flags LEGACY|POSIX_FD */
const uint8_t golden_iface_addr[] = {
    0x45, 0x23, 0x01, 0x00,                         /* pid */
    0xfc, 0xff, 0xff, 0xef, 0x00, 0x00, 0x00, 0x00, /* pid_ns */
    0x03,                                           /* flags */
    0x10, 0x32, 0x54, 0x76, 0x00, 0x00, 0x00, 0x00  /* start time */
};

/* every byte distinct, high bits set */
const uint8_t golden_iface_addr2[] = {
    0xfe, 0xff, 0xff, 0x7f,                         /* pid 0x7ffffffe */
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, /* pid_ns */
    0x04,                                           /* flags BROKER */
    0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x98  /* start time */
};

enum {
    L = UCT_CUDA_IPC_NS_ADDR_FLAG_LEGACY,
    P = UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD,
    B = UCT_CUDA_IPC_NS_ADDR_FLAG_BROKER
};

struct side {
    uct_cuda_ipc_ns_addr_device_t dev;
    uct_cuda_ipc_ns_addr_iface_t  iface;
};

side make_side(uint64_t system_id, uint32_t pid, uint64_t pid_ns,
               uint8_t flags)
{
    side s;

    memset(&s, 0, sizeof(s));
    s.dev.system_id = system_id;
    s.dev.flags     = flags;
    s.iface.pid     = pid;
    s.iface.pid_ns  = pid_ns;
    s.iface.flags   = flags;
    return s;
}

/* Checks the rule both ways (it must be symmetric) and returns the reason */
bool reachable(const side &a, const side &b, std::string *reason = NULL)
{
    const char *r1 = NULL, *r2 = NULL;
    int ab, ba;

    ab = uct_cuda_ipc_ns_addr_is_reachable(&a.dev, &a.iface, &b.dev, &b.iface,
                                           &r1);
    ba = uct_cuda_ipc_ns_addr_is_reachable(&b.dev, &b.iface, &a.dev, &a.iface,
                                           &r2);
    EXPECT_EQ(!!ab, !!ba);
    EXPECT_TRUE(r1 != NULL);
    EXPECT_TRUE(r2 != NULL);
    /* a NULL reason pointer is allowed */
    EXPECT_EQ(!!ab, !!uct_cuda_ipc_ns_addr_is_reachable(&a.dev, &a.iface,
                                                         &b.dev, &b.iface,
                                                         NULL));
    if (reason != NULL) {
        *reason = (r1 != NULL) ? r1 : "";
    }
    return ab != 0;
}

const uint64_t SYS   = 0x1111222233334444ull;
const uint64_t NS1   = 0xeffffffcull;
const uint64_t NS2   = 0xf0000abcull;

} /* namespace */


TEST(cuda_ipc_ns_addr_format, golden_device_addr) {
    uct_cuda_ipc_ns_addr_device_t addr, out;
    uint8_t buf[UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE + 4];

    ASSERT_EQ(9, UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);
    ASSERT_EQ(sizeof(golden_device_addr),
              (size_t)UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);

    addr.system_id = 0x0123456789abcdefull;
    addr.flags     = L | P | B;
    memset(buf, 0xee, sizeof(buf));
    uct_cuda_ipc_ns_addr_device_pack(&addr, buf);
    EXPECT_EQ(0, memcmp(buf, golden_device_addr, sizeof(golden_device_addr)));
    /* pack writes exactly the address size */
    for (size_t i = sizeof(golden_device_addr); i < sizeof(buf); ++i) {
        EXPECT_EQ(0xee, buf[i]);
    }

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_device_parse(
                      golden_device_addr, sizeof(golden_device_addr), &out));
    EXPECT_EQ(addr.system_id, out.system_id);
    EXPECT_EQ(addr.flags, out.flags);
}

TEST(cuda_ipc_ns_addr_format, golden_iface_addr) {
    uct_cuda_ipc_ns_addr_iface_t addr, out;
    uint8_t buf[UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE + 4];

    ASSERT_EQ(21, UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);
    ASSERT_EQ(sizeof(golden_iface_addr),
              (size_t)UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);

    addr.pid        = 0x12345;
    addr.pid_ns     = 0xeffffffcull;
    addr.flags      = L | P;
    addr.start_time = 0x76543210ull;
    memset(buf, 0xee, sizeof(buf));
    uct_cuda_ipc_ns_addr_iface_pack(&addr, buf);
    EXPECT_EQ(0, memcmp(buf, golden_iface_addr, sizeof(golden_iface_addr)));
    for (size_t i = sizeof(golden_iface_addr); i < sizeof(buf); ++i) {
        EXPECT_EQ(0xee, buf[i]);
    }
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_iface_parse(
                      golden_iface_addr, sizeof(golden_iface_addr), &out));
    EXPECT_EQ(addr.pid, out.pid);
    EXPECT_EQ(addr.pid_ns, out.pid_ns);
    EXPECT_EQ(addr.flags, out.flags);
    EXPECT_EQ(addr.start_time, out.start_time);

    addr.pid        = 0x7ffffffe;
    addr.pid_ns     = 0x8877665544332211ull;
    addr.flags      = B;
    addr.start_time = 0x9807f6e5d4c3b2a1ull;
    uct_cuda_ipc_ns_addr_iface_pack(&addr, buf);
    EXPECT_EQ(0, memcmp(buf, golden_iface_addr2, sizeof(golden_iface_addr2)));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_iface_parse(
                      golden_iface_addr2, sizeof(golden_iface_addr2), &out));
    EXPECT_EQ(addr.pid, out.pid);
    EXPECT_EQ(addr.pid_ns, out.pid_ns);
    EXPECT_EQ(addr.flags, out.flags);
    EXPECT_EQ(addr.start_time, out.start_time);
}

TEST(cuda_ipc_ns_addr_format, parse_short) {
    uct_cuda_ipc_ns_addr_device_t dev;
    uct_cuda_ipc_ns_addr_iface_t iface;

    for (size_t len = 0; len < UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE; ++len) {
        std::vector<uint8_t> b(golden_device_addr, golden_device_addr + len);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_cuda_ipc_ns_addr_device_parse(b.data(), len, &dev))
                << len;
    }
    for (size_t len = 0; len < UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE; ++len) {
        std::vector<uint8_t> b(golden_iface_addr, golden_iface_addr + len);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_cuda_ipc_ns_addr_iface_parse(b.data(), len, &iface))
                << len;
    }
    /* longer buffers are fine: only the known prefix is read */
    std::vector<uint8_t> b(golden_iface_addr,
                           golden_iface_addr + sizeof(golden_iface_addr));
    b.push_back(0);
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_iface_parse(b.data(), b.size(),
                                                       &iface));
}

TEST(cuda_ipc_ns_addr_format, reach_same_process) {
    std::string reason;
    side a = make_side(SYS, 100, NS1, L | P | B);
    side b = make_side(SYS, 100, NS1, L | P | B);

    /* the two addresses really name one process: same system, PID
     * namespace and pid */
    ASSERT_EQ(a.dev.system_id, b.dev.system_id);
    ASSERT_EQ(a.iface.pid_ns, b.iface.pid_ns);
    ASSERT_EQ(a.iface.pid, b.iface.pid);
    ASSERT_EQ(100u, a.iface.pid);
    ASSERT_EQ(NS1, a.iface.pid_ns);

    EXPECT_FALSE(reachable(a, b, &reason));
    EXPECT_EQ("same process", reason);

    /* and the rule is about the process: another pid there is reachable */
    b.iface.pid += 1;
    EXPECT_TRUE(reachable(a, b));
}

TEST(cuda_ipc_ns_addr_format, reach_other_system) {
    std::string reason;

    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, L | P | B),
                           make_side(SYS + 1, 200, NS1, L | P | B), &reason));
    EXPECT_EQ("different system", reason);
    /* even the same pid/ns on another host */
    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, L | P | B),
                           make_side(SYS + 1, 100, NS1, L | P | B), &reason));
    EXPECT_EQ("different system", reason);
}

TEST(cuda_ipc_ns_addr_format, reach_same_pid_other_ns) {
    /* pid 1 in two containers is two processes */
    EXPECT_TRUE(reachable(make_side(SYS, 1, NS1, P | B),
                          make_side(SYS, 1, NS2, P | B)));
    EXPECT_FALSE(reachable(make_side(SYS, 1, NS1, L),
                           make_side(SYS, 1, NS2, L)));
}

TEST(cuda_ipc_ns_addr_format, reach_same_ns) {
    std::string reason;

    EXPECT_TRUE(reachable(make_side(SYS, 100, NS1, L),
                          make_side(SYS, 200, NS1, L)));
    EXPECT_TRUE(reachable(make_side(SYS, 100, NS1, P),
                          make_side(SYS, 200, NS1, P)));
    EXPECT_TRUE(reachable(make_side(SYS, 100, NS1, L | P),
                          make_side(SYS, 200, NS1, L)));
    EXPECT_TRUE(reachable(make_side(SYS, 100, NS1, L | P | B),
                          make_side(SYS, 200, NS1, P)));
    /* no handle kind in common */
    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, L),
                           make_side(SYS, 200, NS1, P | B), &reason));
    EXPECT_NE(std::string::npos, reason.find("no common handle type"));
    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, 0),
                           make_side(SYS, 200, NS1, L | P | B)));
    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, B),
                           make_side(SYS, 200, NS1, B)));
}

TEST(cuda_ipc_ns_addr_format, reach_other_ns_matrix) {
    /* all 8x8 flag combinations in different namespaces */
    for (unsigned lf = 0; lf < 8; ++lf) {
        for (unsigned rf = 0; rf < 8; ++rf) {
            std::string reason;
            bool exp = ((lf & (P | B)) == (P | B)) &&
                       ((rf & (P | B)) == (P | B));
            bool got = reachable(make_side(SYS, 100, NS1, lf),
                                 make_side(SYS, 200, NS2, rf), &reason);
            EXPECT_EQ(exp, got) << "local " << lf << " remote " << rf;
            if (!got) {
                EXPECT_NE(std::string::npos,
                          reason.find("different PID namespace"))
                        << reason;
            }
        }
    }
}

TEST(cuda_ipc_ns_addr_format, reach_other_ns_reasons) {
    std::string reason;

    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, L | B),
                           make_side(SYS, 200, NS2, P | B), &reason));
    EXPECT_NE(std::string::npos, reason.find("local side cannot exchange"));
    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, P | B),
                           make_side(SYS, 200, NS2, L), &reason));
    EXPECT_NE(std::string::npos, reason.find("remote side cannot exchange"));
    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, L | P),
                           make_side(SYS, 200, NS2, P | B), &reason));
    EXPECT_NE(std::string::npos, reason.find("local side runs no fd broker"));
    EXPECT_FALSE(reachable(make_side(SYS, 100, NS1, P | B),
                           make_side(SYS, 200, NS2, P), &reason));
    EXPECT_NE(std::string::npos, reason.find("remote side runs no fd broker"));
}

TEST(cuda_ipc_ns_addr_format, reach_flags_from_either_address) {
    /* capabilities may be advertised in the device or the iface address */
    side a = make_side(SYS, 100, NS1, 0);
    side b = make_side(SYS, 200, NS2, 0);

    a.dev.flags   = P;
    a.iface.flags = B;
    b.dev.flags   = P | B;
    EXPECT_TRUE(reachable(a, b));
}
