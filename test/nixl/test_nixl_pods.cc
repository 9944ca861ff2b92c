/*
 * NIXL between two pods over cu_ipc_ns (docs/testing.md, "NIXL"): the
 * target is pid 1 of its own PID namespace, in its own network namespace
 * joined to ours by a veth pair, sharing only the socket directory
 * (UCX_CUDA_IPC_NS_SOCK_DIR), as a pod with the directory mounted as a
 * volume. Each side is a nixlAgent with the UCX backend and NIXL's progress
 * thread; UCX 1.22 loads the module from UCX_PLUGIN_PATH, or from the
 * nixl.libs/ucx/ of a wheel's bundled UCX (test/wheel/check_wheel.sh).
 * Metadata blobs go over the test's socketpair. The initiator WRITEs lists
 * of many descriptors with a notification, on which the target checks the
 * bytes, and READs lists the target filled; every transfer's status is
 * polled to completion; the module's mapping cache must have seen every
 * descriptor, so a fallback to another transport fails the test, and one
 * UCX must be mapped (one file each of its libraries). A target killed in
 * the middle of a transfer makes the transfer end in an error, not hang.
 */
#include "common/peer.h"
#include "common/pod_net.h"
#include "common/scratch_dir.h"
#include "nixl_side.h"

#include <gtest/gtest.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>


namespace {

using nixl_side::mem_kind;
using nixl_side::layout;

const size_t MiB      = 1ul << 20;
const size_t BUF_SIZE = 64 * MiB;     /* each side's device memory */
const size_t SIZES[]  = {4096, 65536 + 8, MiB}; /* descriptor sizes */
const size_t MAX_DESCS = 64;          /* descriptors per list */
const int    WAIT_MS  = 60000;        /* hang guard only */
const uint8_t GUARD   = 0xa5;         /* the target's bytes between descriptors */
const char   *TARGET  = "target";
const char   *INITIATOR = "initiator";

enum target_op : uint32_t {
    OP_GUARD = 1, /* fill the whole buffer with GUARD */
    OP_FILL,      /* fill descriptor i of the remote list with seed + i */
    OP_CHECK,     /* wait for notification "seed", check what OP_FILL would
                     have written, and GUARD in between */
    OP_EXIT
};

struct target_cmd {
    uint32_t op;
    uint32_t seed;
    uint64_t count;
    uint64_t size;
};

struct target_setup {
    int32_t kind;
};

struct target_hello {
    int32_t  status; /* nixl_status_t of the target's setup */
    uint64_t addr;   /* its buffer */
};


std::string notif_of(uint32_t seed)
{
    return "write " + std::to_string(seed);
}


/* the target's check of OP_CHECK: the whole span read once */
int32_t check_target(const void *buf, const layout &lay, uint32_t seed)
{
    std::vector<uint8_t> bytes(lay.span());

    test::cuda_read(bytes.data(), buf, bytes.size());
    for (size_t i = 0; i < lay.count; ++i) {
        size_t off = lay.remote_offset(i);
        if (memcmp(&bytes[off], test::seed_pattern(seed + i, lay.size).data(),
                   lay.size) != 0) {
            return NIXL_ERR_MISMATCH;
        }
        for (size_t g = off + lay.size; g < off + lay.stride; ++g) {
            if (bytes[g] != GUARD) {
                return NIXL_ERR_INVALID_PARAM; /* stands for a write out of place */
            }
        }
    }
    return NIXL_SUCCESS;
}


TEST_PEER_ROLE(nixl_target)
{
    target_setup setup;
    target_cmd cmd;
    char ready = 1;

    /* our namespaces exist: the test wires our network, then we start */
    if (!chan.send(&ready, 1) || !chan.recv_obj(setup, WAIT_MS) ||
        !test::cuda_init()) {
        return 1;
    }
    nixl_side::device_buffer buf((mem_kind)setup.kind, BUF_SIZE);
    nixl_side::agent ag(TARGET);
    target_hello hello = {ag.status(), (uintptr_t)buf.ptr()};
    if (hello.status == NIXL_SUCCESS) {
        hello.status = ag.register_vram(buf.ptr(), buf.size());
    }
    nixl_blob_t md;
    if ((hello.status == NIXL_SUCCESS) && (ag.nixl().getLocalMD(md) != NIXL_SUCCESS)) {
        hello.status = NIXL_ERR_BACKEND;
    }
    if (!chan.send_obj(hello) || (hello.status != NIXL_SUCCESS) ||
        !chan.send(md.data(), md.size())) {
        return 2;
    }

    while (chan.recv_obj(cmd, WAIT_MS) && (cmd.op != OP_EXIT)) {
        layout lay     = layout::of(cmd.count, cmd.size);
        int32_t result = NIXL_SUCCESS;
        if (lay.span() > buf.size()) {
            result = NIXL_ERR_INVALID_PARAM;
        } else if (cmd.op == OP_GUARD) {
            test::cuda_fill(buf.ptr(), GUARD, buf.size());
        } else if (cmd.op == OP_FILL) {
            for (size_t i = 0; i < lay.count; ++i) {
                test::seed_fill((char*)buf.ptr() + lay.remote_offset(i),
                                cmd.seed + i, lay.size);
            }
        } else if (cmd.op == OP_CHECK) {
            result = ag.wait_notif(INITIATOR, notif_of(cmd.seed), WAIT_MS) ?
                     check_target(buf.ptr(), lay, cmd.seed) : NIXL_ERR_NOT_FOUND;
        }
        if (!chan.send_obj(result)) {
            return 3;
        }
    }
    return 0;
}


class nixl_pods : public ::testing::TestWithParam<mem_kind> {
protected:
    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        ASSERT_TRUE(test::pod_network::get().created())
                << "cannot make the node's network (root, ip, veth)";
        /* both sides read these when NIXL creates their UCX contexts:
         * the pod list of README.md ("UCX_TLS"), unless the environment
         * names another (to see the lane check fail without cu_ipc_ns) */
        test::use_pod_network_device();
        m_set_tls = (getenv("UCX_TLS") == nullptr);
        if (m_set_tls) {
            setenv("UCX_TLS", "cu_ipc_ns,cu_cpy_ns,tcp", 1);
        }
        m_sock_dir.reset(new test::scratch_dir("cuda_ipc_ns_nixl"));
        ASSERT_FALSE(m_sock_dir->path().empty());
        setenv("UCX_CUDA_IPC_NS_SOCK_DIR", m_sock_dir->path().c_str(), 1);

        test::peer_options opts;
        opts.new_pid_ns = true;
        opts.new_net_ns = true;
        m_peer.reset(new test::peer("nixl_target", opts));
        char ready = 0;
        ASSERT_EQ(1, m_peer->chan().recv(&ready, 1, WAIT_MS))
                << "the target never started";
        test::connect_pod(m_peer->pid());
        ASSERT_FALSE(HasFatalFailure());
        target_setup setup = {GetParam()};
        ASSERT_TRUE(m_peer->chan().send_obj(setup));

        m_buf.reset(new nixl_side::device_buffer(GetParam(), BUF_SIZE));
        m_agent.reset(new nixl_side::agent(INITIATOR));
        ASSERT_EQ(NIXL_SUCCESS, m_agent->status()) << "UCX backend";
        ASSERT_EQ(NIXL_SUCCESS, m_agent->register_vram(m_buf->ptr(), BUF_SIZE))
                << "VRAM_SEG registration (ucp_mem_query must say CUDA)";

        target_hello hello;
        ASSERT_TRUE(m_peer->chan().recv_obj(hello, WAIT_MS));
        ASSERT_EQ(NIXL_SUCCESS, hello.status) << "the target's agent";
        m_remote_addr = hello.addr;
        std::vector<char> md(1 << 20);
        ssize_t len = m_peer->chan().recv(md.data(), md.size(), WAIT_MS);
        ASSERT_GT(len, 0) << "the target's metadata";
        std::string name;
        ASSERT_EQ(NIXL_SUCCESS,
                  m_agent->nixl().loadRemoteMD(nixl_blob_t(md.data(), len), name));
        ASSERT_EQ(TARGET, name);
    }

    void TearDown() override
    {
        if (m_peer && !m_killed) {
            target_cmd cmd = {OP_EXIT, 0, 0, 0};
            EXPECT_TRUE(m_peer->chan().send_obj(cmd));
            EXPECT_EQ(0, m_peer->wait());
        }
        if (m_agent) {
            m_agent->nixl().invalidateRemoteMD(TARGET);
        }
        m_agent.reset();
        m_buf.reset();
        m_peer.reset();
        m_sock_dir.reset();
        unsetenv("UCX_NET_DEVICES");
        unsetenv("UCX_CUDA_IPC_NS_SOCK_DIR");
        if (m_set_tls) {
            unsetenv("UCX_TLS");
        }
    }

    int32_t call(uint32_t op, uint32_t seed, const layout &lay)
    {
        target_cmd cmd = {op, seed, lay.count, lay.size};
        int32_t result = NIXL_ERR_UNKNOWN;
        EXPECT_TRUE(m_peer->chan().send_obj(cmd));
        EXPECT_TRUE(m_peer->chan().recv_obj(result, WAIT_MS)) << "no answer";
        return result;
    }

    /* post and wait for one transfer; its final status */
    nixl_status_t transfer(nixl_xfer_op_t op, const layout &lay,
                           const std::string &notif)
    {
        nixlXferReqH *req;
        nixl_status_t status = m_agent->post(op, lay.local_list(m_buf->ptr()),
                                             lay.remote_list(m_remote_addr),
                                             TARGET, notif, &req);
        if (status == NIXL_IN_PROG) {
            status = m_agent->wait(req, WAIT_MS);
        }
        if (req != nullptr) {
            EXPECT_EQ(NIXL_SUCCESS, m_agent->nixl().releaseXferReq(req));
        }
        return status;
    }

    uct_cuda_ipc_ns_cache_stats_t cache_stats()
    {
        uct_cuda_ipc_ns_cache_stats_t stats = {};
        std::string error;
        EXPECT_TRUE(nixl_side::module_cache_stats(&stats, &error)) << error;
        return stats;
    }

    uint64_t lookups()
    {
        uct_cuda_ipc_ns_cache_stats_t stats = cache_stats();
        return stats.hits + stats.misses;
    }

    /* one UCX in this process: one file each of libucs, libuct, libucp,
     * libucm and the module (a second UCX beside a wheel's bundled one is
     * what that layout must rule out); where NIXL_PODS_UCX_LIBDIR names the
     * directory of the UCX that must run (test/wheel/check_wheel.sh: the
     * wheel's nixl.libs), they lie there and the module in its ucx/ */
    void expect_one_ucx()
    {
        const char *libdir = getenv("NIXL_PODS_UCX_LIBDIR");
        nixl_side::ucx_files files;
        std::string error;

        ASSERT_TRUE(nixl_side::mapped_ucx_files(&files, &error)) << error;
        const struct {
            const char                  *what;
            const std::set<std::string> &paths;
            std::string                 dir;
        } libs[] = {
            {"libucs", files.ucs, libdir ? libdir : ""},
            {"libuct", files.uct, libdir ? libdir : ""},
            {"libucp", files.ucp, libdir ? libdir : ""},
            {"libucm", files.ucm, libdir ? libdir : ""},
            {"the cu_ipc_ns module", files.module,
             libdir ? std::string(libdir) + "/ucx" : ""}
        };
        for (const auto &lib : libs) {
            std::string paths;
            for (const auto &path : lib.paths) {
                paths += " " + path;
            }
            EXPECT_EQ(1u, lib.paths.size())
                    << lib.what << " mapped from" << (paths.empty() ? " nowhere" : paths);
            if (!lib.dir.empty() && (lib.paths.size() == 1)) {
                const std::string &path = *lib.paths.begin();
                EXPECT_EQ(lib.dir, path.substr(0, path.rfind('/')))
                        << lib.what << " is not the one of NIXL_PODS_UCX_LIBDIR";
            }
        }
    }

    std::unique_ptr<test::peer>              m_peer;
    std::unique_ptr<nixl_side::device_buffer> m_buf;
    std::unique_ptr<nixl_side::agent>         m_agent;
    uint64_t                                 m_remote_addr = 0;
    std::unique_ptr<test::scratch_dir>       m_sock_dir;
    bool                                     m_killed  = false;
    bool                                     m_set_tls = false;
};


TEST_P(nixl_pods, write_and_read_descriptor_lists) {
    uint32_t seed = 1000;

    for (size_t size : SIZES) {
        layout lay = layout::of(std::min(MAX_DESCS, BUF_SIZE / (2 * size)), size);
        SCOPED_TRACE(std::to_string(lay.count) + " descriptors of " +
                     std::to_string(size) + " B");
        uint64_t before = lookups();

        /* WRITE with a notification: the target checks on it */
        seed += 100;
        ASSERT_EQ(NIXL_SUCCESS, call(OP_GUARD, 0, lay));
        for (size_t i = 0; i < lay.count; ++i) {
            test::seed_fill((char*)m_buf->ptr() + lay.local_offset(i), seed + i,
                            size);
        }
        EXPECT_EQ(NIXL_SUCCESS, transfer(NIXL_WRITE, lay, notif_of(seed)));
        EXPECT_EQ(NIXL_SUCCESS, call(OP_CHECK, seed, lay))
                << "the target's bytes after the WRITE (-4: no notification, "
                   "-5: wrong bytes, -2: bytes out of place)";

        /* READ of what the target wrote */
        seed += 100;
        ASSERT_EQ(NIXL_SUCCESS, call(OP_FILL, seed, lay));
        test::cuda_fill(m_buf->ptr(), 0, lay.span());
        EXPECT_EQ(NIXL_SUCCESS, transfer(NIXL_READ, lay, ""));
        for (size_t i = 0; i < lay.count; ++i) {
            ASSERT_TRUE(test::seed_holds((char*)m_buf->ptr() + lay.local_offset(i),
                                         seed + i, size))
                    << "descriptor " << i << " after the READ";
        }

        /* cu_ipc_ns moved every descriptor: each one a lookup of its
         * mapping cache, which another transport never makes */
        EXPECT_GE(lookups(), before + 2 * lay.count)
                << "the transfers did not map the target's memory here "
                   "(cu_ipc_ns's mapping cache)";
    }
    /* the target's memory: one allocation imported, or its chunks one by
     * one (the descriptors cover every chunk) */
    if (GetParam() == nixl_side::MEM_VMM_CHUNKS) {
        EXPECT_GT(cache_stats().regions, 1u) << "the chunks imported one by one";
    } else {
        EXPECT_EQ(1u, cache_stats().regions);
    }
    /* the lookups above were the module's of the one UCX that ran */
    expect_one_ucx();
}


/* The target dies with a long WRITE in flight: the transfer's status must
 * turn into an error (the target's pidfd, watched by the module, and UCP's
 * peer error handling), the initiator's agent stays usable for cleanup.
 * NIXL's error handler force-closes the UCP ep: UCP discards the cu_ipc_ns
 * uct_ep with a flush(UCT_FLUSH_FLAG_CANCEL) and disables the iface's
 * progress (its last ep closed); the flush must complete anyway, through
 * worker progress, once the copies in flight have (docs/architecture.md,
 * "Flush with CANCEL"). Before it did, the transfer stayed NIXL_IN_PROG and
 * UCP asserted at agent teardown (ucp_ep.c:1461 "ep_config->ep_count > 0") */
TEST_P(nixl_pods, killed_target_fails_the_transfer) {
    /* a transfer that works first: the target's buffer is mapped here */
    layout small = layout::of(8, MiB);
    ASSERT_EQ(NIXL_SUCCESS, call(OP_GUARD, 0, small));
    for (size_t i = 0; i < small.count; ++i) {
        test::seed_fill((char*)m_buf->ptr() + small.local_offset(i), 1 + i, MiB);
    }
    EXPECT_EQ(NIXL_SUCCESS, transfer(NIXL_WRITE, small, notif_of(1)));
    EXPECT_EQ(NIXL_SUCCESS, call(OP_CHECK, 1, small));

    /* 1 GiB in 1 MiB descriptors over the 64 MiB of the target, again and
     * again: long enough on any device to be in flight when the kill lands */
    nixl_xfer_dlist_t local(VRAM_SEG), remote(VRAM_SEG);
    layout lay = layout::of(BUF_SIZE / (2 * MiB), MiB);
    for (int pass = 0; pass < 32; ++pass) {
        for (size_t i = 0; i < lay.count; ++i) {
            local.addDesc(nixlBasicDesc((uintptr_t)m_buf->ptr() +
                                        lay.local_offset(i), MiB, 0));
            remote.addDesc(nixlBasicDesc(m_remote_addr + lay.remote_offset(i),
                                         MiB, 0));
        }
    }
    nixlXferReqH *req;
    nixl_status_t status = m_agent->post(NIXL_WRITE, local, remote, TARGET,
                                         notif_of(2), &req);
    ASSERT_EQ(NIXL_IN_PROG, status) << "the transfer ended before the kill";
    ASSERT_TRUE(m_peer->kill());
    m_killed = true;

    status = m_agent->wait(req, WAIT_MS);
    EXPECT_NE(NIXL_IN_PROG, status) << "hung after the kill";
    EXPECT_LT(status, 0) << "a transfer to a dead target succeeded";
    printf("[ INFO     ] the transfer ended with %s after the kill\n",
           nixlEnumStrings::statusStr(status).c_str());
    EXPECT_EQ(128 + SIGKILL, m_peer->wait());
    EXPECT_EQ(NIXL_SUCCESS, m_agent->nixl().releaseXferReq(req));
}


/* VMM memory in one allocation and in the expandable-segments layout,
 * legacy memory (opened by the initiator itself: its pid number is not the
 * target's 1) and memory of a shareable stream-ordered pool (nixl_side.h) */
INSTANTIATE_TEST_SUITE_P(memory, nixl_pods,
                         ::testing::Values(nixl_side::MEM_VMM,
                                           nixl_side::MEM_VMM_CHUNKS,
                                           nixl_side::MEM_LEGACY,
                                           nixl_side::MEM_POOL),
                         [](const ::testing::TestParamInfo<mem_kind> &info) {
                             return std::string(nixl_side::mem_kind_name(info.param));
                         });

} // namespace
