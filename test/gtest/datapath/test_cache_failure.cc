/*
 * Remote mapping cache (hits, limits, pins, stale addresses, CACHE=n), peer
 * identity across PID namespaces, driver faults on the data path, and peer
 * failure — with the counters of the cache and the process's fds as
 * witnesses that nothing leaks.
 */
#include "fixture.h"
#include "common/scratch_dir.h"

#include <gtest/gtest.h>
#include <dirent.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>


namespace {

using namespace test;


TEST_F(datapath_pair, cache_hit_on_repeat) {
    start();
    remote r  = export_buffer(BUF_VMM, 2 * MiB, 1);
    int local = m_node->alloc(BUF_VMM, 2 * MiB);
    auto before = cache_stats();

    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false,
                                       (char*)m_node->buf(local).ptr + i * 4096,
                                       4096, r.buf.addr + i * 4096,
                                       r.rkey.rkey));
    }
    auto after = cache_stats();
    EXPECT_EQ(before.misses + 1, after.misses);
    EXPECT_EQ(before.hits + 4, after.hits);
    EXPECT_EQ(before.regions + 1, after.regions);
    EXPECT_EQ(before.bytes + 2 * MiB, after.bytes);
    EXPECT_TRUE(m_node->check(local, 1, 0, 5 * 4096));
}


TEST_F(datapath_pair, cache_evicts_by_count_lru) {
    start({{"CACHE_MAX_REGIONS", "2"}});
    remote a  = export_buffer(BUF_VMM, 2 * MiB, 1);
    remote b  = export_buffer(BUF_VMM, 2 * MiB, 2);
    remote c  = export_buffer(BUF_VMM, 2 * MiB, 3);
    int local = m_node->alloc(BUF_VMM, 2 * MiB);
    void *p   = m_node->buf(local).ptr;

    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, p, 64, a.buf.addr, a.rkey.rkey));
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, p, 64, b.buf.addr, b.rkey.rkey));
    auto before = cache_stats();
    /* b is the newest: c evicts a */
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, p, 64, c.buf.addr, c.rkey.rkey));
    auto after = cache_stats();
    EXPECT_EQ(before.regions, after.regions);
    EXPECT_EQ(before.evictions + 1, after.evictions);
    EXPECT_EQ(before.unmaps + 1, after.unmaps);
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, p, 64, b.buf.addr, b.rkey.rkey));
    EXPECT_EQ(after.hits + 1, cache_stats().hits) << "b stayed mapped";
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, p, 64, a.buf.addr, a.rkey.rkey));
    EXPECT_EQ(after.misses + 1, cache_stats().misses) << "a was evicted";
    EXPECT_TRUE(m_node->check(local, 1, 0, 64));
}


TEST_F(datapath_pair, cache_evicts_by_size) {
    start({{"CACHE_MAX_SIZE", "5m"}});
    remote a  = export_buffer(BUF_VMM, 2 * MiB, 1);
    remote b  = export_buffer(BUF_VMM, 2 * MiB, 2);
    remote c  = export_buffer(BUF_VMM, 2 * MiB, 3);
    int local = m_node->alloc(BUF_VMM, 2 * MiB);
    void *p   = m_node->buf(local).ptr;

    auto before = cache_stats();
    for (remote *r : {&a, &b, &c}) {
        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, p, 64, r->buf.addr,
                                       r->rkey.rkey));
    }
    auto stats = cache_stats();
    EXPECT_EQ(before.regions + 2, stats.regions);
    EXPECT_EQ(before.bytes + 4 * MiB, stats.bytes);
    EXPECT_EQ(before.evictions + 1, stats.evictions);
}


TEST_F(datapath_pair, cache_never_evicts_a_pinned_region) {
    start({{"CACHE_MAX_REGIONS", "1"}});
    remote a  = export_buffer(BUF_VMM, 4 * MiB, 0);
    remote b  = export_buffer(BUF_VMM, 4 * MiB, 0);
    remote c  = export_buffer(BUF_VMM, 4 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 8 * MiB);
    m_node->fill(local, 9);
    completion ca, cb;
    auto before = cache_stats();

    /* both stay pinned until progress completes them */
    ASSERT_EQ(UCS_INPROGRESS, post(true, m_node->buf(local).ptr, 4 * MiB,
                                   a.buf.addr, a.rkey.rkey, &ca));
    ASSERT_EQ(UCS_INPROGRESS, post(true, (char*)m_node->buf(local).ptr + 4 * MiB,
                                   4 * MiB, b.buf.addr, b.rkey.rkey, &cb));
    auto stats = cache_stats();
    EXPECT_EQ(before.regions + 2, stats.regions)
            << "over the limit rather than unmap a";
    EXPECT_EQ(before.evictions, stats.evictions);

    ASSERT_TRUE(m_node->progress_until([&] { return ca.done && cb.done; }));
    EXPECT_EQ(UCS_OK, ca.status);
    EXPECT_EQ(UCS_OK, cb.status);
    EXPECT_TRUE(m_agent->check(a.buf.index, 9, 0, 4 * MiB));

    /* unpinned now: the next miss brings the cache back to its limit */
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr, 64,
                                   c.buf.addr, c.rkey.rkey));
    stats = cache_stats();
    EXPECT_EQ(before.regions + 1, stats.regions);
    EXPECT_EQ(before.evictions + 2, stats.evictions);
}


TEST_F(datapath_pair, cache_replaces_a_reused_address) {
    start();
    remote old = export_buffer(BUF_VMM, 2 * MiB, 11);
    int local  = m_node->alloc(BUF_VMM, 2 * MiB);
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                   2 * MiB, old.buf.addr, old.rkey.rkey));
    EXPECT_TRUE(m_node->check(local, 11));

    /* the owner frees it and allocates anew at the same address */
    ASSERT_TRUE(m_agent->free(old.buf.index));
    remote fresh = export_buffer(BUF_VMM, 2 * MiB, 12, old.buf.addr);
    ASSERT_EQ(old.buf.addr, fresh.buf.addr) << "the emulator honours hints";
    auto before = cache_stats();
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                   2 * MiB, fresh.buf.addr, fresh.rkey.rkey));
    EXPECT_TRUE(m_node->check(local, 12)) << "the new allocation's bytes";
    auto after = cache_stats();
    EXPECT_EQ(before.misses + 1, after.misses);
    EXPECT_EQ(before.unmaps + 1, after.unmaps) << "stale mapping dropped";
    EXPECT_EQ(before.regions, after.regions);
}


TEST_F(datapath_pair, cache_disabled_unmaps_after_completion) {
    start({{"CACHE", "n"}});
    remote r  = export_buffer(BUF_LEGACY, 2 * MiB, 13);
    int local = m_node->alloc(BUF_VMM, 2 * MiB);
    auto before = cache_stats();

    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                       2 * MiB, r.buf.addr, r.rkey.rkey));
        EXPECT_EQ(before.regions, cache_stats().regions);
    }
    auto after = cache_stats();
    EXPECT_EQ(before.misses + 3, after.misses);
    EXPECT_EQ(before.unmaps + 3, after.unmaps);
    EXPECT_TRUE(m_node->check(local, 13));
}


class peers : public datapath_pair {
};


TEST_F(peers, same_pid_in_two_pid_namespaces_never_share_a_mapping) {
    peer_options opts;
    opts.new_pid_ns = true;
    m_node.reset(new uct_node());
    ASSERT_TRUE(m_node->ok());
    agent a(opts), b(opts);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(1u, a.remote_pid());
    ASSERT_EQ(1u, b.remote_pid());

    uct_ep_h ep_a = m_node->connect(a.dev_addr(), a.iface_addr());
    uct_ep_h ep_b = m_node->connect(b.dev_addr(), b.iface_addr());
    ASSERT_TRUE((ep_a != nullptr) && (ep_b != nullptr));

    /* both children allocate the same way: the addresses may well match */
    agent_buffer ba = a.alloc(BUF_VMM, 2 * MiB, 21);
    agent_buffer bb = b.alloc(BUF_VMM, 2 * MiB, 22, ba.addr);
    uct_rkey_bundle_t ka, kb;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(), ba.rkey.data(), &ka));
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(), bb.rkey.data(), &kb));
    m_rkeys.push_back(ka);
    m_rkeys.push_back(kb);
    int local = m_node->alloc(BUF_VMM, 2 * MiB);
    auto before = cache_stats();

    for (int round = 0; round < 2; ++round) {
        ASSERT_EQ(UCS_OK, m_node->copy(ep_a, false, m_node->buf(local).ptr,
                                       2 * MiB, ba.addr, ka.rkey));
        EXPECT_TRUE(m_node->check(local, 21));
        ASSERT_EQ(UCS_OK, m_node->copy(ep_b, false, m_node->buf(local).ptr,
                                       2 * MiB, bb.addr, kb.rkey));
        EXPECT_TRUE(m_node->check(local, 22));
    }
    auto after = cache_stats();
    EXPECT_EQ(before.misses + 2, after.misses) << "one mapping per peer";
    EXPECT_EQ(before.regions + 2, after.regions);
    EXPECT_EQ(before.peers, after.peers);
    EXPECT_LE(2u, after.peers);
}


/* A driver call of the data path failing once */
struct fault {
    const char  *func;
    const char  *result;
    buffer_kind kind;
    unsigned    nth; /* the call of func that fails */
};

std::ostream &operator<<(std::ostream &os, const fault &f)
{
    return os << f.func;
}


class faults : public datapath_pair,
               public ::testing::WithParamInterface<fault> {
};


TEST_P(faults, op_fails_then_next_succeeds_without_leaks) {
    const fault &f = GetParam();
    int fds        = count_open_fds();
    auto baseline  = cache_stats();
    {
        start();
        remote r  = export_buffer(f.kind, 2 * MiB, 31);
        int local = m_node->alloc(BUF_VMM, 2 * MiB);
        std::string rule = std::string(f.func) + ":" + std::to_string(f.nth) +
                           ":" + f.result;
        if (!fault_reload(rule.c_str())) {
            GTEST_SKIP() << "fault injection needs the emulator";
        }

        ucs_status_t status = m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                           2 * MiB, r.buf.addr, r.rkey.rkey);
        ASSERT_TRUE(fault_reload(""));
        EXPECT_NE(UCS_OK, status) << rule;
        EXPECT_NE(UCS_INPROGRESS, status) << rule;

        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                       2 * MiB, r.buf.addr, r.rkey.rkey));
        EXPECT_TRUE(m_node->check(local, 31));
        m_node->fill(local, 32);
        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, true, m_node->buf(local).ptr,
                                       2 * MiB, r.buf.addr, r.rkey.rkey));
        EXPECT_TRUE(m_agent->check(r.buf.index, 32, 0, 2 * MiB));
        TearDown();
    }
    auto after = cache_stats();
    EXPECT_EQ(baseline.regions, after.regions);
    EXPECT_EQ(baseline.bytes, after.bytes);
    EXPECT_EQ(baseline.peers, after.peers);
    EXPECT_EQ(fds, count_open_fds());
}


INSTANTIATE_TEST_SUITE_P(
        driver_calls, faults,
        ::testing::Values(
            fault{"cuPointerGetAttributes", "CUDA_ERROR_INVALID_VALUE", BUF_VMM,
                  1},
            fault{"cuIpcOpenMemHandle", "CUDA_ERROR_INVALID_CONTEXT", BUF_LEGACY,
                  1},
            fault{"cuMemImportFromShareableHandle", "CUDA_ERROR_INVALID_VALUE",
                  BUF_VMM, 1},
            fault{"cuMemGetAllocationPropertiesFromHandle",
                  "CUDA_ERROR_INVALID_VALUE", BUF_VMM, 1},
            fault{"cuMemAddressReserve", "CUDA_ERROR_OUT_OF_MEMORY", BUF_VMM, 1},
            /* 1: the mapping one granule longer than the key, which checks
             * the length; 2: the mapping itself */
            fault{"cuMemMap", "CUDA_ERROR_OUT_OF_MEMORY", BUF_VMM, 1},
            fault{"cuMemMap", "CUDA_ERROR_INVALID_VALUE", BUF_VMM, 2},
            fault{"cuMemSetAccess", "CUDA_ERROR_INVALID_VALUE", BUF_VMM, 1},
            fault{"cuStreamCreate", "CUDA_ERROR_OUT_OF_MEMORY", BUF_VMM, 1},
            fault{"cuEventCreate", "CUDA_ERROR_OUT_OF_MEMORY", BUF_VMM, 1},
            fault{"cuMemcpyDtoDAsync", "CUDA_ERROR_INVALID_VALUE", BUF_VMM, 1},
            fault{"cuEventRecord", "CUDA_ERROR_LAUNCH_FAILED", BUF_VMM, 1},
            fault{"cuEventQuery", "CUDA_ERROR_ILLEGAL_ADDRESS", BUF_LEGACY, 1},
            /* an allocation of a pool: the pool, its access, the pointer,
             * the pointer's range */
            fault{"cuMemPoolImportFromShareableHandle",
                  "CUDA_ERROR_INVALID_VALUE", BUF_POOL, 1},
            fault{"cuMemPoolSetAccess", "CUDA_ERROR_INVALID_VALUE", BUF_POOL,
                  1},
            fault{"cuMemPoolImportPointer", "CUDA_ERROR_OUT_OF_MEMORY",
                  BUF_POOL, 1},
            fault{"cuMemGetAddressRange", "CUDA_ERROR_INVALID_VALUE",
                  BUF_POOL, 1}),
        [](const ::testing::TestParamInfo<fault> &info) {
            return std::string(info.param.func) +
                   ((info.param.nth > 1) ?
                    "_" + std::to_string(info.param.nth) : "");
        });


class failure : public datapath_pair,
                public ::testing::WithParamInterface<bool /* other PID ns */> {
};


TEST_P(failure, killed_peer_fails_its_ops_and_releases_its_mappings) {
    peer_options opts;
    opts.new_pid_ns = GetParam();
    int fds         = count_open_fds();
    auto baseline   = cache_stats();
    {
        start({}, {}, opts);
        agent survivor(opts);
        ASSERT_TRUE(survivor.ok());
        uct_ep_h ep2 = m_node->connect(survivor.dev_addr(),
                                       survivor.iface_addr());
        ASSERT_NE(nullptr, ep2);

        remote victim_buf = export_buffer(BUF_VMM, 8 * MiB, 41);
        agent_buffer sb   = survivor.alloc(BUF_VMM, 2 * MiB, 42);
        uct_rkey_bundle_t skey;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(), sb.rkey.data(),
                                          &skey));
        m_rkeys.push_back(skey);
        int local = m_node->alloc(BUF_VMM, 8 * MiB);

        /* map both (and learn how to watch each) */
        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                       8 * MiB, victim_buf.buf.addr,
                                       victim_buf.rkey.rkey));
        ASSERT_EQ(UCS_OK, m_node->copy(ep2, false, m_node->buf(local).ptr,
                                       2 * MiB, sb.addr, skey.rkey));
        EXPECT_EQ(baseline.regions + 2, cache_stats().regions);

        /* mid-stream: ops posted, not yet completed, when the peer dies.
         * The emulator's copy engine is held from the first post until the
         * death was detected, so that every op really is in flight then (on
         * a loaded machine, copies could otherwise complete, and be reported
         * OK, before the death is noticed, which is correct behaviour). */
        copy_engine_hold hold(-1);
        if (!hold.ok()) {
            GTEST_SKIP() << "needs the emulator's copy-engine hold";
        }
        std::vector<completion> comps(4);
        for (size_t i = 0; i < comps.size(); ++i) {
            ASSERT_EQ(UCS_INPROGRESS,
                      post(true, (char*)m_node->buf(local).ptr + i * 2 * MiB,
                           2 * MiB, victim_buf.buf.addr + i * 2 * MiB,
                           victim_buf.rkey.rkey, &comps[i]));
        }
        m_agent->kill_now();

        ASSERT_TRUE(m_node->progress_until([&] {
            uct_ep_check(m_ep, 0, nullptr);
            return m_node->ep_errors() > 0;
        }, 60000)) << "ep_check did not report the dead peer";
        for (auto &c : comps) {
            EXPECT_FALSE(c.done) << "completed while its copy was held";
        }
        hold.release();
        ASSERT_TRUE(m_node->progress_until([&] {
            for (auto &c : comps) {
                if (!c.done) {
                    return false;
                }
            }
            return true;
        }));
        for (auto &c : comps) {
            EXPECT_EQ(UCS_ERR_CONNECTION_RESET, c.status);
        }
        EXPECT_EQ(1u, m_node->ep_errors());
        EXPECT_EQ(baseline.regions + 1, cache_stats().regions)
                << "the dead peer's mapping is released";

        completion late;
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET,
                  post(true, m_node->buf(local).ptr, 64, victim_buf.buf.addr,
                       victim_buf.rkey.rkey, &late));

        /* the survivor is unaffected */
        uct_ep_check(ep2, 0, nullptr);
        m_node->fill(local, 43, 0, 2 * MiB);
        ASSERT_EQ(UCS_OK, m_node->copy(ep2, true, m_node->buf(local).ptr,
                                       2 * MiB, sb.addr, skey.rkey));
        EXPECT_TRUE(survivor.check(sb.index, 43, 0, 2 * MiB));
        EXPECT_EQ(1u, m_node->ep_errors());
        TearDown();
    }
    auto after = cache_stats();
    EXPECT_EQ(baseline.regions, after.regions);
    EXPECT_EQ(baseline.bytes, after.bytes);
    EXPECT_EQ(fds, count_open_fds());
}


/*
 * A peer that dies while nothing asks about it (no op, no ep_check, no
 * progress: UCP destroyed its endpoint before the kernel reported the exit,
 * say): its mappings go all the same, from UCX's async thread, where its
 * pidfd is watched (docs/architecture.md, "Peer failure").
 */
TEST_P(failure, dead_peer_mappings_go_with_nothing_asking) {
    peer_options opts;
    opts.new_pid_ns = GetParam();
    auto baseline   = cache_stats();
    start({}, {}, opts);
    remote r  = export_buffer(BUF_VMM, 4 * MiB, 61);
    int local = m_node->alloc(BUF_VMM, 4 * MiB);
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                   4 * MiB, r.buf.addr, r.rkey.rkey));
    ASSERT_EQ(baseline.regions + 1, cache_stats().regions);

    m_agent->kill_now(); /* returns once the peer is gone */
    /* from here no call into the transport: only its counters are read;
     * the time bounds a hang, it is not the expectation */
    auto start_time = std::chrono::steady_clock::now();
    while ((cache_stats().regions != baseline.regions) &&
           (std::chrono::steady_clock::now() - start_time <
            std::chrono::milliseconds(hang_guard_ms(60000)))) {
        std::this_thread::yield();
    }
    EXPECT_EQ(baseline.regions, cache_stats().regions)
            << "the dead peer's mapping stayed while nothing asked about it";
    EXPECT_EQ(baseline.bytes, cache_stats().bytes);
}


/* threads of this process that UCX named "async": its event loop's */
int count_async_threads()
{
    DIR *dir = opendir("/proc/self/task");
    struct dirent *entry;
    int count = 0;

    if (dir == nullptr) {
        return -1;
    }
    while ((entry = readdir(dir)) != nullptr) {
        std::ifstream comm(std::string("/proc/self/task/") + entry->d_name +
                           "/comm");
        std::string name;
        if (std::getline(comm, name) && (name == "async")) {
            ++count;
        }
    }
    closedir(dir);
    return count;
}


/*
 * In a peer: peers watched on UCX's async loop when the module goes, one
 * live and one dead (its failure seen, its endpoint still open, so out of
 * the cache's table). False when the setup failed.
 */
class watched_peers {
public:
    watched_peers() : m_local(m_node.ok() ? m_node.alloc(BUF_VMM, MiB) : -1)
    {
        m_ok = m_live.ok() && m_victim.ok() && (m_local >= 0) &&
               map(m_live) && map(m_victim);
        if (!m_ok) {
            return;
        }
        uint64_t regions = cache_stats().regions;
        m_victim.kill_now();
        /* its watch reported the exit (the time bounds a hang) */
        auto start = std::chrono::steady_clock::now();
        while ((cache_stats().regions == regions) &&
               (std::chrono::steady_clock::now() - start <
                std::chrono::milliseconds(hang_guard_ms(60000)))) {
            std::this_thread::yield();
        }
        m_ok = (cache_stats().regions == regions - 1);
    }

    ~watched_peers()
    {
        for (uct_rkey_bundle_t &rkey : m_rkeys) {
            uct_rkey_release(m_node.component(), &rkey);
        }
    }

    bool ok() const { return m_ok; }

private:
    /* connect to @a ag and map a buffer of it */
    bool map(agent &ag)
    {
        uct_ep_h ep = m_node.connect(ag.dev_addr(), ag.iface_addr());
        agent_buffer r = ag.alloc(BUF_VMM, MiB, 7);
        uct_rkey_bundle_t rkey;

        if ((ep == nullptr) || (r.index < 0) ||
            (uct_rkey_unpack(m_node.component(), r.rkey.data(), &rkey) !=
             UCS_OK)) {
            return false;
        }
        m_rkeys.push_back(rkey);
        return m_node.copy(ep, false, m_node.buf(m_local).ptr, MiB, r.addr,
                           rkey.rkey) == UCS_OK;
    }

    uct_node                       m_node;
    agent                          m_live, m_victim;
    int                            m_local;
    std::vector<uct_rkey_bundle_t> m_rkeys;
    bool                           m_ok = false;
};


/* What a process saw of UCX's async thread when the module went */
struct unload_result {
    int setup_ok;
    int threads_watching; /* UCX's async threads while peers are watched */
    int threads_unloaded; /* the same once the module's unload ran */
};


/*
 * libucs's destructor runs after the module's and frees UCX's async loop's
 * handler table, leaving its thread running: the module must have taken
 * every watch off, which stops the thread (a TSan run saw the thread read
 * the table as a process exited).
 */
TEST_PEER_ROLE(cache_unload_with_watched_peers)
{
    unload_result res = {};
    int go;

    if (!chan.recv_obj(go) || !cuda_init()) {
        chan.send_obj(res);
        return 1;
    }
    {
        watched_peers peers;
        res.setup_ok = peers.ok();
        if (res.setup_ok) {
            res.threads_watching = count_async_threads();
            uct_cuda_ipc_ns_cache_unload();
            res.threads_unloaded = count_async_threads();
        }
    }
    chan.send_obj(res);
    return 0;
}


TEST(cache_unload, takes_every_watch_off_ucx_async_loop) {
    peer runner("cache_unload_with_watched_peers");
    unload_result res = {};
    int go = 1;

    ASSERT_TRUE(runner.chan().send_obj(go));
    ASSERT_TRUE(runner.chan().recv_obj(res, 300000));
    EXPECT_EQ(0, runner.wait());
    ASSERT_TRUE(res.setup_ok);
    EXPECT_EQ(1, res.threads_watching) << "the peers' watches run there";
    EXPECT_EQ(0, res.threads_unloaded)
            << "a watch stayed on UCX's async loop, whose handler table "
               "libucs frees at exit while its thread runs on";
}


/* What a process saw of UCX's async thread when its last md closed */
struct close_result {
    int setup_ok;
    int threads_mapped; /* UCX's async threads with the peer watched */
    int threads_closed; /* the same once the md closed, the rkey still held */
    int released;       /* the rkey's release after that went well */
};


/*
 * Runs in a peer: an unpacked rkey of a process other than its endpoint's
 * peer holds its owner's peer entry (for the identity checks of later ops)
 * and may outlive the md, as UCT releases rkeys through the component. When the last md closes, the mapping cache
 * takes every watch off UCX's async loop: nothing is dispatched to a
 * closed cache, and a test that counts descriptors after its teardown
 * finds no pidfd and no async thread of a peer whose exit was still being
 * handled (a TSan run saw one go away in the middle of the next test).
 */
TEST_PEER_ROLE(cache_close_with_a_held_rkey)
{
    close_result res = {};
    uct_component_h component;
    uct_rkey_bundle_t rkey;
    int go;

    if (!chan.recv_obj(go) || !cuda_init()) {
        chan.send_obj(res);
        return 1;
    }
    agent owner, ep_peer;
    std::unique_ptr<uct_node> node(new uct_node());
    int local = node->ok() ? node->alloc(BUF_VMM, MiB) : -1;
    uct_ep_h ep = (owner.ok() && ep_peer.ok() && (local >= 0)) ?
                  node->connect(ep_peer.dev_addr(), ep_peer.iface_addr()) :
                  nullptr;
    agent_buffer r = (ep != nullptr) ? owner.alloc(BUF_VMM, MiB, 9) :
                                       agent_buffer{-1, 0, {}};
    component = node->component();
    res.setup_ok = (r.index >= 0) &&
                   (uct_rkey_unpack(component, r.rkey.data(), &rkey) ==
                    UCS_OK);
    if (res.setup_ok) {
        res.setup_ok = (node->copy(ep, false, node->buf(local).ptr, MiB,
                                   r.addr, rkey.rkey) == UCS_OK);
        res.threads_mapped = count_async_threads();
        node.reset(); /* the endpoint, the interface and the md: the rkey
                       * holds the owner's entry */
        res.threads_closed = count_async_threads();
        uct_rkey_release(component, &rkey);
        res.released = (count_async_threads() == 0);
    }
    chan.send_obj(res);
    return 0;
}


TEST(cache_unload, last_md_close_takes_every_watch_off) {
    peer runner("cache_close_with_a_held_rkey");
    close_result res = {};
    int go = 1;

    ASSERT_TRUE(runner.chan().send_obj(go));
    ASSERT_TRUE(runner.chan().recv_obj(res, 300000));
    EXPECT_EQ(0, runner.wait());
    ASSERT_TRUE(res.setup_ok);
    EXPECT_EQ(1, res.threads_mapped) << "the peers' watches run there";
    EXPECT_EQ(0, res.threads_closed)
            << "a watch stayed on UCX's async loop after the last md closed";
    EXPECT_TRUE(res.released);
}


/* The same peers, left to the destructors of exit() */
TEST_PEER_ROLE(cache_exit_with_watched_peers)
{
    int go, setup_ok = 0;

    if (!chan.recv_obj(go) || !cuda_init()) {
        chan.send_obj(setup_ok);
        return 1;
    }
    watched_peers *peers = new watched_peers(); /* left to exit() */
    setup_ok = peers->ok();
    chan.send_obj(setup_ok);
    exit(0);
}


/* libucs names what its async loop still held when its destructor ran (a
 * debug line in 1.13, a diag line in 1.22): nothing of ours */
TEST(cache_unload, runs_before_libucs_frees_the_async_loop) {
    scratch_dir dir("cache_unload_log");
    ASSERT_FALSE(dir.path().empty());
    std::string log = dir.path() + "/peer.log";
    scoped_env level("UCX_LOG_LEVEL", "debug");
    scoped_env file("UCX_LOG_FILE", log);
    peer runner("cache_exit_with_watched_peers");
    int go = 1, setup_ok = 0;

    ASSERT_TRUE(runner.chan().send_obj(go));
    ASSERT_TRUE(runner.chan().recv_obj(setup_ok, 300000));
    EXPECT_EQ(0, runner.wait());
    ASSERT_TRUE(setup_ok);

    std::ifstream in(log);
    std::string line;
    bool watching = false, left = false;
    while (std::getline(in, line)) {
        watching |= (line.find("new peer pid") != std::string::npos) &&
                    (line.find("watched") != std::string::npos);
        left     |= (line.find("async handler table is not empty") !=
                     std::string::npos);
    }
    ASSERT_TRUE(watching) << "no watched peer in " << log;
    EXPECT_FALSE(left) << "UCX's async loop still held a handler at exit";
}


/*
 * UCP discards an endpoint with uct_ep_flush(UCT_FLUSH_FLAG_CANCEL) and, when
 * that endpoint was the last one on the interface, disables the interface's
 * progress, yet waits for the flush (UCX 1.22 ucp_ep_close_nbx FORCE, as
 * NIXL does in its error handler). Copies on the device cannot be recalled:
 * the flush completes once they have, through worker progress alone, and the
 * endpoint takes no new operation.
 */
TEST_P(failure, cancel_flush_completes_without_iface_progress) {
    peer_options opts;
    opts.new_pid_ns = GetParam();
    start({}, {}, opts);
    remote r  = export_buffer(BUF_VMM, 8 * MiB, 51);
    int local = m_node->alloc(BUF_VMM, 8 * MiB);
    m_node->fill(local, 52);
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, true, m_node->buf(local).ptr, MiB,
                                   r.buf.addr, r.rkey.rkey)) << "mapped";

    /* the copies are held from their post until the flush was issued */
    copy_engine_hold hold(-1);
    if (!hold.ok()) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    std::vector<completion> comps(4);
    for (size_t i = 0; i < comps.size(); ++i) {
        ASSERT_EQ(UCS_INPROGRESS,
                  post(true, (char*)m_node->buf(local).ptr + i * 2 * MiB,
                       2 * MiB, r.buf.addr + i * 2 * MiB, r.rkey.rkey,
                       &comps[i]));
    }
    m_agent->kill_now();
    ASSERT_TRUE(m_node->progress_until([&] {
        uct_ep_check(m_ep, 0, nullptr);
        return m_node->ep_errors() > 0;
    })) << "ep_check did not report the dead peer";

    /* what UCP does with the failed endpoint */
    completion flush;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL,
                                           &flush.comp));
    uct_iface_progress_disable(m_node->iface(),
                               UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    completion late;
    ucs_status_t late_status = post(true, m_node->buf(local).ptr, MiB,
                                    r.buf.addr, r.rkey.rkey, &late);
    EXPECT_TRUE(UCS_STATUS_IS_ERR(late_status))
            << ucs_status_string(late_status);
    EXPECT_FALSE(flush.done) << "completed while its copies were held";

    hold.release();
    ASSERT_TRUE(m_node->progress_until([&] { return flush.done; }))
            << "the CANCEL flush never completed";
    for (auto &c : comps) {
        EXPECT_TRUE(c.done) << "the flush completed before the op it covers";
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET, c.status);
    }
    EXPECT_EQ(1u, m_node->ep_errors());
}


INSTANTIATE_TEST_SUITE_P(pid_ns, failure, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ? "other" : "same");
                         });

} // namespace
