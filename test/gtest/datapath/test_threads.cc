/*
 * Threads: several UCT workers (one uct_node each: MD, worker, iface) in
 * threads of one process share the process-wide mapping cache and move data
 * to one peer at once; several threads make their first use of the same
 * peer region at once (the cache insert race).
 */
#include "fixture.h"

extern "C" {
#include "cuda_ipc_ns_cache.h"
}

#include <gtest/gtest.h>
#include <dlfcn.h>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>


namespace {

using namespace test;

const int    NUM_THREADS = 4;
const size_t SLICE       = 2 * MiB;


/* a test hook of the emulator; nullptr on a real driver */
void *cudasim_hook(const char *name)
{
    void *dl = dlopen(getenv("UCX_CUDA_IPC_NS_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
    if (dl == nullptr) {
        return nullptr;
    }
    void *sym = dlsym(dl, name);
    dlclose(dl);
    return sym;
}


/* every thread waits here until all arrived */
class start_line {
public:
    explicit start_line(int n) : m_left(n) {}
    void arrive_and_wait()
    {
        std::unique_lock<std::mutex> lock(m_lock);
        if (--m_left == 0) {
            m_cond.notify_all();
        }
        m_cond.wait(lock, [this]() { return m_left == 0; });
    }
private:
    std::mutex              m_lock;
    std::condition_variable m_cond;
    int                     m_left;
};


class threads : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&m_ctx));
        m_agent.reset(new agent());
        ASSERT_TRUE(m_agent->ok());
        for (int i = 0; i < NUM_THREADS; ++i) {
            m_nodes.emplace_back(new uct_node());
            ASSERT_TRUE(m_nodes.back()->ok());
            m_eps.push_back(m_nodes.back()->connect(m_agent->dev_addr(),
                                                    m_agent->iface_addr()));
            ASSERT_NE(nullptr, m_eps.back());
        }
    }

    void TearDown() override
    {
        for (size_t i = 0; i < m_rkeys.size(); ++i) {
            uct_rkey_release(m_nodes[i]->component(), &m_rkeys[i]);
        }
        m_rkeys.clear();
        m_nodes.clear();
        m_agent.reset();
    }

    /* each node unpacks the key of @a remote */
    void unpack_all(const agent_buffer &remote)
    {
        for (auto &node : m_nodes) {
            uct_rkey_bundle_t rkey;
            ASSERT_EQ(UCS_OK, uct_rkey_unpack(node->component(),
                                              remote.rkey.data(), &rkey));
            m_rkeys.push_back(rkey);
        }
    }

    /* run @a body(i) in NUM_THREADS threads, with this thread's context */
    template <typename F> void run_threads(F body)
    {
        std::vector<std::thread> workers;
        for (int i = 0; i < NUM_THREADS; ++i) {
            workers.emplace_back([this, i, &body]() {
                EXPECT_EQ(CUDA_SUCCESS,
                          uct_cuda_ipc_ns_drv.cuCtxSetCurrent(m_ctx));
                body(i);
            });
        }
        for (auto &t : workers) {
            t.join();
        }
    }

    CUcontext                              m_ctx = nullptr;
    std::unique_ptr<agent>                 m_agent;
    std::vector<std::unique_ptr<uct_node>> m_nodes;
    std::vector<uct_ep_h>                  m_eps;
    std::vector<uct_rkey_bundle_t>         m_rkeys;
};


/* every thread puts to its own slice of one peer allocation (one mapping,
 * shared through the cache) and gets it back, many times; bytes checked in
 * the thread and, at the end, in the peer */
TEST_F(threads, workers_in_threads_put_get_one_peer) {
    const int rounds    = 16;
    agent_buffer remote = m_agent->alloc(BUF_VMM, NUM_THREADS * SLICE, 0);
    ASSERT_GE(remote.index, 0);
    unpack_all(remote);
    std::vector<int> src, dst;
    for (int i = 0; i < NUM_THREADS; ++i) {
        src.push_back(m_nodes[i]->alloc(BUF_VMM, NUM_THREADS * SLICE));
        dst.push_back(m_nodes[i]->alloc(BUF_VMM, NUM_THREADS * SLICE));
        ASSERT_GE(src.back(), 0);
        ASSERT_GE(dst.back(), 0);
    }
    auto before = cache_stats();
    start_line line(NUM_THREADS);

    run_threads([&](int i) {
        uct_node &node = *m_nodes[i];
        size_t off     = i * SLICE;
        line.arrive_and_wait();
        for (int round = 0; round < rounds; ++round) {
            uint32_t seed = 1000 * (i + 1) + round;
            node.fill(src[i], seed, off, SLICE);
            ASSERT_EQ(UCS_OK, node.copy(m_eps[i], true,
                                        (char*)node.buf(src[i]).ptr + off,
                                        SLICE, remote.addr + off,
                                        m_rkeys[i].rkey));
            ASSERT_EQ(UCS_OK, node.copy(m_eps[i], false,
                                        (char*)node.buf(dst[i]).ptr + off,
                                        SLICE, remote.addr + off,
                                        m_rkeys[i].rkey));
            ASSERT_TRUE(node.check(dst[i], seed, off, SLICE))
                    << "thread " << i << " round " << round;
        }
    });

    for (int i = 0; i < NUM_THREADS; ++i) {
        EXPECT_TRUE(m_agent->check(remote.index, 1000 * (i + 1) + rounds - 1,
                                   i * SLICE, SLICE)) << "slice " << i;
    }
    auto after = cache_stats();
    EXPECT_EQ(before.regions + 1, after.regions) << "one mapping, shared";
    EXPECT_EQ(2u * NUM_THREADS * rounds,
              (after.hits + after.misses) - (before.hits + before.misses));
}


/* NUM_THREADS threads miss on the same region at once (the emulator holds
 * their imports until all are importing): exactly one mapping survives, the
 * others are unmapped, the counters add up, and every copy is right */
TEST_F(threads, concurrent_first_use_one_mapping) {
    auto barrier = (int (*)(int))cudasim_hook("cudasim_import_barrier");
    auto met     = (int (*)(void))cudasim_hook("cudasim_import_barrier_met");
    if ((barrier == nullptr) || (met == nullptr)) {
        GTEST_SKIP() << "needs the emulator's import barrier";
    }
    agent_buffer remote = m_agent->alloc(BUF_VMM, SLICE, 77);
    ASSERT_GE(remote.index, 0);
    unpack_all(remote);
    std::vector<int> dst;
    for (int i = 0; i < NUM_THREADS; ++i) {
        dst.push_back(m_nodes[i]->alloc(BUF_VMM, SLICE));
        ASSERT_GE(dst.back(), 0);
    }
    auto before = cache_stats();
    ASSERT_EQ(0, barrier(NUM_THREADS));

    run_threads([&](int i) {
        uct_node &node = *m_nodes[i];
        EXPECT_EQ(UCS_OK, node.copy(m_eps[i], false, node.buf(dst[i]).ptr,
                                    SLICE, remote.addr, m_rkeys[i].rkey));
        EXPECT_TRUE(node.check(dst[i], 77, 0, SLICE)) << "thread " << i;
    });
    EXPECT_TRUE(met()) << "the threads did not import at once";
    barrier(0);

    auto after = cache_stats();
    EXPECT_EQ((uint64_t)NUM_THREADS, after.misses - before.misses);
    EXPECT_EQ(before.hits, after.hits);
    EXPECT_EQ(before.regions + 1, after.regions) << "one mapping survives";
    EXPECT_EQ(before.bytes + SLICE, after.bytes);
    EXPECT_EQ((uint64_t)NUM_THREADS - 1, after.unmaps - before.unmaps)
            << "the losers' mappings are released";

    /* and the survivor serves the next use */
    EXPECT_EQ(UCS_OK, m_nodes[0]->copy(m_eps[0], false,
                                       m_nodes[0]->buf(dst[0]).ptr, SLICE,
                                       remote.addr, m_rkeys[0].rkey));
    EXPECT_EQ(after.hits + 1, cache_stats().hits);
}

} // namespace


namespace {

using namespace test;


/* A completion another thread's progress may call */
struct shared_completion {
    uct_completion_t          comp;
    std::atomic<bool>         done{false};
    std::atomic<ucs_status_t> status{UCS_OK};

    shared_completion()
    {
        comp.func   = cb;
        comp.count  = 1;
        comp.status = UCS_OK;
    }
    static void cb(uct_completion_t *comp)
    {
        shared_completion *self = ucs_container_of(comp, shared_completion,
                                                   comp);
        self->status = comp->status;
        self->done   = true;
    }
};


/*
 * A worker of UCS_THREAD_MODE_MULTI is refused at iface open, by both
 * transports, as UCX's IB and tcp transports refuse it: they do not lock
 * their completion queues, and UCP never asks for it (a MULTI UCP worker
 * opens SERIALIZED UCT workers and serializes them itself). SERIALIZED is
 * accepted.
 */
TEST(multi_thread_worker, refused_at_iface_open) {
    struct transport { const char *component, *tl, *dev; };
    const transport transports[] = {{"cuda_ipc_ns", "cu_ipc_ns", "cuda"},
                                    {"cuda_cpy_ns", "cu_cpy_ns", "cuda_cpy"}};

    if (!cuda_init()) {
        GTEST_SKIP() << "no CUDA driver or device";
    }
    for (const transport &t : transports) {
        SCOPED_TRACE(t.tl);
        uct_component_h component = find_component(t.component);
        uct_md_config_t *md_config;
        uct_md_h md;
        ASSERT_NE(nullptr, component);
        ASSERT_EQ(UCS_OK, uct_md_config_read(component, NULL, NULL,
                                             &md_config));
        ASSERT_EQ(UCS_OK, uct_md_open(component, t.component, md_config, &md));
        uct_config_release(md_config);

        for (ucs_thread_mode_t mode : {UCS_THREAD_MODE_SERIALIZED,
                                       UCS_THREAD_MODE_MULTI}) {
            ucs_async_context_t *async;
            uct_worker_h worker;
            uct_iface_config_t *config;
            uct_iface_params_t params = {};
            uct_iface_h iface         = nullptr;

            ASSERT_EQ(UCS_OK, ucs_async_context_create(
                                      UCS_ASYNC_MODE_THREAD_SPINLOCK, &async));
            ASSERT_EQ(UCS_OK, uct_worker_create(async, mode, &worker));
            ASSERT_EQ(UCS_OK, uct_md_iface_config_read(md, t.tl, NULL, NULL,
                                                       &config));
            params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                          UCT_IFACE_PARAM_FIELD_DEVICE;
            params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
            params.mode.device.tl_name  = t.tl;
            params.mode.device.dev_name = t.dev;
            ucs_status_t status = uct_iface_open(md, worker, &params, config,
                                                 &iface);
            uct_config_release(config);
            if (mode == UCS_THREAD_MODE_MULTI) {
                EXPECT_EQ(UCS_ERR_INVALID_PARAM, status) << "MULTI refused";
            } else {
                EXPECT_EQ(UCS_OK, status) << "SERIALIZED accepted";
            }
            if (iface != nullptr) {
                uct_iface_close(iface);
            }
            uct_worker_destroy(worker);
            ucs_async_context_destroy(async);
        }
        uct_md_close(md);
    }
}

} // namespace
