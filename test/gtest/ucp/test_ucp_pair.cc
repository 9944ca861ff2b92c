/*
 * UCP end to end: two processes, the second pid 1 of another PID namespace
 * (and, in a second run, of another network namespace joined by a veth pair,
 * with a shared socket directory), move CUDA buffers that each allocated
 * itself (cuMemCreate, not through UCP) with tag send/receive and RMA
 * put/get, UCX_TLS=cu_ipc_ns,cu_cpy_ns,tcp; bytes checked on both sides.
 * The same harness runs
 * - pods on chunked memory (ucp_pair_chunks): both buffers many cuMemCreate
 *   allocations mapped back to back, as PyTorch's expandable segments,
 *   registered whole by ucp_mem_map (flags 0, as NIXL), ops at offsets that
 *   cross chunk boundaries, up to 2,048 chunks, both pods at RLIMIT_NOFILE
 *   1024 (docs/framework-memory.md);
 * - pods on GPUs of their own (ucp_pair_gpus): the server on another GPU
 *   than ours, whose key cu_ipc_ns refuses at unpack with one warning while
 *   UCP moves the data another way, or on ours under another ordinal
 *   (docs/architecture.md, "GPU visibility").
 */
#include "common/cuda_alloc.h"
#include "common/uct_util.h"
#include "common/peer.h"
#include "common/pod_net.h"
#include "common/scoped_env.h"
#include "common/scoped_nofile.h"
#include "common/ucp_side.h"

extern "C" {
#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_gpus.h"
#include <ucs/debug/log_def.h>
}

#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>


namespace {

using test::ucp_side;
typedef std::vector<uint8_t> bytes_t;

const size_t MiB         = 1ul << 20;
const size_t MAX_SIZE    = 64 * MiB;
const size_t SIZES[]     = {8, 64 * 1024, 4 * MiB, 64 * MiB};
/* UCX_TLS: cu_ipc_ns, the CUDA copy transport (cu_cpy_ns, or UCX's own
 * cuda_copy where it is loaded) and tcp: test::module_tls() */
/* without cu_ipc_ns, RMA goes in active messages of a few KiB: slow */
const size_t FALLBACK_SIZES[] = {8, 64 * 1024, 4 * MiB + 8192 + 8};


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
    uint64_t offset; /* into the server's buffer */
};

/* What the test tells the server once its namespaces are wired */
struct pair_go {
    int32_t  chunked;    /* its buffer in chunks of the granularity */
    int32_t  device;     /* the ordinal its buffer lives on */
    uint64_t num_chunks; /* chunked: their number; 0: MAX_SIZE bytes */
    uint32_t nofile;     /* its soft RLIMIT_NOFILE once its buffer is
                          * registered; 0: the one it inherited */
};

/* What the server sends first */
struct pair_hello {
    int32_t  detected_cuda;  /* its own cuMemCreate buffer classed CUDA */
    int32_t  detected_host;  /* a host buffer classed host */
    uint64_t addr;           /* its buffer */
    uint64_t size;           /* its size */
    uint64_t chunk_size;     /* chunked: the size of a chunk */
    uint8_t  gpu_uuid[16];   /* of the GPU its buffer lives on */
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
    char started = 1, client_addr[4096];
    ucp_mem_h memh;
    pair_cmd cmd;
    pair_go go;
    CUdevice device;

    /* our namespaces exist (peer_exec unshared them before exec): say
     * so, then the test sets up our network */
    if (!chan.send(&started, 1) || !chan.recv_obj(go, 60000) ||
        !test::cuda_init()) {
        return 1;
    }
    const size_t gran = test::cuda_vmm_granularity(go.device);
    test::cuda_vmm_memory buf((go.chunked && go.num_chunks) ?
                              go.num_chunks * gran : MAX_SIZE,
                              go.chunked, go.device);
    ucp_side side;
    CUcontext buf_ctx;
    /* the buffer's device has its primary context active, as in a program
     * that works on that GPU: UCX's own cuda_copy (where it is loaded)
     * copies VMM memory in the primary context of its device, and refuses
     * an inactive one */
    if (!side.ok() ||
        (uct_cuda_ipc_ns_drv.cuDeviceGet(&device, go.device) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRetain(&buf_ctx, device) !=
         CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuDeviceGetUuid((CUuuid*)hello.gpu_uuid,
                                             device) != CUDA_SUCCESS)) {
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
    hello.addr       = (uintptr_t)buf.ptr();
    hello.size       = buf.size();
    hello.chunk_size = go.chunked ? gran : 0;
    if (go.nofile != 0) {
        /* from now on, what the module and UCX open counts against it; the
         * emulator's memfds of our allocations stay above (they were
         * opened under the inherited limit: cudasim/README.md) */
        struct rlimit lim;
        getrlimit(RLIMIT_NOFILE, &lim);
        lim.rlim_cur = go.nofile;
        if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
            return 8;
        }
    }

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
        uint8_t *at    = (uint8_t*)buf.ptr() + cmd.offset;
        if ((cmd.offset > buf.size()) || (cmd.size > buf.size() - cmd.offset)) {
            return 7;
        }
        switch (cmd.op) {
        case OP_RECV:
            result = side.wait(side.recv(at, cmd.size, cmd.seed), nullptr);
            if ((result == UCS_OK) && !seed_holds(at, cmd.seed, cmd.size)) {
                result = UCS_ERR_MESSAGE_TRUNCATED; /* stands for "wrong bytes" */
            }
            break;
        case OP_SEND:
            seed_fill(at, cmd.seed, cmd.size);
            result = side.wait(side.send(at, cmd.size, cmd.seed), nullptr);
            break;
        case OP_FILL:
            seed_fill(at, cmd.seed, cmd.size);
            break;
        case OP_CHECK:
            result = seed_holds(at, cmd.seed, cmd.size) ? UCS_OK :
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


/* Counts the warnings of cu_ipc_ns about keys of GPUs we cannot use, and
 * keeps the last one, while installed */
class gpu_warnings {
public:
    gpu_warnings()
    {
        s_count = 0;
        s_last.clear();
        ucs_log_push_handler(handler);
    }
    ~gpu_warnings() { ucs_log_pop_handler(); }

    static int         s_count;
    static std::string s_last;

private:
    static ucs_log_func_rc_t
    handler(const char *file, unsigned line, const char *function,
            ucs_log_level_t level, const ucs_log_component_config_t *comp,
            const char *format, va_list ap)
    {
        char msg[2048];
        va_list aq;

        va_copy(aq, ap);
        vsnprintf(msg, sizeof(msg), format, aq);
        va_end(aq);
        if ((level == UCS_LOG_LEVEL_WARN) &&
            strstr(msg, "which this process cannot use")) {
            ++s_count;
            s_last = msg;
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
};

int         gpu_warnings::s_count;
std::string gpu_warnings::s_last;


/* Where the pods run and what memory they move */
struct pair_setup {
    bool other_pid_ns;
    bool other_net_ns;
    bool chunked;        /* both buffers in chunks */
    /* the server's GPUs: nullptr, the test's; else CUDASIM_VISIBLE_DEVICES
     * of a machine of two GPUs, the test process seeing GPU 0 only */
    const char *server_gpus;
    int server_device;   /* the server's ordinal of its buffer's GPU */
    size_t num_chunks;   /* chunked: the server's number of chunks; 0: as
                          * many as MAX_SIZE holds */
    unsigned nofile;     /* the server's soft RLIMIT_NOFILE while the test
                          * runs; 0: ours */
    const char *tls;     /* UCX_TLS of both sides; nullptr:
                          * test::module_tls() */
};


class ucp_pair_base : public ::testing::Test {
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
        m_side.reset();
        m_peer.reset();
        m_env.clear();
        if (!m_sock_dir.empty()) {
            rmdir(m_sock_dir.c_str());
        }
        unsetenv("UCX_TLS");
        unsetenv("UCX_NET_DEVICES");
        unsetenv("UCX_CUDA_IPC_NS_SOCK_DIR");
    }

    /* starts the server as @a setup says, our side, and connects both;
     * m_hello is what the server sent */
    void start(const pair_setup &setup)
    {
        test::peer_options opts;
        char server_addr[4096];

        setenv("UCX_TLS", (setup.tls != nullptr) ? setup.tls :
                          test::module_tls().c_str(), 1);
        test::use_pod_network_device();
        if (setup.other_net_ns) {
            char tmpl[] = "/tmp/cuda_ipc_ns_ucp.XXXXXX";
            ASSERT_NE(nullptr, mkdtemp(tmpl));
            m_sock_dir = tmpl;
            chmod(tmpl, 0700);
            setenv("UCX_CUDA_IPC_NS_SOCK_DIR", tmpl, 1);
        }
        if (setup.server_gpus != nullptr) {
            /* the server's driver reads them at its cuInit */
            test::scoped_env count("CUDASIM_DEVICE_COUNT", "2");
            test::scoped_env gpus("CUDASIM_VISIBLE_DEVICES",
                                  setup.server_gpus);
            start_peer(setup, opts);
        } else {
            start_peer(setup, opts);
        }
        ASSERT_TRUE(m_peer);
        char started = 0;
        ASSERT_EQ(1, m_peer->chan().recv(&started, 1, 60000))
                << "the peer never started";
        if (setup.other_net_ns) {
            test::connect_pod(m_peer->pid());
        }
        pair_go go = {setup.chunked, setup.server_device, setup.num_chunks,
                      setup.nofile};
        ASSERT_TRUE(m_peer->chan().send_obj(go));

        m_side.reset(new ucp_side());
        ASSERT_TRUE(m_side->ok());
        ssize_t len = m_peer->chan().recv(server_addr, sizeof(server_addr),
                                          60000);
        ASSERT_GT(len, 0);
        ASSERT_TRUE(m_peer->chan().recv_obj(m_hello, 60000));
        EXPECT_TRUE(m_hello.detected_cuda) << "server: its cuMemCreate buffer";
        EXPECT_TRUE(m_hello.detected_host) << "server: a host buffer";
        ASSERT_EQ(UCS_OK, m_side->connect(bytes_t(server_addr,
                                                  server_addr + len)));
        bytes_t address = m_side->address();
        ASSERT_TRUE(m_peer->chan().send(address.data(), address.size()));
    }

    void start_peer(const pair_setup &setup, test::peer_options opts)
    {
        opts.new_pid_ns = setup.other_pid_ns;
        opts.new_net_ns = setup.other_net_ns;
        m_peer.reset(new test::peer("ucp_pair_server", opts));
    }

    /* the server ends, then our endpoint */
    void stop()
    {
        pair_cmd cmd = {OP_EXIT, 0, 0, 0};
        ASSERT_TRUE(m_peer->chan().send_obj(cmd));
        ASSERT_TRUE(m_side->chan_recv(m_peer->chan(), &cmd, sizeof(cmd)));
        m_side->close_ep();
        EXPECT_EQ(0, m_peer->wait());
    }

    /* a command to the server, progressing our worker; its result */
    int32_t call(uint32_t op, uint32_t seed, size_t size, size_t offset = 0)
    {
        pair_cmd cmd = {op, seed, size, offset};
        int32_t result = UCS_ERR_LAST;
        EXPECT_TRUE(m_peer->chan().send_obj(cmd));
        EXPECT_TRUE(m_side->chan_recv(m_peer->chan(), &result,
                                      sizeof(result)));
        return result;
    }

    ucs_status_t flush()
    {
        ucp_request_param_t param = {};
        return m_side->wait(ucp_ep_flush_nbx(m_side->ep, &param), nullptr);
    }

    /* tag to the server and back, RMA put and get (what NIXL does) of @a
     * size bytes, at @a offset in both buffers; bytes checked */
    void tag_and_rma(uint8_t *local, ucp_rkey_h rkey, size_t size,
                     size_t offset, uint32_t *seed, bool rma = true)
    {
        SCOPED_TRACE("size " + std::to_string(size) + " at offset " +
                     std::to_string(offset));
        ucp_request_param_t param = {};
        uint8_t *at = local + offset;

        /* tag: to the server, then back */
        seed_fill(at, ++*seed, size);
        pair_cmd cmd = {OP_RECV, *seed, size, offset};
        ASSERT_TRUE(m_peer->chan().send_obj(cmd));
        EXPECT_EQ(UCS_OK, m_side->wait(m_side->send(at, size, *seed),
                                       nullptr));
        int32_t result = UCS_ERR_LAST;
        ASSERT_TRUE(m_side->chan_recv(m_peer->chan(), &result,
                                      sizeof(result)));
        EXPECT_EQ(UCS_OK, result) << "tag to the server";

        ucs_status_ptr_t rreq = m_side->recv(at, size, ++*seed);
        cmd = {OP_SEND, *seed, size, offset};
        ASSERT_TRUE(m_peer->chan().send_obj(cmd));
        EXPECT_EQ(UCS_OK, m_side->wait(rreq, nullptr));
        ASSERT_TRUE(m_side->chan_recv(m_peer->chan(), &result,
                                      sizeof(result)));
        EXPECT_EQ(UCS_OK, result);
        EXPECT_TRUE(seed_holds(at, *seed, size)) << "tag from the server";

        if (!rma) {
            return;
        }
        seed_fill(at, ++*seed, size);
        EXPECT_EQ(UCS_OK, m_side->wait(ucp_put_nbx(m_side->ep, at, size,
                                                   m_hello.addr + offset,
                                                   rkey, &param),
                                       nullptr));
        EXPECT_EQ(UCS_OK, flush());
        EXPECT_EQ(UCS_OK, call(OP_CHECK, *seed, size, offset)) << "put";

        EXPECT_EQ(UCS_OK, call(OP_FILL, ++*seed, size, offset));
        EXPECT_EQ(UCS_OK, m_side->wait(ucp_get_nbx(m_side->ep, at, size,
                                                   m_hello.addr + offset,
                                                   rkey, &param),
                                       nullptr));
        EXPECT_EQ(UCS_OK, flush());
        EXPECT_TRUE(seed_holds(at, *seed, size)) << "get";
    }

    static uint64_t cache_uses()
    {
        uct_cuda_ipc_ns_cache_stats_t stats;
        uct_cuda_ipc_ns_cache_get_stats(&stats);
        return stats.hits + stats.misses;
    }

    std::string                              m_sock_dir;
    std::vector<std::unique_ptr<test::scoped_env>> m_env;
    std::unique_ptr<test::peer>              m_peer;
    std::unique_ptr<ucp_side>                m_side;
    pair_hello                               m_hello = {};
};


class ucp_pair : public ucp_pair_base,
                 public ::testing::WithParamInterface<bool /* other netns */> {
};


TEST_P(ucp_pair, tag_and_rma_on_cuda_buffers_across_namespaces) {
    const bool other_netns = GetParam();

    start({true, other_netns, false, nullptr, 0});
    if (HasFatalFailure()) {
        return;
    }

    /* our own buffers, not allocated through UCP */
    test::cuda_vmm_buffer local(MAX_SIZE);
    std::vector<char> host(4096);
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, m_side->detect(local.ptr(), local.size()));
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, m_side->detect(host.data(), host.size()));

    ucp_rkey_h rkey;
    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(m_side->ep, m_hello.rkey, &rkey));

    uint64_t before = cache_uses();
    uint32_t seed = 1;
    for (size_t size : SIZES) {
        tag_and_rma((uint8_t*)local.ptr(), rkey, size, 0, &seed);
    }

    /* the data went through cu_ipc_ns mappings of the server's buffer */
    EXPECT_GT(cache_uses(), before + 4);

    ucp_rkey_destroy(rkey);
    stop();
}


INSTANTIATE_TEST_SUITE_P(namespaces, ucp_pair, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ?
                                                "other_pid_and_net_ns" :
                                                "other_pid_ns");
                         });



/*
 * Beside UCX's own CUDA transports (a UCX built with CUDA that found
 * libcuda.so.1, the emulator there), on the server's cuMemCreate buffer and
 * ours, tag and RMA of every size, bytes checked: within one PID namespace
 * stock cuda_ipc carries RMA. Between pods (same machine: the same system
 * id) UCP still picks stock cuda_ipc for an RMA lane, whose import refuses a
 * key of another PID namespace (UCS_ERR_UNREACHABLE): a put then fails, or
 * UCP carries it another way (runs differ; the test prints which), while tag
 * messages pass; with
 * UCX_TLS=cuda_copy,tcp UCP moves RMA another way (active messages over
 * tcp, cuda_copy staging); named beside it, cu_ipc_ns carries RMA. The lane
 * is read from ucp_ep_print_info and from our mapping cache.
 */
struct stock_setup {
    const char *name;
    bool       other_pid_ns;
    bool       other_net_ns;
    const char *tls;
    const char *rma_tl;  /* the transport of an RMA lane; nullptr: neither
                          * cuda_ipc nor cu_ipc_ns has one */
    bool       rma_fails; /* puts fail with UCS_ERR_UNREACHABLE */
};


class ucp_pair_stock : public ucp_pair_base,
                       public ::testing::WithParamInterface<stock_setup> {
protected:
    void SetUp() override
    {
        ucp_pair_base::SetUp();
        if (IsSkipped()) {
            return;
        }
        if (!test::ucx_cuda_copy_loaded()) {
            GTEST_SKIP() << "needs UCX's own cuda_copy and cuda_ipc: a UCX "
                            "built with CUDA, libcuda.so.1 on the library "
                            "path";
        }
    }

    /* the transports of our endpoint's RMA lanes ("rma_bw" in
     * ucp_ep_print_info), one per line */
    std::string rma_lanes()
    {
        char *buf = nullptr;
        size_t len = 0;
        FILE *stream = open_memstream(&buf, &len);
        std::string lanes, line;

        ucp_ep_print_info(m_side->ep, stream);
        fclose(stream);
        std::istringstream in(std::string(buf, len));
        free(buf);
        while (std::getline(in, line)) {
            if ((line.find("lane[") != std::string::npos) &&
                (line.find("rma_bw") != std::string::npos)) {
                lanes += line + "\n";
            }
        }
        return lanes;
    }
};


TEST_P(ucp_pair_stock, tag_and_rma_on_the_lane_ucp_picks) {
    const stock_setup &param = GetParam();

    start({param.other_pid_ns, param.other_net_ns, false, nullptr, 0, 0, 0,
           param.tls});
    if (HasFatalFailure()) {
        return;
    }
    test::cuda_vmm_buffer local(MAX_SIZE);
    ucp_rkey_h rkey;
    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(m_side->ep, m_hello.rkey, &rkey));

    const std::string lanes = rma_lanes();
    uint64_t before = cache_uses();
    uint32_t seed = 1;
    if (param.rma_tl == nullptr) {
        /* RMA in active messages of a few KiB: slow */
        for (size_t size : FALLBACK_SIZES) {
            tag_and_rma((uint8_t*)local.ptr(), rkey, size, 0, &seed);
        }
    } else {
        for (size_t size : SIZES) {
            tag_and_rma((uint8_t*)local.ptr(), rkey, size, 0, &seed,
                        !param.rma_fails);
        }
    }
    if (param.rma_fails) {
        /* stock cuda_ipc's import refuses a key of another PID namespace
         * (UCS_ERR_UNREACHABLE): the put fails, when posted or at the
         * flush, or UCP carries it another way; never does it report
         * success with its bytes missing */
        ucp_request_param_t req = {};
        seed_fill((uint8_t*)local.ptr(), ++seed, 65536);
        ucs_status_t put = m_side->wait(ucp_put_nbx(m_side->ep, local.ptr(),
                                                    65536, m_hello.addr, rkey,
                                                    &req),
                                        nullptr);
        ucs_status_t flushed = flush();
        int32_t landed = call(OP_CHECK, seed, 65536);
        EXPECT_TRUE((put != UCS_OK) || (flushed != UCS_OK) ||
                    (landed == UCS_OK))
                << "a put through stock cuda_ipc between pods reported "
                   "success, its bytes missing";
        printf("stock cuda_ipc between pods: put %s, flush %s, bytes %s\n",
               ucs_status_string(put), ucs_status_string(flushed),
               (landed == UCS_OK) ? "landed" : "missing");
    }

    for (const char *tl : {"cuda_ipc/", "cu_ipc_ns/"}) {
        bool expected = (param.rma_tl != nullptr) &&
                        !strncmp(tl, param.rma_tl, strlen(param.rma_tl)) &&
                        (tl[strlen(param.rma_tl)] == '/');
        EXPECT_EQ(expected, lanes.find(tl) != std::string::npos)
                << tl << " RMA lane; UCX_TLS=" << param.tls << "; RMA lanes:\n"
                << lanes;
    }
    if ((param.rma_tl != nullptr) && !strcmp(param.rma_tl, "cu_ipc_ns")) {
        EXPECT_GT(cache_uses(), before + 4) << "through our mapping cache";
    } else {
        EXPECT_EQ(before, cache_uses()) << "our mapping cache not used";
    }

    ucp_rkey_destroy(rkey);
    stop();
}


INSTANTIATE_TEST_SUITE_P(
        stock, ucp_pair_stock,
        ::testing::Values(
                stock_setup{"cuda_ipc_one_pid_ns", false, false,
                            "cuda_copy,cuda_ipc,tcp", "cuda_ipc", false},
                stock_setup{"cuda_ipc_fails_other_pid_ns", true, false,
                            "cuda_copy,cuda_ipc,tcp", "cuda_ipc", true},
                stock_setup{"fallback_other_pid_ns", true, false,
                            "cuda_copy,tcp", nullptr, false},
                stock_setup{"fallback_other_pid_and_net_ns", true, true,
                            "cuda_copy,tcp", nullptr, false},
                stock_setup{"cu_ipc_ns_beside_stock_other_pid_ns", true,
                            false, "cu_ipc_ns,cuda_copy,cuda_ipc,tcp",
                            "cu_ipc_ns", false}),
        [](const ::testing::TestParamInfo<stock_setup> &info) {
            return std::string(info.param.name);
        });


/* The emulator's configuration of GPUs (CUDASIM_*) takes effect */
bool driver_is_emulator()
{
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
    void *lib        = (path == nullptr) ? nullptr :
                       dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    bool emulator    = (lib != nullptr) &&
                       (dlsym(lib, "cudasim_is_emulator") != nullptr);

    if (lib != nullptr) {
        dlclose(lib);
    }
    return emulator;
}


/* The emulator's granularity in this process (cudasim_granularity_reload)
 * and in the peers it starts (CUDASIM_VMM_GRANULARITY), restored after:
 * pods on one machine's GPU have one granularity */
class emulated_granularity {
public:
    explicit emulated_granularity(size_t gran) :
        m_env(new test::scoped_env("CUDASIM_VMM_GRANULARITY",
                                   std::to_string(gran)))
    {
        m_ok = (reload() == gran);
    }
    ~emulated_granularity()
    {
        m_env.reset();
        reload();
    }
    bool ok() const { return m_ok; }
private:
    static size_t reload()
    {
        const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
        void *lib        = (path == nullptr) ? nullptr :
                           dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        size_t gran      = 0;

        if (lib != nullptr) {
            auto func = (size_t (*)(void))dlsym(lib,
                                                "cudasim_granularity_reload");
            gran      = (func != nullptr) ? func() : 0;
            dlclose(lib);
        }
        return gran;
    }

    std::unique_ptr<test::scoped_env> m_env;
    bool                              m_ok;
};


/* What the pods of ucp_pair_chunks move */
struct chunks_setup {
    const char *name;
    bool        other_net_ns;
    size_t      num_chunks;  /* each side's; 0: MAX_SIZE bytes */
    size_t      gran;        /* the emulated granularity of both sides;
                              * 0: the driver's */
};


/*
 * Both pods on chunked memory, registered whole by ucp_mem_map (flags 0, as
 * NIXL registers): each side's buffer num_chunks allocations of the
 * granularity (the emulator's smallest, 4 KiB, for 4 to 2,048 chunks; the
 * driver's for MAX_SIZE in 32 of 2 MiB), each mapped back to back; tag both
 * ways and RMA put/get at offsets that cross chunk boundaries, bytes
 * checked. Both processes run at
 * RLIMIT_NOFILE 1024 while the data moves: no side may hold an fd per chunk
 * (2,048 chunks: ours import every one of the server's, whose broker
 * exports them one by one).
 */
class ucp_pair_chunks : public ucp_pair_base,
                        public ::testing::WithParamInterface<chunks_setup> {
};


TEST_P(ucp_pair_chunks, tag_and_rma_across_chunk_boundaries) {
    const chunks_setup &setup = GetParam();
    const unsigned nofile     = 1024;
    const bool emulator       = driver_is_emulator();
    std::unique_ptr<emulated_granularity> gran;

    if (setup.gran == 0) {
        /* MAX_SIZE in chunks of the granularity */
    } else if (emulator) {
        gran.reset(new emulated_granularity(setup.gran));
        ASSERT_TRUE(gran->ok()) << "cudasim_granularity_reload";
    } else if (setup.num_chunks * test::cuda_vmm_granularity() >
               4 * MAX_SIZE) {
        GTEST_SKIP() << setup.num_chunks << " chunks of the GPU's granularity"
                        " are more memory than the test moves";
    }
    /* room above 1024 for the emulator's memfds of either side's chunks
     * (the server inherits it), then 1024 once they are allocated */
    test::scoped_nofile room(1024 + 1024 + setup.num_chunks, true);
    if (!room.ok()) {
        GTEST_SKIP() << "the hard RLIMIT_NOFILE leaves no room for the "
                        "emulator's memfds above " << nofile;
    }
    start({true, setup.other_net_ns, true, nullptr, 0, setup.num_chunks,
           nofile});
    if (HasFatalFailure()) {
        return;
    }

    const size_t size  = m_hello.size;
    const size_t chunk = m_hello.chunk_size;
    const size_t n     = size / chunk;
    ASSERT_EQ(setup.num_chunks ? setup.num_chunks : MAX_SIZE / chunk, n);
    ASSERT_GE(n, 4u) << "the spans below need chunks";
    ASSERT_EQ(chunk, test::cuda_vmm_granularity());
    test::cuda_vmm_chunks local(n);
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, m_side->detect(local.ptr(), local.size()));

    ucp_rkey_h rkey;
    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(m_side->ep, m_hello.rkey, &rkey));

    struct span {
        size_t offset, size;
    };
    std::vector<span> spans = {
        {chunk - 8, 16},                      /* short: one boundary */
        {chunk / 2, 3 * chunk},               /* three */
        {size - chunk - 3, chunk + 3}         /* the last one, to the end */
    };
    if (n >= 26) {
        spans.push_back({5 * chunk + chunk / 4, 20 * chunk + 123}); /* twenty,
                                                            ragged ends */
    }
    spans.push_back({0, size});               /* the whole registration */

    test::scoped_nofile limit(nofile);
    ASSERT_TRUE(limit.ok());
    uct_cuda_ipc_ns_cache_stats_t before, after;
    uct_cuda_ipc_ns_cache_get_stats(&before);
    uint32_t seed = 1;
    for (const auto &sp : spans) {
        tag_and_rma((uint8_t*)local.ptr(), rkey, sp.size, sp.offset, &seed);
    }

    /* put and get of the whole range went through cu_ipc_ns and imported
     * every chunk of the server's, none of them twice */
    uct_cuda_ipc_ns_cache_get_stats(&after);
    EXPECT_GE(after.misses - before.misses, n);
    EXPECT_GE(after.regions, n);

    ucp_rkey_destroy(rkey);
    stop();
}


INSTANTIATE_TEST_SUITE_P(
        namespaces, ucp_pair_chunks,
        ::testing::Values(
                /* MAX_SIZE in chunks of the driver's granularity */
                chunks_setup{"other_pid_ns", false, 0, 0},
                chunks_setup{"other_pid_and_net_ns", true, 0, 0},
                chunks_setup{"other_pid_ns_4_chunks", false, 4, 4096},
                chunks_setup{"other_pid_ns_64_chunks", false, 64, 4096},
                chunks_setup{"other_pid_and_net_ns_64_chunks", true, 64,
                             4096},
                chunks_setup{"other_pid_ns_2048_chunks", false, 2048, 4096}),
        [](const ::testing::TestParamInfo<chunks_setup> &info) {
            return std::string(info.param.name);
        });


struct gpus_setup {
    bool other_pid_ns;
    bool same_gpu;
};


/*
 * Pods on a machine of two GPUs; we see GPU 0 only. The server sees
 * - GPU 1 only, its buffer there: each side refuses the other's key at
 *   unpack (one warning per peer process and GPU, naming both GPUs), and UCP
 *   moves the data another way: tag through cu_cpy_ns and tcp, RMA with
 *   protocols v2 through active messages packed by cu_cpy_ns (protocols v1
 *   would copy device memory with the CPU, docs/ucp.md); cu_ipc_ns maps
 *   nothing;
 * - GPUs 1 and 0, its buffer on GPU 0 (its ordinal 1): the same GPU as ours,
 *   so cu_ipc_ns moves the data.
 */
class ucp_pair_gpus : public ucp_pair_base,
                      public ::testing::WithParamInterface<gpus_setup> {
protected:
    void SetUp() override
    {
        ucp_pair_base::SetUp();
        if (!IsSkipped() && !driver_is_emulator()) {
            GTEST_SKIP() << "needs the emulator's GPUs (CUDASIM_DEVICE_COUNT, "
                            "CUDASIM_VISIBLE_DEVICES)";
        }
    }
};


TEST_P(ucp_pair_gpus, key_of_a_gpu_we_cannot_use_is_refused) {
    const bool same_gpu = GetParam().same_gpu;
    char theirs[UCT_CUDA_IPC_NS_GPU_UUID_STR_MAX];
    char ours[UCT_CUDA_IPC_NS_GPU_UUID_STR_MAX];
    CUuuid uuid;

    ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuDeviceGetUuid(&uuid, 0));
    uct_cuda_ipc_ns_gpus_uuid_str((const uint8_t*)uuid.bytes, ours,
                                  sizeof(ours));
    if (!same_gpu) {
        m_env.emplace_back(new test::scoped_env("UCX_PROTO_ENABLE", "y"));
    }
    gpu_warnings warnings;
    start({GetParam().other_pid_ns, false, false, same_gpu ? "1,0" : "1",
           same_gpu ? 1 : 0});
    if (HasFatalFailure()) {
        return;
    }
    uct_cuda_ipc_ns_gpus_uuid_str(m_hello.gpu_uuid, theirs, sizeof(theirs));
    EXPECT_EQ(same_gpu, !strcmp(ours, theirs)) << ours << " " << theirs;

    test::cuda_vmm_buffer local(MAX_SIZE);
    ucp_rkey_h rkey, again;
    /* a key of a GPU we cannot use is still unpacked: without cu_ipc_ns */
    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(m_side->ep, m_hello.rkey, &rkey));
    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(m_side->ep, m_hello.rkey, &again));
    ucp_rkey_destroy(again);

    uint64_t before = cache_uses();
    uint32_t seed   = 1;
    if (same_gpu) {
        for (size_t size : SIZES) {
            tag_and_rma((uint8_t*)local.ptr(), rkey, size, 0, &seed);
        }
    } else {
        for (size_t size : FALLBACK_SIZES) {
            tag_and_rma((uint8_t*)local.ptr(), rkey, size, 0, &seed);
        }
    }

    if (same_gpu) {
        EXPECT_EQ(0, gpu_warnings::s_count) << gpu_warnings::s_last;
        EXPECT_GT(cache_uses(), before + 4) << "cu_ipc_ns moved nothing";
    } else {
        EXPECT_EQ(1, gpu_warnings::s_count) << "one warning for two keys";
        EXPECT_NE(std::string::npos, gpu_warnings::s_last.find(theirs))
                << gpu_warnings::s_last;
        EXPECT_NE(std::string::npos, gpu_warnings::s_last.find(ours))
                << gpu_warnings::s_last;
        EXPECT_EQ(before, cache_uses()) << "cu_ipc_ns mapped the memory";
    }

    ucp_rkey_destroy(rkey);
    stop();
}


INSTANTIATE_TEST_SUITE_P(
        pods, ucp_pair_gpus,
        ::testing::Values(gpus_setup{false, false}, gpus_setup{false, true},
                          gpus_setup{true, false}, gpus_setup{true, true}),
        [](const ::testing::TestParamInfo<gpus_setup> &info) {
            return std::string(info.param.same_gpu ? "same_gpu" :
                                                     "other_gpu") +
                   (info.param.other_pid_ns ? "_other_pid_ns" :
                                              "_same_pid_ns");
        });

} // namespace
