/*
 * UCP in threads: one exporter, pid 1 of another PID namespace, serves one
 * CUDA buffer; this process moves data to and from it with put/get from
 * several threads, UCX_TLS=cu_ipc_ns,cu_cpy_ns,tcp:
 *   - several UCP workers of one context, a worker per thread (what a
 *     process with a worker per progress thread does): they share the
 *     process-wide mapping cache, one mapping for the buffer;
 *   - one UCS_THREAD_MODE_MULTI worker and endpoint driven from several
 *     threads at once (posting, flushing and progressing), as NIXL drives
 *     its worker from the caller and its progress thread.
 * Each thread owns a slice: it puts a pattern, gets it back into a second
 * buffer and checks it, many rounds; the exporter checks the last pattern
 * of every slice. The TSan run of contrib/run-sanitizers.sh runs these.
 */
#include "common/cuda_alloc.h"
#include "common/uct_util.h"
#include "common/peer.h"
#include "common/pod_net.h"
#include "common/ucp_side.h"

extern "C" {
#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_driver.h"
}

#include <gtest/gtest.h>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>


namespace {

typedef std::vector<uint8_t> bytes_t;

const size_t MiB         = 1ul << 20;
const int    NUM_THREADS = 4;
const int    ROUNDS      = 8;
const size_t SLICE       = 4 * MiB;
const int    WAIT_MS     = 60000;
/* UCX_TLS: cu_ipc_ns, the CUDA copy transport (cu_cpy_ns, or UCX's own
 * cuda_copy where it is loaded) and tcp: test::module_tls() */


enum threads_op : uint32_t {
    OP_CHECK = 1, /* the slice at offset holds seed */
    OP_EXIT
};

struct threads_cmd {
    uint32_t op;
    uint32_t seed;
    uint64_t offset;
    uint64_t size;
};

struct threads_hello {
    uint64_t addr;
    uint32_t rkey_len;
    uint8_t  rkey[1024];
};


/* the round's pattern of thread @a i */
uint32_t slice_seed(int i, int round)
{
    return 1000 * (i + 1) + round;
}


/* Exporter: a CUDA buffer of NUM_THREADS slices, registered for RMA; checks
 * slices on demand, progressing its worker (the importers' wireup) */
TEST_PEER_ROLE(ucp_threads_exporter)
{
    threads_hello hello = {};
    ucp_mem_h memh;
    threads_cmd cmd;

    if (!test::cuda_init()) {
        return 1;
    }
    test::cuda_vmm_buffer buf(NUM_THREADS * SLICE);
    test::ucp_side side;
    if (!side.ok()) {
        return 2;
    }
    if (!side.map_and_pack(buf.ptr(), buf.size(), &memh, hello.rkey,
                           sizeof(hello.rkey), &hello.rkey_len)) {
        return 3;
    }
    hello.addr     = (uintptr_t)buf.ptr();

    bytes_t address = side.address();
    if (!chan.send(address.data(), address.size()) || !chan.send_obj(hello)) {
        return 4;
    }
    while (side.chan_recv(chan, &cmd, sizeof(cmd)) && (cmd.op == OP_CHECK)) {
        int32_t result = UCS_OK;
        if ((cmd.offset + cmd.size > buf.size()) ||
            !test::seed_holds((char*)buf.ptr() + cmd.offset, cmd.seed,
                              cmd.size)) {
            result = UCS_ERR_MESSAGE_TRUNCATED; /* stands for wrong bytes */
        }
        if (!chan.send_obj(result)) {
            return 5;
        }
    }
    ucp_mem_unmap(side.context, memh);
    return (cmd.op == OP_EXIT) ? 0 : 6;
}


/* A UCP context for workers in several threads */
class threads_context {
public:
    threads_context()
    {
        ucp_params_t params = {};
        params.field_mask        = UCP_PARAM_FIELD_FEATURES |
                                   UCP_PARAM_FIELD_MT_WORKERS_SHARED;
        params.features          = UCP_FEATURE_RMA;
        params.mt_workers_shared = 1;
        status = ucp_init(&params, NULL, &context);
    }
    ~threads_context()
    {
        if (status == UCS_OK) {
            ucp_cleanup(context);
        }
    }

    ucs_status_t  status  = UCS_ERR_LAST;
    ucp_context_h context = nullptr;
};


/* A worker and an endpoint to the exporter, with the exporter's key */
struct threads_worker {
    threads_worker(ucp_context_h context, ucs_thread_mode_t mode,
                   const bytes_t &remote, const threads_hello &hello)
    {
        ucp_worker_params_t worker_params = {};
        ucp_ep_params_t ep_params         = {};

        worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        worker_params.thread_mode = mode;
        status = ucp_worker_create(context, &worker_params, &worker);
        if (status != UCS_OK) {
            return;
        }
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep_params.address    = (const ucp_address_t*)remote.data();
        status = ucp_ep_create(worker, &ep_params, &ep);
        if (status == UCS_OK) {
            status = ucp_ep_rkey_unpack(ep, hello.rkey, &rkey);
        }
    }

    ~threads_worker()
    {
        if (rkey != nullptr) {
            ucp_rkey_destroy(rkey);
        }
        if (ep != nullptr) {
            ucp_request_param_t param = {};
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
            wait(ucp_ep_close_nbx(ep, &param));
        }
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
        }
    }

    /* progress until @a req completes (other threads may progress too) */
    ucs_status_t wait(ucs_status_ptr_t req)
    {
        ucs_status_t req_status;
        if (UCS_PTR_IS_ERR(req) || (req == nullptr)) {
            return UCS_PTR_STATUS(req);
        }
        while ((req_status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
            ucp_worker_progress(worker);
        }
        ucp_request_free(req);
        return req_status;
    }

    /* put @a src to the exporter at @a offset, flush, get it into @a dst */
    ucs_status_t put_get(void *src, void *dst, uint64_t raddr, size_t size)
    {
        ucp_request_param_t param = {};
        ucs_status_t st;

        st = wait(ucp_put_nbx(ep, src, size, raddr, rkey, &param));
        if (st == UCS_OK) {
            st = wait(ucp_ep_flush_nbx(ep, &param));
        }
        if (st == UCS_OK) {
            st = wait(ucp_get_nbx(ep, dst, size, raddr, rkey, &param));
        }
        return st;
    }

    ucs_status_t status = UCS_ERR_LAST;
    ucp_worker_h worker = nullptr;
    ucp_ep_h     ep     = nullptr;
    ucp_rkey_h   rkey   = nullptr;
};


class ucp_threads : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&m_ctx));
        m_src_buf.reset(new test::cuda_vmm_buffer(NUM_THREADS * SLICE));
        m_dst_buf.reset(new test::cuda_vmm_buffer(NUM_THREADS * SLICE));
        setenv("UCX_TLS", test::module_tls().c_str(), 1);
        test::use_pod_network_device();
        test::peer_options opts;
        opts.new_pid_ns = true;
        m_peer.reset(new test::peer("ucp_threads_exporter", opts));
        char addr[4096];
        ssize_t len = m_peer->chan().recv(addr, sizeof(addr), WAIT_MS);
        ASSERT_GT(len, 0) << "the exporter never started";
        m_remote.assign(addr, addr + len);
        ASSERT_TRUE(m_peer->chan().recv_obj(m_hello, WAIT_MS));
        m_context.reset(new threads_context());
        ASSERT_EQ(UCS_OK, m_context->status);
    }

    void TearDown() override
    {
        if (m_peer) {
            threads_cmd cmd = {OP_EXIT, 0, 0, 0};
            EXPECT_TRUE(m_peer->chan().send_obj(cmd));
            EXPECT_EQ(0, m_peer->wait());
        }
        unsetenv("UCX_TLS");
        unsetenv("UCX_NET_DEVICES");
    }

    /* run @a body(i) in NUM_THREADS threads, with this thread's CUDA
     * context, each on its own slice of @a src and @a dst */
    template <typename F> void run_threads(F body)
    {
        std::vector<std::thread> threads;
        for (int i = 0; i < NUM_THREADS; ++i) {
            threads.emplace_back([this, i, &body]() {
                EXPECT_EQ(CUDA_SUCCESS,
                          uct_cuda_ipc_ns_drv.cuCtxSetCurrent(m_ctx));
                body(i);
            });
        }
        for (auto &t : threads) {
            t.join();
        }
    }

    /* ROUNDS of put, flush and get of thread @a i's slice through @a w */
    void rounds(threads_worker &w, int i)
    {
        char *src = (char*)m_src_buf->ptr() + i * SLICE;
        char *dst = (char*)m_dst_buf->ptr() + i * SLICE;
        for (int round = 0; round < ROUNDS; ++round) {
            test::seed_fill(src, slice_seed(i, round), SLICE);
            ASSERT_EQ(UCS_OK, w.put_get(src, dst, m_hello.addr + i * SLICE,
                                        SLICE))
                    << "thread " << i << " round " << round;
            ASSERT_TRUE(test::seed_holds(dst, slice_seed(i, round), SLICE))
                    << "thread " << i << " round " << round;
        }
    }

    /* the exporter holds every thread's last pattern */
    void check_exporter()
    {
        for (int i = 0; i < NUM_THREADS; ++i) {
            threads_cmd cmd = {OP_CHECK, slice_seed(i, ROUNDS - 1),
                               i * SLICE, SLICE};
            int32_t result  = UCS_ERR_LAST;
            ASSERT_TRUE(m_peer->chan().send_obj(cmd));
            ASSERT_TRUE(m_peer->chan().recv_obj(result, WAIT_MS));
            EXPECT_EQ(UCS_OK, result) << "slice " << i;
        }
    }

    static uct_cuda_ipc_ns_cache_stats_t cache_stats()
    {
        uct_cuda_ipc_ns_cache_stats_t stats;
        uct_cuda_ipc_ns_cache_get_stats(&stats);
        return stats;
    }

    CUcontext                    m_ctx = nullptr;
    std::unique_ptr<test::peer>  m_peer;
    bytes_t                      m_remote;
    threads_hello                m_hello = {};
    std::unique_ptr<threads_context> m_context; /* after UCX_TLS is set */
    std::unique_ptr<test::cuda_vmm_buffer> m_src_buf, m_dst_buf;
};


TEST_F(ucp_threads, worker_per_thread_shares_the_mapping_cache) {
    std::vector<std::unique_ptr<threads_worker>> workers;
    for (int i = 0; i < NUM_THREADS; ++i) {
        workers.emplace_back(new threads_worker(m_context->context,
                                                UCS_THREAD_MODE_SERIALIZED,
                                                m_remote, m_hello));
        ASSERT_EQ(UCS_OK, workers.back()->status);
    }
    auto before = cache_stats();

    /* a worker may be driven by one thread at a time: each thread its own */
    run_threads([&](int i) { rounds(*workers[i], i); });

    check_exporter();
    auto after = cache_stats();
    EXPECT_EQ(before.regions + 1, after.regions)
            << "one mapping of the exporter's buffer, shared by the workers";
    EXPECT_GE((after.hits + after.misses) - (before.hits + before.misses),
              2u * NUM_THREADS * ROUNDS) << "every put and get through cu_ipc_ns";
}


TEST_F(ucp_threads, multi_thread_worker_driven_from_several_threads) {
    threads_worker shared(m_context->context, UCS_THREAD_MODE_MULTI, m_remote,
                          m_hello);
    ASSERT_EQ(UCS_OK, shared.status);
    auto before = cache_stats();

    /* every thread posts, flushes and progresses the same worker and
     * endpoint; each request may be completed by another thread's progress */
    run_threads([&](int i) { rounds(shared, i); });

    check_exporter();
    auto after = cache_stats();
    EXPECT_EQ(before.regions + 1, after.regions);
    EXPECT_GE((after.hits + after.misses) - (before.hits + before.misses),
              2u * NUM_THREADS * ROUNDS) << "every put and get through cu_ipc_ns";
}

} // namespace
