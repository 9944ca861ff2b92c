/*
 * Data path through the UCT API, between real processes on the emulator (or
 * a real driver): put/get of every size, legacy, VMM and pool memory, across PID
 * and network namespaces and with pidfd_getfd blocked; completion by
 * progress and by eventfd; flush, fence and pending semantics; bytes checked
 * on both sides.
 */
#include "fixture.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <cstring>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>


namespace {

using namespace test;

const size_t SIZES[] = {1, 8, 4099, MiB, 64 * MiB};


struct scenario {
    const char  *name;
    buffer_kind kind;
    bool        new_pid_ns;
    bool        new_net_ns;     /* with a shared socket directory */
    bool        agent_imports;  /* the agent moves the data */
    bool        block_pidfd;    /* seccomp on the importing agent */
};

std::ostream &operator<<(std::ostream &os, const scenario &s)
{
    return os << s.name;
}


class datapath : public ::testing::TestWithParam<scenario> {
protected:
    /* memory the importer maps itself: a key of the memory's own handle */
    static void expect_key_type(buffer_kind kind, const bytes_t &key) {
        uct_cuda_ipc_ns_rkey_info_t info;

        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(key.data(), key.size(),
                                                     &info));
        EXPECT_EQ((kind == BUF_LEGACY) ? UCT_CUDA_IPC_NS_HANDLE_LEGACY :
                  (kind == BUF_POOL)   ? UCT_CUDA_IPC_NS_HANDLE_POOL :
                                         UCT_CUDA_IPC_NS_HANDLE_POSIX_FD,
                  info.handle_type);
    }

    void SetUp() override
    {
        if (!cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
    }
};


TEST_P(datapath, put_get_all_sizes) {
    const scenario &s = GetParam();
    std::unique_ptr<sock_dir> dir;
    std::unique_ptr<scoped_env> env;
    peer_options opts;

    if (s.new_net_ns) {
        dir.reset(new sock_dir());
        env.reset(new scoped_env("UCX_CUDA_IPC_NS_SOCK_DIR", dir->path()));
    }
    opts.new_pid_ns        = s.new_pid_ns;
    opts.new_net_ns        = s.new_net_ns;
    opts.block_pidfd_getfd = s.block_pidfd;

    uct_node node;
    ASSERT_TRUE(node.ok());
    agent peer(opts);
    ASSERT_TRUE(peer.ok());
    if (s.new_pid_ns) {
        EXPECT_EQ(1u, peer.remote_pid()) << "pid 1 of its own namespace";
    }

    const size_t buf_size = 64 * MiB;
    uint32_t seed         = 1;

    if (!s.agent_imports) {
        uct_ep_h ep = node.connect(peer.dev_addr(), peer.iface_addr());
        ASSERT_NE(nullptr, ep);
        agent_buffer remote = peer.alloc(s.kind, buf_size, 0);
        ASSERT_GE(remote.index, 0);
        int local = node.alloc(s.kind, buf_size);
        ASSERT_GE(local, 0);
        uct_rkey_bundle_t rkey;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(node.component(), remote.rkey.data(),
                                          &rkey));
        expect_key_type(s.kind, remote.rkey);
        uct_cuda_ipc_ns_cache_stats_t before, after;
        uct_cuda_ipc_ns_cache_get_stats(&before);

        for (size_t size : SIZES) {
            SCOPED_TRACE(size);
            /* put at an odd offset, get at the start */
            size_t offset = (size + 5 <= buf_size) ? 5 : 0;
            node.fill(local, ++seed, offset, size);
            ASSERT_EQ(UCS_OK, node.copy(ep, true,
                                        (char*)node.buf(local).ptr + offset,
                                        size, remote.addr + offset, rkey.rkey));
            EXPECT_TRUE(peer.check(remote.index, seed, offset, size));

            ASSERT_TRUE(peer.fill(remote.index, ++seed));
            ASSERT_EQ(UCS_OK, node.copy(ep, false, node.buf(local).ptr, size,
                                        remote.addr, rkey.rkey));
            EXPECT_TRUE(node.check(local, seed, 0, size));
        }
        /* the importer mapped the memory itself: nobody copied for it */
        uct_cuda_ipc_ns_cache_get_stats(&after);
        EXPECT_GT(after.misses, before.misses);
        uct_rkey_release(node.component(), &rkey);
    } else {
        ASSERT_TRUE(peer.connect(node));
        int exported = node.alloc(s.kind, buf_size);
        ASSERT_GE(exported, 0);
        bytes_t key         = node.rkey(exported);
        uint64_t addr       = (uint64_t)node.buf(exported).ptr;
        expect_key_type(s.kind, key);
        agent_buffer local  = peer.alloc(s.kind, buf_size, 0);
        ASSERT_GE(local.index, 0);

        for (size_t size : SIZES) {
            SCOPED_TRACE(size);
            ASSERT_TRUE(peer.fill(local.index, ++seed));
            ASSERT_EQ(UCS_OK, peer.copy(true, local.index, size, addr, key));
            EXPECT_TRUE(node.check(exported, seed, 0, size));

            node.fill(exported, ++seed);
            ASSERT_EQ(UCS_OK, peer.copy(false, local.index, size, addr, key));
            EXPECT_TRUE(peer.check(local.index, seed, 0, size));
        }
    }
}


INSTANTIATE_TEST_SUITE_P(
        scenarios, datapath,
        ::testing::Values(
            scenario{"legacy_same_ns", BUF_LEGACY, false, false, false, false},
            scenario{"vmm_same_ns", BUF_VMM, false, false, false, false},
            scenario{"vmm_other_pid_ns", BUF_VMM, true, false, false, false},
            scenario{"vmm_other_pid_and_net_ns", BUF_VMM, true, true, false,
                     false},
            scenario{"vmm_importer_pidfd_getfd_blocked", BUF_VMM, false, false,
                     true, true},
            scenario{"legacy_importer_other_net_ns", BUF_LEGACY, false, true,
                     true, false},
            /* a stream-ordered pool of the POSIX-fd handle type: the pool's
             * fd, then the allocation's export data */
            scenario{"pool_same_ns", BUF_POOL, false, false, false, false},
            scenario{"pool_other_pid_and_net_ns", BUF_POOL, true, true, false,
                     false},
            scenario{"pool_importer_pidfd_getfd_blocked", BUF_POOL, false,
                     false, true, true}),
        [](const ::testing::TestParamInfo<scenario> &info) {
            return std::string(info.param.name);
        });


TEST_F(datapath_pair, iface_attributes) {
    start({}, {{"BW", "1234MBs"}, {"LAT", "3us"}});
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_node->iface(), &attr));
    uint64_t caps = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_ZCOPY |
                    UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PENDING |
                    UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                    UCT_IFACE_FLAG_EP_CHECK;
    EXPECT_EQ(caps, attr.cap.flags & caps);
    EXPECT_TRUE(attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_SEND_COMP);
    EXPECT_TRUE(attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_FD);
    EXPECT_EQ(SIZE_MAX, attr.cap.put.max_zcopy);
    EXPECT_EQ(SIZE_MAX, attr.cap.get.max_zcopy);
    EXPECT_GE(attr.cap.put.max_iov, 1u);
    EXPECT_GE(attr.cap.get.opt_zcopy_align, 1u);
    EXPECT_GE(attr.cap.put.align_mtu, 1u);
    EXPECT_GE(attr.dev_num_paths, 1u);
    EXPECT_NEAR(1234.0 * 1024 * 1024, attr.bandwidth.shared, 1234.0 * 50000);
    EXPECT_NEAR(3e-6, attr.latency.c, 1e-9);

    uct_perf_attr_t perf;
    perf.field_mask = UCT_PERF_ATTR_FIELD_BANDWIDTH | UCT_PERF_ATTR_FIELD_LATENCY;
    ASSERT_EQ(UCS_OK, uct_iface_estimate_perf(m_node->iface(), &perf));
    EXPECT_EQ(attr.bandwidth.shared, perf.bandwidth.shared);
    EXPECT_EQ(attr.latency.c, perf.latency.c);
}


/* Host source for put_bcopy: what UCP's pack callback does for host data */
struct host_span {
    const uint8_t *data;
    size_t        length;

    static size_t pack(void *dest, void *arg)
    {
        host_span *span = (host_span*)arg;
        memcpy(dest, span->data, span->length);
        return span->length;
    }
};


TEST_F(datapath_pair, short_and_bcopy_copy_through_the_driver) {
    start();
    remote r  = export_buffer(BUF_VMM, 2 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 2 * MiB);
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_node->iface(), &attr));
    const size_t max_short = attr.cap.put.max_short;
    ASSERT_GE(max_short, 8u);

    /* put_short from device memory, 8 B and the largest */
    m_node->fill(local, 51);
    for (size_t size : {(size_t)8, max_short}) {
        ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, m_node->buf(local).ptr, size,
                                           r.buf.addr, r.rkey.rkey));
        EXPECT_TRUE(m_agent->check(r.buf.index, 51, 0, size)) << size;
    }

    /* put_short from host memory */
    bytes_t host = pattern(52, 1000);
    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, host.data(), host.size(),
                                       r.buf.addr, r.rkey.rkey));
    EXPECT_TRUE(m_agent->check(r.buf.index, 52, 0, host.size()));

    /* put_bcopy of packed host data, at an offset */
    host = pattern(53, attr.cap.put.max_bcopy);
    host_span span = {host.data(), host.size()};
    EXPECT_EQ((ssize_t)host.size(),
              uct_ep_put_bcopy(m_ep, host_span::pack, &span, r.buf.addr,
                               r.rkey.rkey));
    EXPECT_TRUE(m_agent->check(r.buf.index, 53, 0, host.size()));

    /* get_bcopy into host memory */
    ASSERT_TRUE(m_agent->fill(r.buf.index, 54));
    bytes_t got(attr.cap.get.max_bcopy);
    EXPECT_EQ(UCS_OK, uct_ep_get_bcopy(m_ep, (uct_unpack_callback_t)memcpy,
                                       got.data(), got.size(), r.buf.addr,
                                       r.rkey.rkey, nullptr));
    EXPECT_EQ(pattern(54, got.size()), got);
}


TEST_F(datapath_pair, zero_length_completes_at_once) {
    start();
    remote r = export_buffer(BUF_VMM, MiB, 1);
    int local = m_node->alloc(BUF_VMM, MiB);
    completion comp;
    EXPECT_EQ(UCS_OK, post(true, m_node->buf(local).ptr, 0, r.buf.addr,
                           r.rkey.rkey, &comp));
    EXPECT_EQ(UCS_OK, post(false, m_node->buf(local).ptr, 0, r.buf.addr,
                           r.rkey.rkey, &comp));
    EXPECT_FALSE(comp.done) << "no completion for an op done at once";
}


TEST_F(datapath_pair, out_of_range_is_refused) {
    start();
    remote r  = export_buffer(BUF_VMM, 2 * MiB, 1);
    int local = m_node->alloc(BUF_VMM, 4 * MiB);
    completion comp;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              post(true, m_node->buf(local).ptr, 2 * MiB + 1, r.buf.addr,
                   r.rkey.rkey, &comp));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              post(true, m_node->buf(local).ptr, 8, r.buf.addr - 8,
                   r.rkey.rkey, &comp));
}


/* A pool key is the allocation's: one that says another length (a forged
 * or stale key) is refused at import, before any byte moves, and the true
 * key still works */
TEST_F(datapath_pair, pool_key_of_another_length_is_refused) {
    start();
    remote r  = export_buffer(BUF_POOL, 4 * MiB, 1);
    int local = m_node->alloc(BUF_VMM, 4 * MiB);
    uct_cuda_ipc_ns_rkey_info_t info;
    uct_rkey_bundle_t forged;

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(r.buf.rkey.data(),
                                                 r.buf.rkey.size(), &info));
    ASSERT_EQ(UCT_CUDA_IPC_NS_HANDLE_POOL, info.handle_type);
    info.length -= MiB;
    bytes_t key(r.buf.rkey.size());
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&info, key.data()));
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(), key.data(),
                                      &forged));
    m_rkeys.push_back(forged);

    ucs_status_t status = m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                       MiB, r.buf.addr, forged.rkey);
    EXPECT_NE(UCS_OK, status);
    EXPECT_NE(UCS_INPROGRESS, status);

    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                   4 * MiB, r.buf.addr, r.rkey.rkey));
    EXPECT_TRUE(m_node->check(local, 1, 0, 4 * MiB));
}


/*
 * Zero-copy with several iovs, strided ones among them: locally, count
 * elements of length bytes, stride apart; remotely one contiguous range, in
 * iov order (UCT's definition). Two local buffers (a legacy and a VMM
 * allocation, both of the device's primary context) in one op.
 */
struct strided_layout {
    std::vector<uct_iov_t> iov;
    size_t                 total = 0; /* remote bytes */
};

static strided_layout strided_iovs(void *a, void *b)
{
    strided_layout l;
    /* 5 elements of 4099 bytes, 3 * 4099 apart; a contiguous block of 1000
     * in the other buffer; 3 elements of 100, 300 apart, after the first */
    l.iov.push_back({a, 4099, nullptr, 3 * 4099, 5});
    l.iov.push_back({b, 1000, nullptr, 0, 1});
    l.iov.push_back({(char*)a + 16 * 4099, 100, nullptr, 300, 3});
    for (auto &iov : l.iov) {
        l.total += iov.length * iov.count;
    }
    return l;
}

/* the local images: every element holds the remote bytes it maps to
 * (pattern of seed at the remote offset), everything else is `gap` */
static void strided_images(const strided_layout &l, void *a, bytes_t &img_a,
                           bytes_t &img_b, uint32_t seed)
{
    size_t remote = 0;
    for (auto &iov : l.iov) {
        for (size_t k = 0; k < iov.count; ++k) {
            bytes_t &img = (iov.buffer == nullptr) ? img_b : img_a;
            size_t base  = (iov.buffer == nullptr) ? 0 :
                           (size_t)((char*)iov.buffer - (char*)a);
            size_t at    = base + k * iov.stride;
            for (size_t j = 0; j < iov.length; ++j) {
                img.at(at + j) = pattern_byte(seed, remote++);
            }
        }
    }
}

TEST_F(datapath_pair, strided_iovs_of_two_buffers) {
    const size_t size = MiB;
    const uint8_t gap = 0xee;
    start();
    remote r = export_buffer(BUF_VMM, size, 3);
    int la   = m_node->alloc(BUF_LEGACY, size);
    int lb   = m_node->alloc(BUF_VMM, size);
    void *a  = m_node->buf(la).ptr;
    void *b  = m_node->buf(lb).ptr;
    strided_layout l = strided_iovs(a, b);

    /* images, with iov[1] marked by a null buffer for strided_images */
    strided_layout marked = l;
    marked.iov[1].buffer  = nullptr;
    bytes_t img_a(size, gap), img_b(size, gap);
    strided_images(marked, a, img_a, img_b, 21);
    cuda_write(a, img_a.data(), size);
    cuda_write(b, img_b.data(), size);

    /* put: the elements land one after the other; nothing beyond */
    completion put;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, l.iov.data(), l.iov.size(),
                                               r.buf.addr, r.rkey.rkey,
                                               &put.comp));
    ASSERT_TRUE(m_node->progress_until([&] { return put.done; }));
    EXPECT_EQ(UCS_OK, put.status);
    EXPECT_TRUE(m_agent->check(r.buf.index, 21, 0, l.total)) << "put";
    EXPECT_TRUE(m_agent->check(r.buf.index, 3, l.total, 64 * 1024))
            << "bytes after the put's range";

    /* get: each element gets its remote bytes; the gaps keep theirs */
    ASSERT_TRUE(m_agent->fill(r.buf.index, 22));
    bytes_t want_a(size, gap), want_b(size, gap);
    strided_images(marked, a, want_a, want_b, 22);
    bytes_t blank(size, gap);
    cuda_write(a, blank.data(), size);
    cuda_write(b, blank.data(), size);
    completion get;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(m_ep, l.iov.data(), l.iov.size(),
                                               r.buf.addr, r.rkey.rkey,
                                               &get.comp));
    ASSERT_TRUE(m_node->progress_until([&] { return get.done; }));
    EXPECT_EQ(UCS_OK, get.status);
    bytes_t got_a(size), got_b(size);
    cuda_read(got_a.data(), a, size);
    cuda_read(got_b.data(), b, size);
    EXPECT_TRUE(got_a == want_a) << "get, strided buffer";
    EXPECT_TRUE(got_b == want_b) << "get, second buffer";
}


TEST_F(datapath_pair, many_ops_in_flight_on_several_endpoints) {
    start();
    agent second;
    ASSERT_TRUE(second.ok());
    uct_ep_h ep2 = m_node->connect(second.dev_addr(), second.iface_addr());
    ASSERT_NE(nullptr, ep2);

    const size_t chunk = 256 * 1024, count = 16;
    remote r1 = export_buffer(BUF_VMM, chunk * count, 0);
    agent_buffer b2 = second.alloc(BUF_LEGACY, chunk * count, 0);
    uct_rkey_bundle_t rkey2;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(), b2.rkey.data(),
                                      &rkey2));
    m_rkeys.push_back(rkey2);

    int local1 = m_node->alloc(BUF_VMM, chunk * count);
    int local2 = m_node->alloc(BUF_LEGACY, chunk * count);
    m_node->fill(local1, 7);
    m_node->fill(local2, 8);

    std::vector<completion> comps(2 * count);
    for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(UCS_INPROGRESS,
                  post(true, (char*)m_node->buf(local1).ptr + i * chunk, chunk,
                       r1.buf.addr + i * chunk, r1.rkey.rkey, &comps[i]));
        ASSERT_EQ(UCS_INPROGRESS,
                  post(true, (char*)m_node->buf(local2).ptr + i * chunk, chunk,
                       b2.addr + i * chunk, rkey2.rkey, &comps[count + i],
                       ep2));
    }
    ASSERT_TRUE(m_node->progress_until([&] { return all_done(comps); }));
    for (auto &c : comps) {
        EXPECT_EQ(UCS_OK, c.status);
    }
    EXPECT_TRUE(m_agent->check(r1.buf.index, 7, 0, chunk * count));
    EXPECT_TRUE(second.check(b2.index, 8, 0, chunk * count));
}


TEST_F(datapath_pair, max_poll_bounds_completions_per_progress) {
    start({}, {{"MAX_POLL", "1"}});
    remote r  = export_buffer(BUF_VMM, 4 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 4 * MiB);
    std::vector<completion> comps(4);

    for (size_t i = 0; i < comps.size(); ++i) {
        ASSERT_EQ(UCS_INPROGRESS, post(true, (char*)m_node->buf(local).ptr +
                                       i * MiB, MiB, r.buf.addr + i * MiB,
                                       r.rkey.rkey, &comps[i]));
    }
    /* let every copy finish before anyone looks: the emulator runs all it
     * can (cudasim_wait_quiescent) */
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, nullptr));
    if (!wait_copy_engine_quiescent()) {
        GTEST_SKIP() << "needs the emulator's cudasim_wait_quiescent";
    }
    for (size_t i = 0; i < comps.size(); ++i) {
        EXPECT_EQ(1u, m_node->progress()) << "MAX_POLL=1";
        EXPECT_TRUE(comps[i].done) << "completed in order";
    }
    EXPECT_EQ(0u, m_node->progress());
}


TEST_F(datapath_pair, completion_through_event_fd) {
    start();
    remote r  = export_buffer(BUF_VMM, 64 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 64 * MiB);
    int fd;
    ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(m_node->iface(), &fd));

    for (int round = 0; round < 4; ++round) {
        m_node->fill(local, 20 + round);
        completion comp;
        ASSERT_EQ(UCS_INPROGRESS, post(true, m_node->buf(local).ptr, 64 * MiB,
                                       r.buf.addr, r.rkey.rkey, &comp));
        while (!comp.done) {
            ucs_status_t status = uct_iface_event_arm(m_node->iface(),
                                                      UCT_EVENT_SEND_COMP);
            if (status == UCS_OK) {
                struct pollfd pfd = {fd, POLLIN, 0};
                ASSERT_EQ(1, poll(&pfd, 1, hang_guard_ms(30000))) << "no wakeup";
            } else {
                ASSERT_EQ(UCS_ERR_BUSY, status);
            }
            m_node->progress();
        }
        EXPECT_EQ(UCS_OK, comp.status);
        EXPECT_TRUE(m_agent->check(r.buf.index, 20 + round, 0, 64 * MiB));
    }

    /* nothing in flight: arming succeeds and nothing wakes us */
    ASSERT_EQ(UCS_OK, uct_iface_event_arm(m_node->iface(), UCT_EVENT_SEND_COMP));
    struct pollfd pfd = {fd, POLLIN, 0};
    EXPECT_EQ(0, poll(&pfd, 1, 50));
}


/* A progress thread arms, then sleeps, while another thread posts (NIXL's
 * pattern): the op posted while armed must wake it on its own */
TEST_F(datapath_pair, op_posted_while_armed_wakes_the_waiter) {
    start();
    remote r  = export_buffer(BUF_VMM, 16 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 16 * MiB);
    int fd;
    ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(m_node->iface(), &fd));

    m_node->fill(local, 31);
    ASSERT_EQ(UCS_OK, uct_iface_event_arm(m_node->iface(), UCT_EVENT_SEND_COMP))
            << "nothing in flight yet";
    completion comp;
    ASSERT_EQ(UCS_INPROGRESS, post(true, m_node->buf(local).ptr, 16 * MiB,
                                   r.buf.addr, r.rkey.rkey, &comp));
    /* no progress, no arm since the post: only the op can signal (the
     * timeout is a safety net: without the signal the test fails) */
    struct pollfd pfd = {fd, POLLIN, 0};
    ASSERT_EQ(1, poll(&pfd, 1, hang_guard_ms(60000))) << "the op posted while armed did not "
                                          "wake the waiter";
    while (!comp.done) {
        m_node->progress();
    }
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_TRUE(m_agent->check(r.buf.index, 31, 0, 16 * MiB));
}


TEST_F(datapath_pair, flush_waits_for_every_op) {
    start();
    remote r  = export_buffer(BUF_VMM, 64 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 64 * MiB);
    m_node->fill(local, 3);

    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, nullptr)) << "nothing in flight";
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_node->iface(), 0, nullptr));

    completion op1, op2, flush;
    ASSERT_EQ(UCS_INPROGRESS, post(true, m_node->buf(local).ptr, 64 * MiB,
                                   r.buf.addr, r.rkey.rkey, &op1));
    /* never OK with a copy in flight, with or without a completion */
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, nullptr));
    EXPECT_EQ(UCS_INPROGRESS, uct_iface_flush(m_node->iface(), 0, nullptr));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, &flush.comp));
    ASSERT_EQ(UCS_INPROGRESS, post(false, m_node->buf(local).ptr, MiB,
                                   r.buf.addr, r.rkey.rkey, &op2));

    ASSERT_TRUE(m_node->progress_until([&] { return flush.done; }));
    EXPECT_TRUE(op1.done) << "the flush completed before the op it covers";
    EXPECT_EQ(UCS_OK, flush.status);
    ASSERT_TRUE(m_node->progress_until([&] { return op2.done; }));
    ASSERT_TRUE(m_node->progress_until([&] {
        return uct_iface_flush(m_node->iface(), 0, nullptr) == UCS_OK;
    }));
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, nullptr));
    EXPECT_TRUE(m_agent->check(r.buf.index, 3, 0, 64 * MiB));
}


/* A flush with UCT_FLUSH_FLAG_CANCEL to a live peer: the copies in flight
 * cannot be recalled, they complete (and land); the flush completes through
 * worker progress alone, the interface's progress disabled as UCP does after
 * discarding its last endpoint; later operations are refused */
TEST_F(datapath_pair, cancel_flush_waits_for_the_copies_then_refuses_ops) {
    start();
    remote r  = export_buffer(BUF_VMM, 64 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 64 * MiB);
    m_node->fill(local, 5);

    /* the copy is held until the flush was issued */
    copy_engine_hold hold(-1);
    if (!hold.ok()) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    completion op, flush, late;
    ASSERT_EQ(UCS_INPROGRESS, post(true, m_node->buf(local).ptr, 64 * MiB,
                                   r.buf.addr, r.rkey.rkey, &op));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL,
                                           &flush.comp));
    uct_iface_progress_disable(m_node->iface(),
                               UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    EXPECT_EQ(UCS_ERR_CANCELED, post(false, m_node->buf(local).ptr, MiB,
                                     r.buf.addr, r.rkey.rkey, &late));
    EXPECT_FALSE(flush.done) << "completed while its copy was held";

    hold.release();
    ASSERT_TRUE(m_node->progress_until([&] { return flush.done; }))
            << "the CANCEL flush never completed";
    EXPECT_TRUE(op.done) << "the flush completed before the op it covers";
    EXPECT_EQ(UCS_OK, op.status);
    EXPECT_EQ(UCS_OK, flush.status);
    EXPECT_FALSE(late.done);
    /* a synchronous copy too (after the hold: it would wait for it) */
    EXPECT_EQ(UCS_ERR_CANCELED,
              uct_ep_put_short(m_ep, m_node->buf(local).ptr, 8, r.buf.addr,
                               r.rkey.rkey));
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL, nullptr));
    EXPECT_TRUE(m_agent->check(r.buf.index, 5, 0, 64 * MiB));
}


/* What the fence scenario on two devices saw (fence_orders_ops) */
struct fence_result {
    int          setup_ok;   /* node, agent, buffers, hold */
    int          put_status; /* at post */
    int          get_status;
    int          fence_status;
    int          done;       /* both completed */
    ucs_status_t put_comp;
    ucs_status_t get_comp;
    int          get_saw_put; /* the get's bytes are the put's */
    int          remote_ok;   /* the remote buffer holds the put's bytes */
};


/*
 * Runs in a peer with two emulated devices (CUDASIM_DEVICE_COUNT=2, read at
 * the first cuInit): a put from a buffer of device 0 and a get into a buffer
 * of device 1 use two streams (one per local context and remote device), so
 * only the fence orders them. Device 0's copy engine is held while both are
 * posted and until every stream that can run has run: without the fence the
 * get has read the remote bytes before the put wrote them.
 */
#define FENCE_CU(_func, ...) \
    (TEST_CU_ENTRY(_func)(__VA_ARGS__) == CUDA_SUCCESS)

TEST_PEER_ROLE(datapath_fence_two_devices)
{
    const size_t size  = 16 * MiB;
    fence_result res   = {};
    uct_rkey_bundle_t rkey;
    CUdevice dev0, dev1 = 0;
    CUcontext ctx0, ctx1;
    int go;

    if (!chan.recv_obj(go) || !cuda_init()) {
        chan.send_obj(res);
        return 1;
    }
    {
        uct_node node({}, {});
        agent ag;
        if (!node.ok() || !ag.ok()) {
            chan.send_obj(res);
            return 1;
        }
        uct_ep_h ep = node.connect(ag.dev_addr(), ag.iface_addr());
        agent_buffer r = ag.alloc(BUF_VMM, size, 0);
        if ((ep == nullptr) || (r.index < 0) ||
            (uct_rkey_unpack(node.component(), r.rkey.data(), &rkey) !=
             UCS_OK)) {
            chan.send_obj(res);
            return 1;
        }

        /* the put's source on device 0, the get's destination on device 1 */
        int src = node.alloc(BUF_LEGACY, size);
        node.fill(src, 4);
        bool cu_ok = FENCE_CU(cuCtxGetCurrent, &ctx0) &&
                     FENCE_CU(cuDeviceGet, &dev0, 0) &&
                     FENCE_CU(cuDeviceGet, &dev1, 1) &&
                     FENCE_CU(cuDevicePrimaryCtxRetain, &ctx1, dev1) &&
                     FENCE_CU(cuCtxSetCurrent, ctx1);
        if (!cu_ok) {
            chan.send_obj(res);
            return 1;
        }
        int dst = node.alloc(BUF_LEGACY, size, 0, 1);
        node.fill(dst, 9);
        (void)FENCE_CU(cuCtxSetCurrent, ctx0);
        /* really two devices, else one stream orders them without a fence */
        int src_dev = -1, dst_dev = -1;
        bool two_devices =
                FENCE_CU(cuPointerGetAttribute, &src_dev,
                         CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                         (CUdeviceptr)node.buf(src).ptr) &&
                FENCE_CU(cuPointerGetAttribute, &dst_dev,
                         CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                         (CUdeviceptr)node.buf(dst).ptr) &&
                (src_dev == 0) && (dst_dev == 1);

        completion put, get;
        uct_iov_t put_iov = {node.buf(src).ptr, size, nullptr, 0, 1};
        uct_iov_t get_iov = {node.buf(dst).ptr, size, nullptr, 0, 1};
        {
            copy_engine_hold hold(0);
            res.setup_ok     = hold.ok() && (src >= 0) && (dst >= 0) &&
                               two_devices;
            res.put_status   = uct_ep_put_zcopy(ep, &put_iov, 1, r.addr,
                                                rkey.rkey, &put.comp);
            res.fence_status = uct_ep_fence(ep, 0);
            res.get_status   = uct_ep_get_zcopy(ep, &get_iov, 1, r.addr,
                                                rkey.rkey, &get.comp);
            /* everything that may run has run: an unfenced get is done */
            wait_copy_engine_quiescent();
        }
        res.done        = node.progress_until([&] {
            return put.done && get.done;
        });
        res.put_comp    = put.status;
        res.get_comp    = get.status;
        bytes_t got(size);
        cuda_read(got.data(), node.buf(dst).ptr, size);
        res.get_saw_put = (got == pattern(4, size));
        res.remote_ok   = ag.check(r.index, 4, 0, size);
        uct_rkey_release(node.component(), &rkey);
    }
    (void)FENCE_CU(cuDevicePrimaryCtxRelease, dev1);
    chan.send_obj(res);
    return 0;
}


TEST_F(datapath_pair, fence_orders_ops) {
    if (!copy_engine_hold_supported()) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold and 2 devices";
    }
    scoped_env two_devices("CUDASIM_DEVICE_COUNT", "2");
    peer runner("datapath_fence_two_devices");
    fence_result res = {};
    int go           = 1;

    ASSERT_TRUE(runner.chan().send_obj(go));
    ASSERT_TRUE(runner.chan().recv_obj(res, 300000));
    EXPECT_EQ(0, runner.wait());
    ASSERT_TRUE(res.setup_ok);
    EXPECT_EQ(UCS_INPROGRESS, res.put_status);
    EXPECT_EQ(UCS_OK, res.fence_status);
    EXPECT_EQ(UCS_INPROGRESS, res.get_status);
    ASSERT_TRUE(res.done);
    EXPECT_EQ(UCS_OK, res.put_comp);
    EXPECT_EQ(UCS_OK, res.get_comp);
    EXPECT_TRUE(res.remote_ok);
    EXPECT_TRUE(res.get_saw_put)
            << "the get after the fence ran before the put it follows";
}


/* Requests of the pending queue, recording when they ran */
struct pending_op {
    uct_pending_req_t req;
    uct_ep_h          test_ep;
    void              *local;
    uint64_t          addr;
    uct_rkey_t        rkey;
    completion        comp;
    int               dispatched = 0;

    static ucs_status_t run(uct_pending_req_t *req)
    {
        pending_op *op = ucs_container_of(req, pending_op, req);
        uct_iov_t iov  = {op->local, MiB, nullptr, 0, 1};
        ++op->dispatched;
        ucs_status_t status = uct_ep_put_zcopy(op->test_ep, &iov, 1, op->addr,
                                               op->rkey, &op->comp.comp);
        return (status == UCS_INPROGRESS) ? UCS_OK : status;
    }
};


/* What the two-device peer saw for an op whose iovs span two devices */
struct two_device_iov_result {
    int setup_ok;
    int mixed_status;   /* buffers of device 0 and device 1 in one put */
    int regions_kept;   /* the refused op left the cache's regions as found */
    int same_status;    /* then two iovs of device 0: posted */
    int same_done;
    int remote_ok;
};

/*
 * Runs in a peer with two emulated devices: one op's copies run on one
 * stream of one context, so iovs of two devices are refused with
 * UCS_ERR_UNSUPPORTED (docs/architecture.md), and leave nothing behind.
 */
TEST_PEER_ROLE(datapath_iovs_two_devices)
{
    const size_t size = MiB;
    two_device_iov_result res = {};
    uct_rkey_bundle_t rkey;
    int go;

    if (!chan.recv_obj(go) || !cuda_init()) {
        chan.send_obj(res);
        return 1;
    }
    {
        uct_node node({}, {});
        agent ag;
        if (!node.ok() || !ag.ok()) {
            chan.send_obj(res);
            return 1;
        }
        uct_ep_h ep = node.connect(ag.dev_addr(), ag.iface_addr());
        agent_buffer r = ag.alloc(BUF_VMM, size, 0);
        if ((ep == nullptr) || (r.index < 0) ||
            (uct_rkey_unpack(node.component(), r.rkey.data(), &rkey) !=
             UCS_OK)) {
            chan.send_obj(res);
            return 1;
        }
        int on0 = node.alloc(BUF_LEGACY, size, 0, 0);
        int on1 = node.alloc(BUF_LEGACY, size, 0, 1);
        bool cu_ok = true;
        res.setup_ok = cu_ok && (on0 >= 0) && (on1 >= 0);
        if (res.setup_ok) {
            node.fill(on0, 5);
            uct_cuda_ipc_ns_cache_stats_t before = cache_stats();
            uct_iov_t mixed[2] = {
                {node.buf(on0).ptr, size / 2, nullptr, 0, 1},
                {node.buf(on1).ptr, size / 2, nullptr, 0, 1}
            };
            completion c1, c2;
            res.mixed_status = uct_ep_put_zcopy(ep, mixed, 2, r.addr,
                                                rkey.rkey, &c1.comp);
            res.regions_kept = (cache_stats().regions <= before.regions + 1);

            uct_iov_t same[2] = {
                {node.buf(on0).ptr, size / 2, nullptr, 0, 1},
                {(char*)node.buf(on0).ptr + size / 2, size / 2, nullptr, 0, 1}
            };
            res.same_status = uct_ep_put_zcopy(ep, same, 2, r.addr, rkey.rkey,
                                               &c2.comp);
            res.same_done   = node.progress_until([&] { return c2.done; }) &&
                              (c2.status == UCS_OK) && !c1.done;
            res.remote_ok   = ag.check(r.index, 5, 0, size);
        }
        uct_rkey_release(node.component(), &rkey);
    }
    chan.send_obj(res);
    return 0;
}


TEST_F(datapath_pair, iovs_of_two_devices_unsupported) {
    if (!copy_engine_hold_supported()) {
        GTEST_SKIP() << "needs the emulator's 2 devices";
    }
    scoped_env two_devices("CUDASIM_DEVICE_COUNT", "2");
    peer runner("datapath_iovs_two_devices");
    two_device_iov_result res = {};
    int go = 1;

    ASSERT_TRUE(runner.chan().send_obj(go));
    ASSERT_TRUE(runner.chan().recv_obj(res, 300000));
    EXPECT_EQ(0, runner.wait());
    ASSERT_TRUE(res.setup_ok);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, res.mixed_status);
    EXPECT_TRUE(res.regions_kept);
    EXPECT_EQ(UCS_INPROGRESS, res.same_status);
    EXPECT_TRUE(res.same_done);
    EXPECT_TRUE(res.remote_ok);
}


TEST_F(datapath_pair, pending_when_out_of_events) {
    start({}, {{"MAX_EVENTS", "2"}});
    remote r  = export_buffer(BUF_VMM, 4 * MiB, 0);
    int local = m_node->alloc(BUF_VMM, 4 * MiB);
    m_node->fill(local, 5);
    completion c1, c2, c3;

    ASSERT_EQ(UCS_INPROGRESS, post(true, m_node->buf(local).ptr, MiB,
                                   r.buf.addr, r.rkey.rkey, &c1));
    ASSERT_EQ(UCS_INPROGRESS, post(true, (char*)m_node->buf(local).ptr + MiB,
                                   MiB, r.buf.addr + MiB, r.rkey.rkey, &c2));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE,
              post(true, (char*)m_node->buf(local).ptr + 2 * MiB, MiB,
                   r.buf.addr + 2 * MiB, r.rkey.rkey, &c3))
            << "MAX_EVENTS=2 ops in flight";

    pending_op op, purged;
    /* when an assertion ends the test early, the node (and the ops still
     * in flight or pending) goes before the completions it would call */
    struct teardown_first {
        datapath_pair *test;
        ~teardown_first() { test->TearDown(); }
    } teardown{this};
    for (pending_op *p : {&op, &purged}) {
        p->req.func = pending_op::run;
        p->test_ep  = m_ep;
        p->rkey     = r.rkey.rkey;
    }
    op.local     = (char*)m_node->buf(local).ptr + 2 * MiB;
    op.addr      = r.buf.addr + 2 * MiB;
    purged.local = (char*)m_node->buf(local).ptr + 3 * MiB;
    purged.addr  = r.buf.addr + 3 * MiB;
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &op.req, 0));
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &purged.req, 0));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, uct_ep_flush(m_ep, 0, nullptr))
            << "requests are pending";

    /* purge both, add the first again: it runs when an event returns */
    int purged_count = 0;
    uct_ep_pending_purge(m_ep, [](uct_pending_req_t *req, void *arg) {
        ++*(int*)arg;
    }, &purged_count);
    EXPECT_EQ(2, purged_count);
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &op.req, 0));

    ASSERT_TRUE(m_node->progress_until([&] {
        return c1.done && c2.done && op.comp.done;
    }));
    EXPECT_EQ(1, op.dispatched);
    EXPECT_EQ(0, purged.dispatched);
    EXPECT_TRUE(m_agent->check(r.buf.index, 5, 0, 3 * MiB));
    EXPECT_EQ(UCS_ERR_BUSY, uct_ep_pending_add(m_ep, &purged.req, 0))
            << "events are available again";
}

/* The importer's copy fails as its stream runs it (an illegal address on a
 * GPU: the context is lost) while a waiter sleeps, armed: the waiter wakes,
 * from a stream callback, which the driver calls also after an error in the
 * context (a host function it does not call, cuda.h), and the op fails.
 * Both sides are agents: the failure poisons the importer's context. */
TEST(waiter_after_a_context_error, failed_copy_wakes_the_waiter) {
    if (!cuda_init()) {
        GTEST_SKIP() << "no CUDA driver or device";
    }
    peer_options opts;
    agent owner(opts), importer(opts);
    ASSERT_TRUE(owner.ok());
    ASSERT_TRUE(importer.ok());
    agent_buffer remote = owner.alloc(BUF_VMM, MiB, 1);
    agent_buffer local  = importer.alloc(BUF_VMM, MiB, 2);
    ASSERT_GE(remote.index, 0);
    ASSERT_GE(local.index, 0);
    ASSERT_TRUE(importer.connect(owner));
    int rkey = importer.rkey_unpack(remote.rkey);
    ASSERT_GE(rkey, 0);

    if (!importer.hold_copies(true) ||
        !importer.set_faults("stream-copy:1:CUDA_ERROR_ILLEGAL_ADDRESS")) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold and faults";
    }
    ASSERT_TRUE(importer.post(false, local.index, MiB, remote.addr, rkey));
    ASSERT_EQ(UCS_OK, importer.event_arm()) << "the copy is held";
    ASSERT_TRUE(importer.hold_copies(false));
    EXPECT_TRUE(importer.event_wakes(20000))
            << "the failed copy did not wake the waiter";
    std::vector<int> order;
    EXPECT_NE(UCS_OK, importer.wait_posted(&order));
}

} // namespace
