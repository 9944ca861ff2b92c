/*
 * UCP end to end: two processes, the second pid 1 of another PID namespace
 * (and, in a second run, of another network namespace joined by a veth pair,
 * with a shared socket directory), move CUDA buffers that each allocated
 * itself (cuMemCreate, not through UCP) with tag send/receive and RMA
 * put/get, UCX_TLS=cu_ipc_ns,cu_cpy_ns,tcp; bytes checked on both sides.
 */
#include "common/cuda_alloc.h"
#include "common/peer.h"
#include "common/pod_net.h"
#include "common/ucp_side.h"

extern "C" {
#include "cuda_ipc_ns_cache.h"
}

#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>


namespace {

using test::ucp_side;
typedef std::vector<uint8_t> bytes_t;

const size_t MiB         = 1ul << 20;
const size_t MAX_SIZE    = 64 * MiB;
const size_t SIZES[]     = {8, 64 * 1024, 4 * MiB, 64 * MiB};
const char   *PAIR_TLS   = "cu_ipc_ns,cu_cpy_ns,tcp";


enum pair_op : uint32_t {
    OP_RECV = 1, /* receive a tag message of size, check it holds seed */
    OP_SEND,     /* fill with seed, send a tag message of size */
    OP_FILL,     /* fill with seed (for a get) */
    OP_CHECK,    /* check the first size bytes hold seed (after a put) */
    OP_EXIT
};

struct pair_cmd {
    uint32_t op;
    uint32_t seed;
    uint64_t size;
};

/* What the server sends first */
struct pair_hello {
    int32_t  detected_cuda;  /* its own cuMemCreate buffer classed CUDA */
    int32_t  detected_host;  /* a host buffer classed host */
    uint64_t addr;           /* its buffer */
    uint32_t rkey_len;
    uint8_t  rkey[1024];
};


using test::seed_pattern;
using test::seed_fill;
using test::seed_holds;


/* Server: its own CUDA buffer, registered for RMA; tag messages on demand */
TEST_PEER_ROLE(ucp_pair_server)
{
    std::vector<char> host(4096);
    pair_hello hello = {};
    char go, client_addr[4096];
    ucp_mem_h memh;
    pair_cmd cmd;

    /* our namespaces exist (peer_exec unshared them before exec): say
     * so, then the test sets up our network */
    go = 1;
    if (!chan.send(&go, 1) || (chan.recv(&go, 1, 60000) != 1) ||
        !test::cuda_init()) {
        return 1;
    }
    test::cuda_vmm_buffer buf(MAX_SIZE);
    ucp_side side;
    if (!side.ok()) {
        return 2;
    }

    hello.detected_cuda = side.detect(buf.ptr(), buf.size()) ==
                          UCS_MEMORY_TYPE_CUDA;
    hello.detected_host = side.detect(host.data(), host.size()) ==
                          UCS_MEMORY_TYPE_HOST;
    if (!side.map_and_pack(buf.ptr(), buf.size(), &memh, hello.rkey,
                           sizeof(hello.rkey), &hello.rkey_len)) {
        return 3;
    }
    hello.addr     = (uintptr_t)buf.ptr();

    bytes_t address = side.address();
    if (!chan.send(address.data(), address.size()) || !chan.send_obj(hello)) {
        return 4;
    }
    ssize_t len = chan.recv(client_addr, sizeof(client_addr), 60000);
    if ((len <= 0) ||
        (side.connect(bytes_t(client_addr, client_addr + len)) != UCS_OK)) {
        return 5;
    }

    while (side.chan_recv(chan, &cmd, sizeof(cmd)) && (cmd.op != OP_EXIT)) {
        int32_t result = UCS_OK;
        switch (cmd.op) {
        case OP_RECV:
            result = side.wait(side.recv(buf.ptr(), cmd.size, cmd.seed),
                               nullptr);
            if ((result == UCS_OK) && !seed_holds(buf.ptr(), cmd.seed, cmd.size)) {
                result = UCS_ERR_MESSAGE_TRUNCATED; /* stands for "wrong bytes" */
            }
            break;
        case OP_SEND:
            seed_fill(buf.ptr(), cmd.seed, cmd.size);
            result = side.wait(side.send(buf.ptr(), cmd.size, cmd.seed),
                               nullptr);
            break;
        case OP_FILL:
            seed_fill(buf.ptr(), cmd.seed, cmd.size);
            break;
        case OP_CHECK:
            result = seed_holds(buf.ptr(), cmd.seed, cmd.size) ? UCS_OK :
                     UCS_ERR_MESSAGE_TRUNCATED;
            break;
        }
        if (!chan.send_obj(result)) {
            return 6;
        }
    }

    side.close_ep();
    ucp_mem_unmap(side.context, memh);
    chan.send_obj(cmd); /* done: the client may tear down */
    return 0;
}


class ucp_pair : public ::testing::TestWithParam<bool /* other netns */> {
protected:
    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        if (getenv("UCX_MEMTYPE_CACHE") != nullptr) {
            GTEST_SKIP() << "UCX_MEMTYPE_CACHE is set: the test checks the "
                            "default";
        }
    }

    void TearDown() override
    {
        if (!m_sock_dir.empty()) {
            rmdir(m_sock_dir.c_str());
        }
        unsetenv("UCX_TLS");
        unsetenv("UCX_NET_DEVICES");
        unsetenv("UCX_CUDA_IPC_NS_SOCK_DIR");
    }

    /* a command to the server, progressing our worker; its result */
    int32_t call(test::peer &peer, ucp_side &side, uint32_t op, uint32_t seed,
                 size_t size)
    {
        pair_cmd cmd = {op, seed, size};
        int32_t result = UCS_ERR_LAST;
        EXPECT_TRUE(peer.chan().send_obj(cmd));
        EXPECT_TRUE(side.chan_recv(peer.chan(), &result, sizeof(result)));
        return result;
    }

    ucs_status_t flush(ucp_side &side)
    {
        ucp_request_param_t param = {};
        return side.wait(ucp_ep_flush_nbx(side.ep, &param), nullptr);
    }

    std::string m_sock_dir;
};


TEST_P(ucp_pair, tag_and_rma_on_cuda_buffers_across_namespaces) {
    const bool other_netns = GetParam();
    test::peer_options opts;
    char server_addr[4096];
    pair_hello hello;

    setenv("UCX_TLS", PAIR_TLS, 1);
    test::use_pod_network_device();
    if (other_netns) {
        char tmpl[] = "/tmp/cuda_ipc_ns_ucp.XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(tmpl));
        m_sock_dir = tmpl;
        chmod(tmpl, 0700);
        setenv("UCX_CUDA_IPC_NS_SOCK_DIR", tmpl, 1);
    }
    opts.new_pid_ns = true;
    opts.new_net_ns = other_netns;
    test::peer peer("ucp_pair_server", opts);
    char go = 0;
    ASSERT_EQ(1, peer.chan().recv(&go, 1, 60000)) << "the peer never started";
    if (other_netns) {
        test::connect_pod(peer.pid());
    }
    go = 1;
    ASSERT_TRUE(peer.chan().send(&go, 1));

    /* our own buffers, not allocated through UCP */
    test::cuda_vmm_buffer local(MAX_SIZE);
    std::vector<char> host(4096);
    ucp_side side;
    ASSERT_TRUE(side.ok());
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, side.detect(local.ptr(), local.size()));
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, side.detect(host.data(), host.size()));

    ssize_t len = peer.chan().recv(server_addr, sizeof(server_addr), 60000);
    ASSERT_GT(len, 0);
    ASSERT_TRUE(peer.chan().recv_obj(hello, 60000));
    EXPECT_TRUE(hello.detected_cuda) << "server: its cuMemCreate buffer";
    EXPECT_TRUE(hello.detected_host) << "server: a host buffer";
    ASSERT_EQ(UCS_OK, side.connect(bytes_t(server_addr, server_addr + len)));
    bytes_t address = side.address();
    ASSERT_TRUE(peer.chan().send(address.data(), address.size()));

    ucp_rkey_h rkey;
    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(side.ep, hello.rkey, &rkey));

    uct_cuda_ipc_ns_cache_stats_t before, after;
    uct_cuda_ipc_ns_cache_get_stats(&before);
    uint32_t seed = 1;
    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        ucp_request_param_t param = {};

        /* tag: to the server, then back */
        seed_fill(local.ptr(), ++seed, size);
        pair_cmd cmd = {OP_RECV, seed, size};
        ASSERT_TRUE(peer.chan().send_obj(cmd));
        EXPECT_EQ(UCS_OK, side.wait(side.send(local.ptr(), size, seed),
                                    nullptr));
        int32_t result = UCS_ERR_LAST;
        ASSERT_TRUE(side.chan_recv(peer.chan(), &result, sizeof(result)));
        EXPECT_EQ(UCS_OK, result) << "tag to the server";

        ucs_status_ptr_t rreq = side.recv(local.ptr(), size, ++seed);
        cmd = {OP_SEND, seed, size};
        ASSERT_TRUE(peer.chan().send_obj(cmd));
        EXPECT_EQ(UCS_OK, side.wait(rreq, nullptr));
        ASSERT_TRUE(side.chan_recv(peer.chan(), &result, sizeof(result)));
        EXPECT_EQ(UCS_OK, result);
        EXPECT_TRUE(seed_holds(local.ptr(), seed, size)) << "tag from the server";

        /* RMA put and get, what NIXL does */
        seed_fill(local.ptr(), ++seed, size);
        EXPECT_EQ(UCS_OK, side.wait(ucp_put_nbx(side.ep, local.ptr(), size,
                                                hello.addr, rkey, &param),
                                    nullptr));
        EXPECT_EQ(UCS_OK, flush(side));
        EXPECT_EQ(UCS_OK, call(peer, side, OP_CHECK, seed, size)) << "put";

        EXPECT_EQ(UCS_OK, call(peer, side, OP_FILL, ++seed, size));
        EXPECT_EQ(UCS_OK, side.wait(ucp_get_nbx(side.ep, local.ptr(), size,
                                                hello.addr, rkey, &param),
                                    nullptr));
        EXPECT_EQ(UCS_OK, flush(side));
        EXPECT_TRUE(seed_holds(local.ptr(), seed, size)) << "get";
    }

    /* the data went through cu_ipc_ns mappings of the server's buffer */
    uct_cuda_ipc_ns_cache_get_stats(&after);
    EXPECT_GT(after.hits + after.misses, before.hits + before.misses + 4);

    ucp_rkey_destroy(rkey);
    pair_cmd cmd = {OP_EXIT, 0, 0};
    ASSERT_TRUE(peer.chan().send_obj(cmd));
    ASSERT_TRUE(side.chan_recv(peer.chan(), &cmd, sizeof(cmd)));
    side.close_ep();
    EXPECT_EQ(0, peer.wait());
}


INSTANTIATE_TEST_SUITE_P(namespaces, ucp_pair, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ?
                                                "other_pid_and_net_ns" :
                                                "other_pid_ns");
                         });

} // namespace
