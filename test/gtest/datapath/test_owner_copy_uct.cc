/*
 * Copies made by the owner through the transport (docs/owner-copies.md):
 * an agent in a new PID namespace registers legacy cuMemAlloc memory with
 * UCX_CUDA_IPC_NS_OWNER_COPY=y; our cu_ipc_ns unpacks its key (a legacy
 * handle that will not open here) as an owner copy key, and UCT put/get
 * zcopy become COPY requests to the agent's broker, completed from iface
 * progress. Bytes are checked on both sides, around the copied range too.
 */
#include "fixture.h"
#include "common/peer.h"

extern "C" {
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_broker_serve.h"
#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_gpus.h"
#include "cuda_ipc_ns_iface.h"
}

#include <gtest/gtest.h>
#include <algorithm>
#include <functional>
#include <cstring>
#include <poll.h>
#include <vector>


namespace test {

/* A completion whose callback posts another op, as UCP's callbacks do */
struct posting_completion : completion {
    std::function<ucs_status_t()> post;
    bool                          posted      = false;
    ucs_status_t                  post_status = UCS_OK;

    posting_completion() { comp.func = cb; }
    static void cb(uct_completion_t *comp)
    {
        posting_completion *self = static_cast<posting_completion*>(
                ucs_container_of(comp, completion, comp));
        completion::cb(comp);
        self->post_status = self->post();
        self->posted      = true;
    }
};


/* The agent's copy engine held (the emulator's hold) until release() or
 * the end of the scope, also when an assertion fails */
struct agent_copies_held {
    agent *a;
    bool  held;

    explicit agent_copies_held(agent *a) : a(a), held(a->hold_copies(true)) {}
    ~agent_copies_held() { release(); }
    bool release()
    {
        bool ok = !held || a->hold_copies(false);
        held    = false;
        return ok;
    }
};


/* The emulator's fault rules cleared at the end of the scope, also when an
 * assertion fails */
struct faults_cleared {
    ~faults_cleared() { fault_reload(""); }
};


class owner_copy_uct : public datapath_pair {
public:
    void SetUp() override
    {
        datapath_pair::SetUp();
        if (IsSkipped()) {
            return;
        }
        m_fds = count_open_fds();
        m_env.reset(new scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY", "y"));
        /* the owner's lane even where we could open its legacy memory
         * ourselves (our pid is not the agent's): test_legacy_direct.cc
         * takes the direct path */
        m_direct.reset(new scoped_env("UCX_CUDA_IPC_NS_LEGACY_DIRECT", "n"));
        peer_options opts;
        opts.new_pid_ns = new_pid_ns();
        std::unique_ptr<scoped_env> count, gpus;
        if (agent_gpus() != nullptr) {
            /* the agent's driver reads them at its cuInit */
            count.reset(new scoped_env("CUDASIM_DEVICE_COUNT", "2"));
            gpus.reset(new scoped_env("CUDASIM_VISIBLE_DEVICES",
                                      agent_gpus()));
        }
        start({}, iface_config(), opts);
    }

    virtual config_changes_t iface_config() const { return {}; }

    /* nullptr: the agent sees our GPUs; else its CUDASIM_VISIBLE_DEVICES of
     * a machine of two GPUs (we see GPU 0 only) */
    virtual const char *agent_gpus() const { return nullptr; }

    /* the staging rings of our session with the agent, in opening order */
    std::vector<const uct_cuda_ipc_ns_staging_t*> staging_rings()
    {
        std::vector<const uct_cuda_ipc_ns_staging_t*> rings;
        uct_cuda_ipc_ns_copy_op_ring_t *ring;

        if (ucs_list_is_empty(&copies()->sessions)) {
            return rings;
        }
        ucs_list_for_each(ring, &session()->rings, list) {
            rings.push_back(&ring->staging);
        }
        return rings;
    }

    uct_cuda_ipc_ns_copy_op_sessions_t *copies()
    {
        return &ucs_derived_of(m_node->iface(), uct_cuda_ipc_ns_iface_t)->copies;
    }

    /* our only copy session */
    uct_cuda_ipc_ns_copy_op_session_t *session()
    {
        EXPECT_EQ(1u, ucs_list_length(&copies()->sessions));
        return ucs_list_head(&copies()->sessions,
                             uct_cuda_ipc_ns_copy_op_session_t, list);
    }

    /* answers owed by the agent over all our sessions */
    unsigned owed_answers()
    {
        uct_cuda_ipc_ns_copy_op_session_t *session;
        unsigned owed = 0;

        ucs_list_for_each(session, &copies()->sessions, list) {
            owed += session->num_reqs;
        }
        return owed;
    }

    /* slots in use on the rings of our session with the agent */
    unsigned busy_slots()
    {
        uct_cuda_ipc_ns_copy_op_session_t *session;
        uct_cuda_ipc_ns_copy_op_ring_t *ring;
        unsigned busy = 0;

        ucs_list_for_each(session, &copies()->sessions, list) {
            ucs_list_for_each(ring, &session->rings, list) {
                busy += ring->staging.num_slots - ring->free_slots;
            }
        }
        return busy;
    }

    /* the session has one staging ring, in pinned host memory or not */
    void expect_one_ring(bool is_host)
    {
        auto rings = staging_rings();
        ASSERT_EQ(1u, rings.size());
        EXPECT_EQ(is_host,
                  rings[0]->ops == &uct_cuda_ipc_ns_staging_host_ops)
                << "in " << uct_cuda_ipc_ns_staging_kind_str(rings[0])
                << " memory";
    }

    /* the key of @a r is of a GPU we cannot use (the emulator's GPUs) */
    bool other_gpu(const remote &r)
    {
        const uct_cuda_ipc_ns_md_rkey_t *key =
                (const uct_cuda_ipc_ns_md_rkey_t*)r.rkey.rkey;
        int usable = 1;

        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_gpus_usable(key->info.dev_uuid,
                                                      &usable));
        EXPECT_EQ(usable, key->owner_gpu_usable) << "as asked at unpack";
        return !usable;
    }

    /* @a r's key with a wrong token, unpacked (uct_rkey_release it) */
    void forge_token(const remote &r, uct_rkey_bundle_t *forged)
    {
        uct_cuda_ipc_ns_rkey_info_t info;

        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(r.buf.rkey.data(),
                                                     r.buf.rkey.size(), &info));
        info.token[0] ^= 1;
        bytes_t key(r.buf.rkey.size());
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&info, key.data()));
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(), key.data(),
                                          forged));
    }

    /* the agent, the owner, is pid 1 of its own PID namespace */
    virtual bool new_pid_ns() const { return true; }

    void TearDown() override
    {
        datapath_pair::TearDown();
        m_env.reset();
        m_direct.reset();
    }

    /* a legacy buffer of the agent, its key unpacked as an owner copy key
     * (a fatal failure otherwise: callers wrap it in
     * ASSERT_NO_FATAL_FAILURE) */
    void export_legacy(size_t size, uint32_t seed, remote *r)
    {
        export_copied(BUF_LEGACY, size, seed, r);
    }

    /* the same for any memory its owner copies */
    void export_copied(buffer_kind kind, size_t size, uint32_t seed, remote *r,
                       int device = 0)
    {
        r->buf = m_agent->alloc(kind, size, seed, 0, device);
        ASSERT_GE(r->buf.index, 0);
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(),
                                          r->buf.rkey.data(), &r->rkey));
        m_rkeys.push_back(r->rkey);
        ASSERT_TRUE(((uct_cuda_ipc_ns_md_rkey_t*)r->rkey.rkey)->owner_copy)
                << "a key of memory its owner copies";
    }

    void unshareable_vmm_put_get();

    void *local_ptr(int index, size_t offset)
    {
        return (char*)m_node->buf(index).ptr + offset;
    }

    struct copy_range {
        size_t offset, length; /* the same on both sides */
    };

    /* For each range, a put from our buffer @a local, then a get into it,
     * against the owner's buffer of @a r (both @a size bytes, patterns by
     * position, the owner's filled with @a remote_seed): the range arrives,
     * the bytes around it stay as they were, the source is unchanged */
    void put_get_ranges(int local, const remote &r, size_t size,
                        uint32_t remote_seed, uint32_t seed,
                        const std::vector<copy_range> &ranges)
    {
        for (const auto &c : ranges) {
            SCOPED_TRACE(c.length);
            size_t tail = c.offset + c.length;

            /* put */
            m_node->fill(local, ++seed);
            ASSERT_EQ(UCS_OK, m_node->copy(m_ep, true,
                                           local_ptr(local, c.offset),
                                           c.length, r.buf.addr + c.offset,
                                           r.rkey.rkey));
            EXPECT_TRUE(m_agent->check(r.buf.index, seed, c.offset,
                                       c.length));
            EXPECT_TRUE(m_agent->check(r.buf.index, remote_seed, 0,
                                       c.offset));
            EXPECT_TRUE(m_agent->check(r.buf.index, remote_seed, tail,
                                       size - tail));
            EXPECT_TRUE(m_node->check(local, seed))
                    << "the source is unchanged";

            /* get */
            remote_seed = ++seed;
            ASSERT_TRUE(m_agent->fill(r.buf.index, remote_seed));
            m_node->fill(local, ++seed);
            ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false,
                                           local_ptr(local, c.offset),
                                           c.length, r.buf.addr + c.offset,
                                           r.rkey.rkey));
            EXPECT_TRUE(m_node->check(local, remote_seed, c.offset,
                                      c.length));
            EXPECT_TRUE(m_node->check(local, seed, 0, c.offset));
            EXPECT_TRUE(m_node->check(local, seed, tail, size - tail));
            EXPECT_TRUE(m_agent->check(r.buf.index, remote_seed, 0, size))
                    << "the source is unchanged";
        }
    }

    int                         m_fds = -1;
    std::unique_ptr<scoped_env> m_env;
    std::unique_ptr<scoped_env> m_direct;
};


TEST_F(owner_copy_uct, key_names_the_owners_broker) {
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 1, &r));
    uct_cuda_ipc_ns_rkey_info_t info;

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(r.buf.rkey.data(),
                                                 r.buf.rkey.size(), &info));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_LEGACY, info.handle_type);
    EXPECT_EQ(UCT_CUDA_IPC_NS_RKEY_EXT_VERSION_OWNER_COPY, info.ext_version);
    EXPECT_GT(info.broker_addr_len, 0);
    EXPECT_EQ(m_agent->remote_pid(), info.pid);
}


/* Put and get between our VMM buffer and the owner's legacy memory, 1 B to
 * 3 MiB at odd offsets (the same on both sides: the patterns are by
 * position); the bytes around each range stay as they were */
TEST_F(owner_copy_uct, put_get_zcopy_legacy_owner_vmm_importer) {
    const size_t size = 4 * MiB;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 1, &r));
    int local = m_node->alloc(BUF_VMM, size);
    ASSERT_GE(local, 0);

    put_get_ranges(local, r, size, 1, 100,
                   {{1, 1}, {13, 7}, {4099, 4095}, {65537, 65537},
                    {777, MiB + 3}, {3, 3 * MiB}});
}


/* VMM memory without a shareable handle type (vLLM's cumem allocator):
 * nothing to export, so its key is a copy key naming the owner's broker;
 * put and get go through the owner's copies, from our VMM buffer (one copy)
 * and from our legacy buffer (our staging ring), at odd offsets */
void owner_copy_uct::unshareable_vmm_put_get()
{
    const size_t size = 4 * MiB;
    uct_cuda_ipc_ns_rkey_info_t info;
    remote r;

    ASSERT_NO_FATAL_FAILURE(export_copied(BUF_VMM_NO_FD, size, 1, &r));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(r.buf.rkey.data(),
                                                 r.buf.rkey.size(), &info));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_COPY, info.handle_type);
    EXPECT_GT(info.broker_addr_len, 0);
    EXPECT_EQ(m_agent->remote_pid(), info.pid);

    int vmm = m_node->alloc(BUF_VMM, size), legacy = m_node->alloc(BUF_LEGACY,
                                                                   size);
    ASSERT_GE(vmm, 0);
    ASSERT_GE(legacy, 0);
    put_get_ranges(vmm, r, size, 1, 100,
                   {{1, 1}, {4099, 4095}, {777, MiB + 3}});
    ASSERT_TRUE(m_agent->fill(r.buf.index, 150));
    put_get_ranges(legacy, r, size, 150, 200,
                   {{13, 7}, {65537, 65537}, {3, 3 * MiB}});
    EXPECT_EQ(0u, m_node->ep_errors());
}


/* Memory of a device's default stream-ordered pool (cudaMallocAsync): the
 * pool exports nothing and its allocation handle cannot be retained, so the
 * key is a copy key of exactly the registered bytes, and put and get go
 * through the owner's copies */
TEST_F(owner_copy_uct, put_get_zcopy_pool_owner) {
    const size_t size = 3 * MiB + 4096;
    uct_cuda_ipc_ns_rkey_info_t info;
    remote r;

    ASSERT_NO_FATAL_FAILURE(export_copied(BUF_POOL_DEFAULT, size, 1, &r));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(r.buf.rkey.data(),
                                                 r.buf.rkey.size(), &info));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_COPY, info.handle_type);
    EXPECT_EQ(r.buf.addr, info.base);
    EXPECT_EQ(size, info.length);

    int local = m_node->alloc(BUF_POOL_DEFAULT, size);
    ASSERT_GE(local, 0);
    put_get_ranges(local, r, size, 1, 100,
                   {{1, 1}, {4099, 4095}, {777, MiB + 3}, {3, 3 * MiB}});
    EXPECT_EQ(0u, m_node->ep_errors());
}


TEST_F(owner_copy_uct, put_get_zcopy_unshareable_vmm_owner) {
    unshareable_vmm_put_get();
}


/* The same in one PID namespace: nobody but the owner can map that memory */
class owner_copy_same_ns : public owner_copy_uct {
public:
    bool new_pid_ns() const override { return false; }
};


TEST_F(owner_copy_same_ns, put_get_zcopy_unshareable_vmm_owner) {
    unshareable_vmm_put_get();
}


/* Several copies outstanding at once, answered in any order */
TEST_F(owner_copy_uct, many_copies_in_flight) {
    const size_t chunk = 256 * 1024, count = 12;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(chunk * count, 3, &r));
    int local = m_node->alloc(BUF_VMM, chunk * count);
    std::vector<completion> comps(count);

    m_node->fill(local, 4);
    for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(local, i * chunk), chunk,
                                       r.buf.addr + i * chunk, r.rkey.rkey,
                                       &comps[i]));
    }
    ASSERT_TRUE(m_node->progress_until([&] { return all_done(comps); }));
    for (const auto &c : comps) {
        EXPECT_EQ(UCS_OK, c.status);
    }
    EXPECT_TRUE(m_agent->check(r.buf.index, 4, 0, chunk * count));
}


/* Several iovs, one of them strided: one request per element, the remote
 * range contiguous in iov order (UCT's definition) */
TEST_F(owner_copy_uct, get_into_strided_iovs) {
    const size_t elem = 1000, stride = 4096, tail_len = 777, roff = 5;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 21, &r));
    int local = m_node->alloc(BUF_VMM, MiB);
    uct_iov_t iov[2] = {{local_ptr(local, 0), elem, nullptr, stride, 3},
                        {local_ptr(local, 20000), tail_len, nullptr, 0, 1}};
    completion comp;

    m_node->fill(local, 22);
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(m_ep, iov, 2, r.buf.addr + roff,
                                               r.rkey.rkey, &comp.comp));
    ASSERT_TRUE(m_node->progress_until([&] { return comp.done; }));
    ASSERT_EQ(UCS_OK, comp.status);

    size_t remote_pos = roff;
    for (size_t k = 0; k < 4; ++k) {
        size_t len = (k < 3) ? elem : tail_len;
        size_t off = (k < 3) ? k * stride : 20000;
        bytes_t got(len);
        cuda_read(got.data(), local_ptr(local, off), len);
        for (size_t i = 0; i < len; ++i) {
            ASSERT_EQ(pattern_byte(21, remote_pos + i), got[i])
                    << "element " << k << " byte " << i;
        }
        remote_pos += len;
    }
    EXPECT_TRUE(m_node->check(local, 22, elem, stride - elem))
            << "the gap between strided elements is untouched";
}


/* A key whose token is not the registration's: the owner refuses the copy,
 * the op completes with that refusal, the memory stays as it was, and the
 * session serves the genuine key after */
TEST_F(owner_copy_uct, forged_token_refused) {
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 7, &r));
    int local = m_node->alloc(BUF_VMM, MiB);
    uct_rkey_bundle_t forged;

    ASSERT_NO_FATAL_FAILURE(forge_token(r, &forged));
    m_node->fill(local, 8);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m_node->copy(m_ep, true, local_ptr(local, 0),
                                            MiB, r.buf.addr, forged.rkey));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m_node->copy(m_ep, false, local_ptr(local, 0),
                                            MiB, r.buf.addr, forged.rkey));
    EXPECT_TRUE(m_agent->check(r.buf.index, 7, 0, MiB)) << "untouched";
    EXPECT_TRUE(m_node->check(local, 8, 0, MiB)) << "untouched";
    uct_rkey_release(m_node->component(), &forged);

    EXPECT_EQ(UCS_OK, m_node->copy(m_ep, true, local_ptr(local, 0), MiB,
                                   r.buf.addr, r.rkey.rkey));
    EXPECT_TRUE(m_agent->check(r.buf.index, 8, 0, MiB));
    EXPECT_EQ(0u, m_node->ep_errors());
}


/* ep and iface flush wait for the copies the owner still makes */
TEST_F(owner_copy_uct, flush_waits_for_copies) {
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(2 * MiB, 9, &r));
    int local = m_node->alloc(BUF_VMM, 2 * MiB);
    completion op, flush;

    if (!m_agent->hold_copies(true)) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    m_node->fill(local, 10);
    ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(local, 0), 2 * MiB,
                                   r.buf.addr, r.rkey.rkey, &op));
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, &flush.comp));
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, nullptr));
    EXPECT_EQ(UCS_INPROGRESS, uct_iface_flush(m_node->iface(), 0, nullptr));
    /* the owner's copy engine is held: no answer can come */
    for (int i = 0; i < 100; ++i) {
        m_node->progress();
    }
    EXPECT_FALSE(op.done);
    EXPECT_FALSE(flush.done);

    ASSERT_TRUE(m_agent->hold_copies(false));
    ASSERT_TRUE(m_node->progress_until([&] { return flush.done; }));
    EXPECT_TRUE(op.done) << "the op completes before its flush";
    EXPECT_EQ(UCS_OK, op.status);
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, nullptr));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_node->iface(), 0, nullptr));
    EXPECT_TRUE(m_agent->check(r.buf.index, 10, 0, 2 * MiB));
}


/* A slow owner stalls nobody else: with one owner's copy engine held and
 * its copy outstanding, put and get through another owner's copies
 * complete, bytes checked; the held one completes once released */
TEST_F(owner_copy_uct, slow_owner_does_not_stall_other_owners) {
    peer_options opts;
    opts.new_pid_ns = true;
    agent other(opts);
    ASSERT_TRUE(other.ok());
    uct_ep_h other_ep = m_node->connect(other.dev_addr(), other.iface_addr());
    ASSERT_NE(nullptr, other_ep);
    agent_buffer other_buf = other.alloc(BUF_LEGACY, MiB, 50);
    ASSERT_GE(other_buf.index, 0);
    uct_rkey_bundle_t other_rkey;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(),
                                      other_buf.rkey.data(), &other_rkey));
    ASSERT_TRUE(((uct_cuda_ipc_ns_md_rkey_t*)other_rkey.rkey)->owner_copy);

    remote slow;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 51, &slow));
    int held = m_node->alloc(BUF_VMM, MiB), local = m_node->alloc(BUF_VMM, MiB);
    completion op;

    if (!m_agent->hold_copies(true)) {
        uct_rkey_release(m_node->component(), &other_rkey);
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(held, 0), MiB,
                                   slow.buf.addr, slow.rkey.rkey, &op));

    m_node->fill(local, 52);
    EXPECT_EQ(UCS_OK, m_node->copy(other_ep, true, local_ptr(local, 0), MiB,
                                   other_buf.addr, other_rkey.rkey));
    EXPECT_TRUE(other.check(other_buf.index, 52, 0, MiB));
    ASSERT_TRUE(other.fill(other_buf.index, 53));
    EXPECT_EQ(UCS_OK, m_node->copy(other_ep, false, local_ptr(local, 0), MiB,
                                   other_buf.addr, other_rkey.rkey));
    EXPECT_TRUE(m_node->check(local, 53, 0, MiB));
    EXPECT_FALSE(op.done) << "the slow owner's copy engine is still held";

    ASSERT_TRUE(m_agent->hold_copies(false));
    ASSERT_TRUE(m_node->progress_until([&] { return op.done; }));
    EXPECT_EQ(UCS_OK, op.status);
    EXPECT_TRUE(m_node->check(held, 51, 0, MiB));
    EXPECT_EQ(0u, m_node->ep_errors());
    uct_rkey_release(m_node->component(), &other_rkey);
}


/* A pending request that posts a put or get zcopy, as UCP's would */
struct pending_op {
    uct_pending_req_t req;
    datapath_pair     *test;   /* posts it: datapath_pair::post() */
    bool              is_put;
    void              *local;
    uint64_t          addr;
    uct_rkey_t        rkey;
    completion        *comp;
    bool              *earlier_done; /* what the fence ordered before */
    bool              posted        = false;
    bool              earlier_first = false;

    static ucs_status_t func(uct_pending_req_t *req)
    {
        pending_op *self = ucs_container_of(req, pending_op, req);

        if (self->test->post(self->is_put, self->local, MiB, self->addr,
                             self->rkey, self->comp) == UCS_ERR_NO_RESOURCE) {
            return UCS_ERR_NO_RESOURCE;
        }
        self->posted        = true;
        self->earlier_first = *self->earlier_done;
        return UCS_OK;
    }
};


/*
 * The fence rule (docs/owner-copies.md, "Flush and fence"), ep_fence and
 * iface_fence alike: the op after a fence is refused (UCS_ERR_NO_RESOURCE),
 * waits as a pending request, and is posted only once the op before the
 * fence completed, whichever kind each is. The earlier op is held (the
 * copy engine that runs it), the later one touches the same local buffer.
 */
class owner_copy_fence : public owner_copy_uct,
                         public ::testing::WithParamInterface<bool> {
public:
    bool iface_fence() const { return GetParam(); }

    ucs_status_t fence()
    {
        return iface_fence() ? uct_iface_fence(m_node->iface(), 0) :
                               uct_ep_fence(m_ep, 0);
    }

    /* @a second refused, then posted by a pending request once @a first
     * is done, not before; progressed until @a second is done, after
     * @a release let the first one run */
    void fenced_op_waits(bool is_put, void *local, const remote &r,
                         completion *first, completion *second,
                         const std::function<bool()> &release)
    {
        ASSERT_EQ(UCS_OK, fence());
        EXPECT_EQ(UCS_ERR_NO_RESOURCE, post(is_put, local, MiB, r.buf.addr,
                                            r.rkey.rkey, second))
                << "the op before the fence is outstanding";

        pending_op pending;
        pending.req.func     = pending_op::func;
        pending.test         = this;
        pending.is_put       = is_put;
        pending.local        = local;
        pending.addr         = r.buf.addr;
        pending.rkey         = r.rkey.rkey;
        pending.comp         = second;
        pending.earlier_done = &first->done;
        ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &pending.req, 0));
        for (int i = 0; i < 100; ++i) {
            m_node->progress();
        }
        EXPECT_FALSE(pending.posted) << "the op before the fence is held";

        ASSERT_TRUE(release());
        ASSERT_TRUE(m_node->progress_until([&] { return second->done; }));
        EXPECT_TRUE(pending.earlier_first);
        EXPECT_EQ(UCS_OK, first->status);
        EXPECT_EQ(UCS_OK, second->status);
    }
};


/* A copy the owner makes, then a zero-copy get into the buffer that copy
 * reads: the get must not overtake it */
TEST_P(owner_copy_fence, zero_copy_op_waits_for_copies_before) {
    remote legacy;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 30, &legacy));
    remote vmm    = export_buffer(BUF_VMM, MiB, 31);
    int local     = m_node->alloc(BUF_VMM, MiB);
    completion first, second;

    if (!m_agent->hold_copies(true)) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    m_node->fill(local, 32);
    ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(local, 0), MiB,
                                   legacy.buf.addr, legacy.rkey.rkey, &first));
    ASSERT_NO_FATAL_FAILURE(fenced_op_waits(false, local_ptr(local, 0), vmm,
                                            &first, &second, [&] {
        return m_agent->hold_copies(false);
    }));
    EXPECT_TRUE(m_agent->check(legacy.buf.index, 32, 0, MiB))
            << "the put read the buffer before the get wrote it";
    EXPECT_TRUE(m_node->check(local, 31, 0, MiB));
}


/* A zero-copy get into our buffer, then a copy the owner makes from it:
 * the owner must copy what the get brought */
TEST_P(owner_copy_fence, copy_waits_for_zero_copy_ops_before) {
    remote legacy;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 40, &legacy));
    remote vmm    = export_buffer(BUF_VMM, MiB, 41);
    int local     = m_node->alloc(BUF_VMM, MiB);
    completion first, second;

    m_node->fill(local, 42);
    copy_engine_hold ours; /* the get runs on our stream */
    if (!ours.ok()) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), MiB,
                                   vmm.buf.addr, vmm.rkey.rkey, &first));
    ASSERT_NO_FATAL_FAILURE(fenced_op_waits(true, local_ptr(local, 0), legacy,
                                            &first, &second, [&] {
        ours.release();
        return true;
    }));
    EXPECT_TRUE(m_agent->check(legacy.buf.index, 41, 0, MiB))
            << "the owner copied what the get brought";
    EXPECT_TRUE(m_node->check(local, 41, 0, MiB));
}


INSTANTIATE_TEST_SUITE_P(fence, owner_copy_fence, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ? "iface_fence" :
                                                             "ep_fence");
                         });


/* A waiter armed while a copy is outstanding sleeps on the iface's event
 * fd and is woken by the owner's answer alone */
TEST_F(owner_copy_uct, answer_wakes_the_event_fd) {
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(4 * MiB, 11, &r));
    int local = m_node->alloc(BUF_VMM, 4 * MiB);
    completion op;
    int fd;

    ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(m_node->iface(), &fd));
    if (!m_agent->hold_copies(true)) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), 4 * MiB,
                                   r.buf.addr, r.rkey.rkey, &op));
    ASSERT_EQ(UCS_OK, uct_iface_event_arm(m_node->iface(), UCT_EVENT_SEND_COMP))
            << "nothing can be ready: the owner's copy engine is held";
    ASSERT_TRUE(m_agent->hold_copies(false));

    /* the timeout is a safety net: without the wakeup the test fails */
    struct pollfd pfd = {fd, POLLIN, 0};
    ASSERT_EQ(1, poll(&pfd, 1, hang_guard_ms(60000))) << "the owner's answer did not wake "
                                          "the waiter";
    ASSERT_TRUE(m_node->progress_until([&] { return op.done; }));
    EXPECT_EQ(UCS_OK, op.status);
    EXPECT_TRUE(m_node->check(local, 11, 0, 4 * MiB));

    /* nothing outstanding: arming succeeds and nothing wakes us */
    ASSERT_EQ(UCS_OK, uct_iface_event_arm(m_node->iface(), UCT_EVENT_SEND_COMP));
    EXPECT_EQ(0, poll(&pfd, 1, 50));
}


/* The owner's copy fails as its stream runs it (an illegal address on a
 * GPU, which loses the owner's context): the owner answers the COPY with an
 * error, from a stream callback, which the driver calls also after an error
 * in the context (a host function it does not call, cuda.h), and our op
 * fails; without the answer it would wait for as long as the owner lives */
TEST_F(owner_copy_uct, copy_failing_on_the_owners_stream_is_answered) {
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 12, &r));
    int local = m_node->alloc(BUF_VMM, MiB);
    completion op;

    if (!m_agent->set_faults("stream-copy:1:CUDA_ERROR_ILLEGAL_ADDRESS")) {
        GTEST_SKIP() << "needs the emulator's fault injection";
    }
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), MiB,
                                   r.buf.addr, r.rkey.rkey, &op));
    ASSERT_TRUE(m_node->progress_until([&] { return op.done; }, 20000))
            << "the owner never answered its failed copy";
    EXPECT_NE(UCS_OK, op.status);
}


/* The owner dies while its copy runs: the op completes with an error, the
 * flush waiting for it completes, the endpoint is reported failed, nothing
 * hangs and no fd is left behind */
TEST_F(owner_copy_uct, owner_killed_mid_copy) {
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(4 * MiB, 12, &r));
    int local = m_node->alloc(BUF_VMM, 4 * MiB);
    completion op, flush;

    if (!m_agent->hold_copies(true)) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), 4 * MiB,
                                   r.buf.addr, r.rkey.rkey, &op));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, &flush.comp));

    m_agent->kill_now();
    ASSERT_TRUE(m_node->progress_until([&] {
        return op.done && flush.done && (m_node->ep_errors() > 0);
    })) << "op " << op.done << " flush " << flush.done << " ep errors "
        << m_node->ep_errors();
    EXPECT_NE(UCS_OK, op.status);
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, op.status);
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, nullptr));

    completion after;
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET,
              post(true, local_ptr(local, 0), 4096, r.buf.addr, r.rkey.rkey,
                   &after));

    TearDown();
    EXPECT_EQ(m_fds, count_open_fds()) << "no fd left behind";
}

/* An owner that answers what it does not owe lies: "done" to no request
 * (seq 0), an answer to a request never sent, or one naming another
 * registration. Each ends the session: the copy it owed fails with
 * UCS_ERR_IO_ERROR instead of completing uncopied, its endpoint is
 * reported failed, and the next op opens a new session. The test speaks
 * for the owner: the session's socket becomes one end of a socketpair. */
TEST_F(owner_copy_uct, answers_not_owed_end_the_session) {
    struct lie {
        const char *what;
        bool       seq_zero;
        uint64_t   seq_add;
        uint64_t   reg_id_xor;
    };
    const lie lies[] = {{"done to no request", true, 0, 0},
                        {"a request never sent", false, 1, 0},
                        {"another registration", false, 0, 1}};
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 14, &r));
    int local = m_node->alloc(BUF_VMM, MiB);

    agent_copies_held hold(m_agent.get());
    if (!hold.held) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }

    for (const lie &l : lies) {
        SCOPED_TRACE(l.what);
        unsigned errors = m_node->ep_errors();
        uct_ep_h ep     = m_node->connect(m_agent->dev_addr(),
                                          m_agent->iface_addr());
        completion op;
        ASSERT_NE(nullptr, ep);
        ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), MiB,
                                       r.buf.addr, r.rkey.rkey, &op, ep))
                << "the owner's copy is held";
        uct_cuda_ipc_ns_copy_op_session_t *s = session();
        ASSERT_EQ(1u, s->num_reqs);
        const uct_cuda_ipc_ns_copy_op_req_t *req =
                ucs_list_head(&s->reqs, uct_cuda_ipc_ns_copy_op_req_t, list);

        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
        uct_cuda_ipc_ns_copy_op_wakeup(copies(), s, 0);
        ASSERT_EQ(s->sock, dup2(sv[0], s->sock)) << "the owner's end closes";
        close(sv[0]);
        uct_cuda_ipc_ns_copy_op_wakeup(copies(), s, 1);

        uint8_t reply[UCT_CUDA_IPC_NS_BROKER_COPY_REPLY_SIZE];
        uct_cuda_ipc_ns_broker_proto_pack_copy_reply(
                reply, UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                req->reg_id ^ l.reg_id_xor,
                l.seq_zero ? 0 : req->seq + l.seq_add);
        ASSERT_EQ((ssize_t)sizeof(reply), send(sv[1], reply, sizeof(reply), 0));
        bool ended = m_node->progress_until([&] {
            return op.done && (m_node->ep_errors() > errors);
        });
        close(sv[1]);
        ASSERT_TRUE(ended) << "op " << op.done << " ep errors "
                           << m_node->ep_errors();
        EXPECT_EQ(UCS_ERR_IO_ERROR, op.status);
        EXPECT_TRUE(ucs_list_is_empty(&copies()->sessions));
    }

    /* the owner is still there: a new session copies, once the copies
     * of the ended sessions (into our buffer) ended and their
     * connections closed */
    ASSERT_TRUE(hold.release());
    ASSERT_TRUE(m_agent->wait_broker_idle());
    uct_ep_h ep = m_node->connect(m_agent->dev_addr(), m_agent->iface_addr());
    ASSERT_NE(nullptr, ep);
    ASSERT_TRUE(m_agent->fill(r.buf.index, 15));
    ASSERT_EQ(UCS_OK, m_node->copy(ep, false, local_ptr(local, 0), MiB,
                                   r.buf.addr, r.rkey.rkey));
    EXPECT_TRUE(m_node->check(local, 15, 0, MiB));
}

/*
 * The staging ring (docs/owner-copies.md, "The staging ring"): our buffer
 * is legacy memory (or host memory) the owner cannot map, so each chunk
 * goes through a slot of a VMM ring we share with the owner. A ring of 2
 * slots of the granularity, so that large copies wrap it several times.
 */
class owner_copy_staged : public owner_copy_uct {
public:
    config_changes_t iface_config() const override
    {
        return {{"OWNER_COPY_STAGING_SLOTS", "2"},
                {"OWNER_COPY_STAGING_SLOT_SIZE", "1"}};
    }

    virtual size_t ring_size() const { return 2 * cuda_vmm_granularity(); }
};


/* Put and get from a legacy buffer, 1 B to more than twice the ring at odd
 * offsets; the bytes around each range stay as they were on both sides */
TEST_F(owner_copy_staged, put_get_zcopy_legacy_importer) {
    const size_t ring = ring_size(), size = 3 * ring + MiB;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 1, &r));
    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);

    put_get_ranges(local, r, size, 1, 200,
                   {{1, 1}, {13, 7}, {4099, 4095}, {65537, ring / 2 + 1},
                    {777, ring + 3}, {3, 2 * ring + ring / 3 + 5}});
    EXPECT_EQ(0u, m_node->ep_errors());
    /* the owner's GPU is ours: a device ring */
    expect_one_ring(false);
}


/* Host memory goes through the ring too */
TEST_F(owner_copy_staged, put_get_zcopy_host_importer) {
    const size_t size = ring_size() + 12345, off = 11;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size + off, 40, &r));
    bytes_t host = pattern(41, off + size); /* by position, as the agent's */

    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, true, host.data() + off, size,
                                   r.buf.addr + off, r.rkey.rkey));
    EXPECT_TRUE(m_agent->check(r.buf.index, 41, off, size));
    EXPECT_TRUE(m_agent->check(r.buf.index, 40, 0, off));
    bytes_t back(size);
    ASSERT_TRUE(m_agent->fill(r.buf.index, 42));
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false, back.data(), size,
                                   r.buf.addr + off, r.rkey.rkey));
    for (size_t i = 0; i < size; ++i) {
        ASSERT_EQ(pattern_byte(42, off + i), back[i]) << "byte " << i;
    }
}


/* Several staged ops in flight at once share the ring: those that find no
 * free slot wait, and each lands where it should */
TEST_F(owner_copy_staged, ops_share_the_ring) {
    const size_t chunk = ring_size() / 2 + 4097, count = 6;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(chunk * count, 50, &r));
    int local = m_node->alloc(BUF_LEGACY, chunk * count);
    std::vector<completion> puts(count), gets(count);

    m_node->fill(local, 51);
    for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(local, i * chunk), chunk,
                                       r.buf.addr + i * chunk, r.rkey.rkey,
                                       &puts[i]));
    }
    EXPECT_EQ(UCS_INPROGRESS, uct_iface_flush(m_node->iface(), 0, nullptr));
    ASSERT_TRUE(m_node->progress_until([&] { return all_done(puts); }));
    for (const auto &c : puts) {
        EXPECT_EQ(UCS_OK, c.status);
    }
    EXPECT_TRUE(m_agent->check(r.buf.index, 51, 0, chunk * count));

    ASSERT_TRUE(m_agent->fill(r.buf.index, 52));
    for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, i * chunk),
                                       chunk, r.buf.addr + i * chunk,
                                       r.rkey.rkey, &gets[i]));
    }
    ASSERT_TRUE(m_node->progress_until([&] { return all_done(gets); }));
    for (const auto &c : gets) {
        EXPECT_EQ(UCS_OK, c.status);
    }
    EXPECT_TRUE(m_node->check(local, 52, 0, chunk * count));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_node->iface(), 0, nullptr));
}


/* An op of a slot's size, the ring having two, is cut in two chunks that
 * take both slots at once: the owner's copy of one runs while we copy the
 * other. Put and get, bytes checked. */
TEST_F(owner_copy_staged, op_smaller_than_the_ring_spreads_over_its_slots) {
    const size_t size = ring_size() / 2;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 70, &r));
    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);

    completion get;
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), size,
                                   r.buf.addr, r.rkey.rkey, &get));
    EXPECT_EQ(2u, busy_slots()) << "two chunks in flight";
    ASSERT_TRUE(m_node->progress_until([&] { return get.done; }));
    EXPECT_EQ(UCS_OK, get.status);
    EXPECT_TRUE(m_node->check(local, 70, 0, size));

    completion put;
    m_node->fill(local, 71);
    ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(local, 0), size,
                                   r.buf.addr, r.rkey.rkey, &put));
    EXPECT_EQ(2u, busy_slots()) << "two chunks in flight";
    ASSERT_TRUE(m_node->progress_until([&] { return put.done; }));
    EXPECT_EQ(UCS_OK, put.status);
    EXPECT_TRUE(m_agent->check(r.buf.index, 71, 0, size));
    EXPECT_EQ(0u, busy_slots());
}


/* A VMM buffer still takes the single copy the owner makes: with our own
 * copy engine held, the op completes; a legacy one waits for our copy */
TEST_F(owner_copy_staged, vmm_buffer_is_not_staged) {
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(MiB, 60, &r));
    int vmm    = m_node->alloc(BUF_VMM, MiB);
    int legacy = m_node->alloc(BUF_LEGACY, MiB);
    completion staged;

    copy_engine_hold hold;
    if (!hold.ok()) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    m_node->fill(vmm, 61);
    EXPECT_EQ(UCS_OK, m_node->copy(m_ep, true, local_ptr(vmm, 0), MiB,
                                   r.buf.addr, r.rkey.rkey))
            << "the owner's copy alone";
    EXPECT_TRUE(m_agent->check(r.buf.index, 61, 0, MiB));

    m_node->fill(legacy, 62);
    ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(legacy, 0), MiB,
                                   r.buf.addr, r.rkey.rkey, &staged));
    for (int i = 0; i < 100; ++i) {
        m_node->progress();
    }
    EXPECT_FALSE(staged.done) << "our copy into the slot is held";
    hold.release();
    ASSERT_TRUE(m_node->progress_until([&] { return staged.done; }));
    EXPECT_EQ(UCS_OK, staged.status);
    EXPECT_TRUE(m_agent->check(r.buf.index, 62, 0, MiB));
}


/* Our copy between the slot and the buffer fails: the op completes with
 * the driver's error mapped (CUDA_ERROR_OUT_OF_MEMORY: UCS_ERR_NO_MEMORY),
 * at once when it fails to start, later when it fails to run; the ring
 * serves the next ops */
TEST_F(owner_copy_staged, importer_copy_failure) {
    const size_t size = ring_size() + MiB;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 70, &r));
    int local = m_node->alloc(BUF_LEGACY, size);
    completion get, put;

    m_node->fill(local, 71);
    if (!fault_reload("cuMemcpyAsync:1:CUDA_ERROR_OUT_OF_MEMORY")) {
        GTEST_SKIP() << "needs the emulator's fault injection";
    }
    faults_cleared restore;
    EXPECT_EQ(UCS_ERR_NO_MEMORY, post(true, local_ptr(local, 0), size,
                                      r.buf.addr, r.rkey.rkey, &put))
            << "a put's first copy is ours";

    ASSERT_TRUE(fault_reload("cuMemcpyAsync:1:CUDA_ERROR_OUT_OF_MEMORY"));
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), size,
                                   r.buf.addr, r.rkey.rkey, &get))
            << "a get's first copy is the owner's";
    ASSERT_TRUE(m_node->progress_until([&] { return get.done; }));
    EXPECT_EQ(UCS_ERR_NO_MEMORY, get.status);

    ASSERT_TRUE(fault_reload("cuEventQuery:1:CUDA_ERROR_LAUNCH_FAILED"));
    completion put2;
    ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(local, 0), size,
                                   r.buf.addr, r.rkey.rkey, &put2));
    ASSERT_TRUE(m_node->progress_until([&] { return put2.done; }));
    EXPECT_EQ(UCS_ERR_IO_ERROR, put2.status);
    ASSERT_TRUE(fault_reload(""));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_node->iface(), 0, nullptr));

    m_node->fill(local, 71); /* the failed get wrote its other chunk */
    EXPECT_EQ(UCS_OK, m_node->copy(m_ep, true, local_ptr(local, 0), size,
                                   r.buf.addr, r.rkey.rkey));
    EXPECT_TRUE(m_agent->check(r.buf.index, 71, 0, size));
    EXPECT_EQ(0u, m_node->ep_errors());
}


/* Our own copy failing with an error that maps to UCS_ERR_IO_ERROR
 * (CUDA_ERROR_LAUNCH_FAILED) fails that op alone: the session with the
 * owner, and a get it still owes, go on (only its socket failing ends it) */
TEST_F(owner_copy_staged, local_failure_keeps_the_session) {
    const size_t size = MiB / 4; /* one chunk, one slot each */
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 90, &r));
    int get_buf = m_node->alloc(BUF_LEGACY, size);
    int put_buf = m_node->alloc(BUF_LEGACY, size);
    completion get, put;

    agent_copies_held hold(m_agent.get());
    if (!hold.held) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    faults_cleared restore; /* before the hold is released */

    m_node->fill(get_buf, 91);
    m_node->fill(put_buf, 92);
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(get_buf, 0), size,
                                   r.buf.addr, r.rkey.rkey, &get))
            << "the owner's copy is held";
    ASSERT_TRUE(fault_reload("cuMemcpyAsync:1:CUDA_ERROR_LAUNCH_FAILED"));
    EXPECT_EQ(UCS_ERR_IO_ERROR, post(true, local_ptr(put_buf, 0), size,
                                     r.buf.addr, r.rkey.rkey, &put))
            << "a put's first copy is ours";
    ASSERT_TRUE(fault_reload(""));
    for (int i = 0; i < 100; ++i) {
        m_node->progress();
    }
    EXPECT_FALSE(get.done) << "the get owed by the session failed with the put";

    ASSERT_TRUE(hold.release());
    ASSERT_TRUE(m_node->progress_until([&] { return get.done; }));
    EXPECT_EQ(UCS_OK, get.status);
    EXPECT_TRUE(m_node->check(get_buf, 90, 0, size));
    EXPECT_EQ(0u, m_node->ep_errors());
}


/* The owner dies while it owes a get, whose completion callback posts a
 * get to it on another endpoint: the session ending takes no new op (the
 * callback's post opens a new session, which the dead owner refuses at
 * once), and nothing the session's end frees is used after */
TEST_F(owner_copy_staged, callback_posts_while_the_session_ends) {
    const size_t size = MiB / 4; /* one chunk */
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 95, &r));
    int first_buf  = m_node->alloc(BUF_LEGACY, size);
    int second_buf = m_node->alloc(BUF_LEGACY, size);
    uct_ep_h ep2   = m_node->connect(m_agent->dev_addr(),
                                     m_agent->iface_addr());
    posting_completion first;
    completion second;

    ASSERT_NE(nullptr, ep2);
    first.post = [&] {
        return post(false, local_ptr(second_buf, 0), size, r.buf.addr,
                    r.rkey.rkey, &second, ep2);
    };
    if (!m_agent->hold_copies(true)) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(first_buf, 0), size,
                                   r.buf.addr, r.rkey.rkey, &first))
            << "the owner's copy is held";

    m_agent->kill_now();
    ASSERT_TRUE(m_node->progress_until([&] { return first.done; }));
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, first.status);
    ASSERT_TRUE(first.posted);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, first.post_status)
            << "not a new session, refused by the dead owner's broker";
    EXPECT_FALSE(second.done);
    EXPECT_TRUE(ucs_list_is_empty(&copies()->sessions));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_node->iface(), 0, nullptr));

    TearDown();
    EXPECT_EQ(m_fds, count_open_fds()) << "no fd left behind";
}


/* A completion callback from our copy out of a slot (the completion
 * queue's progress) posts to an owner that died since it answered: the
 * post finds the session's socket broken and fails alone; the ring it ran
 * on is still there, and the session ends in the next progress (the
 * flush waits for that), its socket and ring freed */
TEST_F(owner_copy_staged, callback_post_finds_the_socket_broken) {
    const size_t size = MiB / 4; /* one chunk */
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 96, &r));
    int first_buf  = m_node->alloc(BUF_LEGACY, size);
    int second_buf = m_node->alloc(BUF_LEGACY, size);
    posting_completion first;
    completion second;

    first.post = [&] {
        return post(false, local_ptr(second_buf, 0), size, r.buf.addr,
                    r.rkey.rkey, &second);
    };
    copy_engine_hold hold;
    if (!hold.ok()) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    int maps = count_memfd_mappings(); /* before the ring */
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(first_buf, 0), size,
                                   r.buf.addr, r.rkey.rkey, &first));
    ASSERT_TRUE(m_node->progress_until([&] { return owed_answers() == 0; }))
            << "the owner answered; our copy out of the slot is held";
    EXPECT_FALSE(first.done);

    m_agent->kill_now();
    hold.release();
    ASSERT_TRUE(m_node->progress_until([&] { return first.done; }));
    EXPECT_EQ(UCS_OK, first.status);
    EXPECT_TRUE(m_node->check(first_buf, 96, 0, size));
    ASSERT_TRUE(first.posted);
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, first.post_status)
            << "the owner's end of the socket is closed";
    EXPECT_FALSE(second.done);
    /* iface progress reads the sessions before the completion queue: the
     * session is still there, to end in the next progress */
    ASSERT_NE(UCS_OK, session()->send_status);
    EXPECT_EQ(UCS_ERR_BUSY, uct_iface_event_arm(m_node->iface(),
                                                UCT_EVENT_SEND_COMP))
            << "a waiter would sleep with the session still to end";

    ASSERT_TRUE(m_node->progress_until([&] {
        return uct_iface_flush(m_node->iface(), 0, nullptr) == UCS_OK;
    })) << "the broken session ends in progress";
    EXPECT_TRUE(ucs_list_is_empty(&copies()->sessions));
    EXPECT_EQ(maps, count_memfd_mappings()) << "the ring went with the session";
    EXPECT_FALSE(second.done);

    TearDown();
    EXPECT_EQ(m_fds, count_open_fds()) << "no fd left behind";
}


/* A waiter armed on the event fd is woken by each staged step: the owner's
 * answer (its socket), then our copy out of the slot (the completion
 * queue's eventfd) */
TEST_F(owner_copy_staged, staged_steps_wake_the_event_fd) {
    const size_t size = 2 * ring_size() + 5;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 80, &r));
    int local = m_node->alloc(BUF_LEGACY, size);
    completion op;
    int fd;

    ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(m_node->iface(), &fd));
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), size,
                                   r.buf.addr, r.rkey.rkey, &op));
    unsigned sleeps = 0;
    while (!op.done) {
        ucs_status_t status = uct_iface_event_arm(m_node->iface(),
                                                  UCT_EVENT_SEND_COMP);
        if (status == UCS_OK) {
            /* the timeout is a safety net: without the wakeup, it fails */
            struct pollfd pfd = {fd, POLLIN, 0};
            ASSERT_EQ(1, poll(&pfd, 1, hang_guard_ms(60000)))
                    << "a staged step did not wake the waiter";
            ++sleeps;
        } else {
            ASSERT_EQ(UCS_ERR_BUSY, status);
        }
        while (m_node->progress() > 0) {
        }
    }
    EXPECT_GT(sleeps, 0u);
    EXPECT_EQ(UCS_OK, op.status);
    EXPECT_TRUE(m_node->check(local, 80, 0, size));
}


/* The owner dies during staged ops, one running and one waiting for a
 * slot: both complete with an error, the flush too, the endpoint is
 * reported failed, and no fd is left behind */
TEST_F(owner_copy_staged, owner_killed_mid_staged_op) {
    const size_t size = 2 * ring_size();
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(2 * size, 90, &r));
    int local = m_node->alloc(BUF_LEGACY, 2 * size);
    completion first, second, flush;

    if (!m_agent->hold_copies(true)) {
        GTEST_SKIP() << "needs the emulator's copy-engine hold";
    }
    int maps = count_memfd_mappings(); /* before the ring */
    ASSERT_EQ(UCS_INPROGRESS, post(false, local_ptr(local, 0), size,
                                   r.buf.addr, r.rkey.rkey, &first));
    ASSERT_EQ(UCS_INPROGRESS, post(true, local_ptr(local, size), size,
                                   r.buf.addr + size, r.rkey.rkey, &second));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, &flush.comp));
    for (int i = 0; i < 100; ++i) {
        m_node->progress();
    }
    EXPECT_FALSE(first.done);
    EXPECT_FALSE(second.done);

    m_agent->kill_now();
    ASSERT_TRUE(m_node->progress_until([&] {
        return first.done && second.done && flush.done &&
               (m_node->ep_errors() > 0);
    })) << "first " << first.done << " second " << second.done << " flush "
        << flush.done << " ep errors " << m_node->ep_errors();
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, first.status);
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, second.status);
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, nullptr));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_node->iface(), 0, nullptr));
    EXPECT_EQ(maps, count_memfd_mappings()) << "the ring went with the session";

    TearDown();
    EXPECT_EQ(m_fds, count_open_fds()) << "no fd left behind";
}


/* The importer killed mid-copy: we own legacy memory; an agent in a new
 * PID namespace gets from it and puts to it through its staging ring (its
 * buffer legacy too) while our copy engine holds the copies, and is
 * killed. Once the held copies end, our broker closes the session and
 * unmaps the agent's ring: our fds and mappings are back to what they were
 * with no importer */
class owner_copy_importer_killed : public datapath_pair {
public:
    void SetUp() override
    {
        datapath_pair::SetUp();
        if (IsSkipped()) {
            return;
        }
        if (!copy_engine_hold_supported()) {
            GTEST_SKIP() << "needs the emulator's copy-engine hold";
        }
        m_env.reset(new scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY", "y"));
        /* the owner's lane even where we could open its legacy memory
         * ourselves (our pid is not the agent's): test_legacy_direct.cc
         * takes the direct path */
        m_direct.reset(new scoped_env("UCX_CUDA_IPC_NS_LEGACY_DIRECT", "n"));
        m_node.reset(new uct_node());
        ASSERT_TRUE(m_node->ok());
    }

    void TearDown() override
    {
        datapath_pair::TearDown();
        m_env.reset();
        m_direct.reset();
    }

    /* the copies our broker launched for importers */
    static uint64_t copies()
    {
        uct_cuda_ipc_ns_broker_serve_stats_t stats;
        uct_cuda_ipc_ns_broker_serve_get_stats(&stats);
        return stats.copies;
    }

    std::unique_ptr<scoped_env> m_env;
    std::unique_ptr<scoped_env> m_direct;
};


TEST_F(owner_copy_importer_killed, owner_unmaps_its_ring) {
    const size_t size = 4 * MiB;
    int exported  = m_node->alloc(BUF_LEGACY, 2 * size);
    ASSERT_GE(exported, 0);
    bytes_t key   = m_node->rkey(exported);
    uint64_t addr = (uint64_t)m_node->buf(exported).ptr;
    peer_options opts;
    opts.new_pid_ns = true;

    /* a first importer starts our copier and leaves: the baseline */
    {
        agent first(opts);
        ASSERT_TRUE(first.ok());
        ASSERT_TRUE(first.connect(*m_node));
        agent_buffer local = first.alloc(BUF_LEGACY, size, 0);
        ASSERT_GE(local.index, 0);
        m_node->fill(exported, 5);
        ASSERT_EQ(UCS_OK, first.copy(false, local.index, size, addr, key));
        EXPECT_TRUE(first.check(local.index, 5, 0, size));
    }
    uct_cuda_ipc_ns_broker_wait_idle();
    int fds  = count_open_fds();
    int maps = count_memfd_mappings();

    {
        agent importer(opts);
        ASSERT_TRUE(importer.ok());
        ASSERT_TRUE(importer.connect(*m_node));
        agent_buffer local = importer.alloc(BUF_LEGACY, 2 * size, 6);
        ASSERT_GE(local.index, 0);
        int rkey = importer.rkey_unpack(key);
        ASSERT_GE(rkey, 0);
        {
            copy_engine_hold hold(-1);
            ASSERT_TRUE(hold.ok());
            uint64_t before = copies();
            /* a get of two slots: the owner's copies into them come first
             * (the agent does not progress: what needs it waits) */
            ASSERT_TRUE(importer.post(false, local.index, 2 * size, addr,
                                      rkey));
            ASSERT_TRUE(m_node->progress_until([&] {
                return copies() >= before + 2;
            })) << "our copier launched " << (copies() - before) << " copies";
            EXPECT_GT(count_memfd_mappings(), maps)
                    << "the ring is mapped here";
            importer.kill_now();
        }
    } /* the agent's channel closed too */

    uct_cuda_ipc_ns_broker_wait_idle();
    EXPECT_EQ(maps, count_memfd_mappings()) << "the ring stayed mapped";
    EXPECT_EQ(fds, count_open_fds()) << "an fd stayed open";
}


/* What UCP's RMA lanes use on such keys: put short and put bcopy (our data
 * in slots before they return, the owner's copies done by the flush) and
 * get bcopy (unpacked before its completion), each at odd offsets */
struct bcopy_data {
    bytes_t  bytes;
    unsigned unpacked = 0;

    static size_t pack(void *dest, void *arg)
    {
        bcopy_data *self = (bcopy_data*)arg;
        memcpy(dest, self->bytes.data(), self->bytes.size());
        return self->bytes.size();
    }

    static void unpack(void *arg, const void *data, size_t length)
    {
        bcopy_data *self = (bcopy_data*)arg;
        self->bytes.assign((const uint8_t*)data, (const uint8_t*)data + length);
        ++self->unpacked;
    }
};


TEST_F(owner_copy_staged, put_short_bcopy_get_bcopy) {
    const size_t size = MiB, short_off = 13, short_len = 8;
    const size_t bcopy_off = 4097, bcopy_len = 65535;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 100, &r));
    uct_ep_h ep = m_ep;

    auto flush = [&] {
        return m_node->progress_until([&] {
            return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
        });
    };

    /* put short: the data was ours only until it returned */
    bytes_t data = pattern(101, short_off + short_len);
    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, data.data() + short_off,
                                       short_len, r.buf.addr + short_off,
                                       r.rkey.rkey));
    std::fill(data.begin(), data.end(), 0);
    ASSERT_TRUE(flush());
    EXPECT_TRUE(m_agent->check(r.buf.index, 101, short_off, short_len));
    EXPECT_TRUE(m_agent->check(r.buf.index, 100, 0, short_off));
    EXPECT_TRUE(m_agent->check(r.buf.index, 100, short_off + short_len,
                               size - short_off - short_len));

    /* put bcopy */
    bcopy_data out;
    out.bytes = pattern(102, bcopy_off + bcopy_len);
    out.bytes.erase(out.bytes.begin(), out.bytes.begin() + bcopy_off);
    ASSERT_EQ((ssize_t)bcopy_len,
              uct_ep_put_bcopy(m_ep, bcopy_data::pack, &out,
                               r.buf.addr + bcopy_off, r.rkey.rkey));
    std::fill(out.bytes.begin(), out.bytes.end(), 0);
    ASSERT_TRUE(flush());
    EXPECT_TRUE(m_agent->check(r.buf.index, 102, bcopy_off, bcopy_len));
    EXPECT_TRUE(m_agent->check(r.buf.index, 101, short_off, short_len));
    EXPECT_TRUE(m_agent->check(r.buf.index, 100, bcopy_off + bcopy_len,
                               size - bcopy_off - bcopy_len));

    /* get bcopy */
    ASSERT_TRUE(m_agent->fill(r.buf.index, 103));
    bcopy_data in;
    completion comp;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_ep_get_bcopy(m_ep, bcopy_data::unpack, &in, bcopy_len,
                               r.buf.addr + 3, r.rkey.rkey, &comp.comp));
    ASSERT_TRUE(m_node->progress_until([&] { return comp.done; }));
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_EQ(1u, in.unpacked);
    ASSERT_EQ(bcopy_len, in.bytes.size());
    for (size_t i = 0; i < bcopy_len; ++i) {
        ASSERT_EQ(pattern_byte(103, 3 + i), in.bytes[i]) << "byte " << i;
    }
    EXPECT_EQ(0u, m_node->ep_errors());
}


/* A put short or bcopy returns UCS_OK once its data is in a slot: when the
 * owner then refuses it (a forged token), no completion can say so, so its
 * endpoint is reported failed, as a transport whose peer refused a write
 * does; the owner's memory is untouched and other endpoints go on */
TEST_F(owner_copy_staged, refused_put_short_bcopy_fail_the_endpoint) {
    const size_t size = MiB, off = 13, len = 8;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 104, &r));
    uct_rkey_bundle_t forged;
    ASSERT_NO_FATAL_FAILURE(forge_token(r, &forged));
    struct release_key {
        uct_component_h c;
        uct_rkey_bundle_t *k;
        ~release_key() { uct_rkey_release(c, k); }
    } release{m_node->component(), &forged};
    bcopy_data out; /* the bytes the agent's check expects at off */
    out.bytes = pattern(105, off + len);
    out.bytes.erase(out.bytes.begin(), out.bytes.begin() + off);

    const std::vector<std::pair<const char*,
                                std::function<ucs_status_t(uct_ep_h)>>> puts = {
        {"put short", [&](uct_ep_h ep) {
            return uct_ep_put_short(ep, out.bytes.data(), len, r.buf.addr + off,
                                    forged.rkey);
        }},
        {"put bcopy", [&](uct_ep_h ep) {
            ssize_t packed = uct_ep_put_bcopy(ep, bcopy_data::pack, &out,
                                              r.buf.addr + off, forged.rkey);
            return (packed == (ssize_t)len) ? UCS_OK : (ucs_status_t)packed;
        }}};
    for (const auto &put : puts) {
        SCOPED_TRACE(put.first);
        unsigned errors = m_node->ep_errors();
        uct_ep_h ep     = m_node->connect(m_agent->dev_addr(),
                                          m_agent->iface_addr());
        ASSERT_NE(nullptr, ep);
        ASSERT_EQ(UCS_OK, put.second(ep)) << "the data is in a slot";
        ASSERT_TRUE(m_node->progress_until([&] {
            return m_node->ep_errors() > errors;
        })) << "the owner's refusal was not reported";
        EXPECT_EQ(errors + 1, m_node->ep_errors());
    }
    EXPECT_TRUE(m_agent->check(r.buf.index, 104, 0, size)) << "untouched";

    /* the first endpoint, never refused, goes on */
    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, out.bytes.data(), len,
                                       r.buf.addr + off, r.rkey.rkey));
    ASSERT_TRUE(m_node->progress_until([&] {
        return uct_ep_flush(m_ep, 0, nullptr) == UCS_OK;
    }));
    EXPECT_TRUE(m_agent->check(r.buf.index, 105, off, len));
    EXPECT_EQ(0u, m_node->ep_errors() - 2) << "m_ep not reported failed";
}


/* Bad ring sizes are refused when the interface opens */
TEST(owner_copy_staging_config, bad_values_refused) {
    const config_changes_t cases[] = {
        {{"OWNER_COPY_STAGING_SLOTS", "0"}},
        {{"OWNER_COPY_STAGING_SLOTS", "65"}},
        {{"OWNER_COPY_STAGING_SLOT_SIZE", "0"}},
        {{"OWNER_COPY_STAGING_SLOT_SIZE", "2g"}},
        {{"OWNER_COPY_STAGING_SLOTS", "64"},
         {"OWNER_COPY_STAGING_SLOT_SIZE", "1g"}}}; /* the bounds: fine */

    if (!cuda_init()) {
        GTEST_SKIP() << "no CUDA driver or device";
    }
    uct_component_h component = find_component("cuda_ipc_ns");
    uct_md_config_t *md_config;
    uct_md_h md;
    ASSERT_NE(nullptr, component);
    ASSERT_EQ(UCS_OK, uct_md_config_read(component, NULL, NULL, &md_config));
    ASSERT_EQ(UCS_OK, uct_md_open(component, "cuda_ipc_ns", md_config, &md));
    uct_config_release(md_config);

    for (const auto &changes : cases) {
        SCOPED_TRACE(changes.begin()->first + "=" + changes.begin()->second);
        ucs_async_context_t *async;
        uct_worker_h worker;
        uct_iface_config_t *config;
        uct_iface_params_t params = {};
        uct_iface_h iface         = nullptr;

        ASSERT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                                   &async));
        ASSERT_EQ(UCS_OK, uct_worker_create(async, UCS_THREAD_MODE_SINGLE,
                                            &worker));
        ASSERT_EQ(UCS_OK, uct_md_iface_config_read(md, "cu_ipc_ns", NULL, NULL,
                                                   &config));
        modify_config(config, changes);
        params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                      UCT_IFACE_PARAM_FIELD_DEVICE;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = "cu_ipc_ns";
        params.mode.device.dev_name = "cuda";
        ucs_status_t status = uct_iface_open(md, worker, &params, config,
                                             &iface);
        uct_config_release(config);
        EXPECT_EQ((&changes == &cases[4]) ? UCS_OK : UCS_ERR_INVALID_PARAM,
                  status);
        if (iface != nullptr) {
            uct_iface_close(iface);
        }
        uct_worker_destroy(worker);
        ucs_async_context_destroy(async);
    }
    uct_md_close(md);
}

/*
 * The pinned host ring (docs/owner-copies.md): the owner's GPU is one we
 * cannot use (a machine of two GPUs, the agent seeing GPU 1 only, we GPU 0
 * only), so neither side could map a ring on the other's GPU. Its key
 * unpacks as memory its owner copies all the same, and every put and get
 * stages through pinned host memory, whatever our buffer: legacy, VMM the
 * owner could otherwise map, host.
 */
class owner_copy_host_ring : public owner_copy_staged {
public:
    const char *agent_gpus() const override { return "1"; }

    size_t ring_size() const override { return 2 * ucs_get_page_size(); }
};


TEST_F(owner_copy_host_ring, put_get_zcopy_owner_on_a_gpu_we_cannot_use) {
    const size_t ring = ring_size(), size = 3 * ring + MiB;
    uint32_t seed     = 300;
    remote r;

    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 1, &r));
    if (!other_gpu(r)) {
        GTEST_SKIP() << "needs the emulator's GPUs (CUDASIM_DEVICE_COUNT, "
                        "CUDASIM_VISIBLE_DEVICES)";
    }
    for (buffer_kind kind : {BUF_LEGACY, BUF_VMM}) {
        SCOPED_TRACE(kind);
        int local = m_node->alloc(kind, size);
        ASSERT_GE(local, 0);
        ASSERT_TRUE(m_agent->fill(r.buf.index, seed));
        put_get_ranges(local, r, size, seed, seed + 1,
                       {{1, 1}, {4099, 4095}, {777, ring + 3},
                        {3, 2 * ring + ring / 3 + 5}, {1, size - 2}});
        seed += 100;
    }

    /* host memory of ours too */
    bytes_t host = pattern(seed, size);
    ASSERT_EQ(UCS_OK, m_node->copy(m_ep, true, host.data(), size, r.buf.addr,
                                   r.rkey.rkey));
    EXPECT_TRUE(m_agent->check(r.buf.index, seed, 0, size));

    /* staged through pinned host memory, one ring for every buffer of ours */
    expect_one_ring(true);
    EXPECT_EQ(0u, m_node->ep_errors());
}


/* UCX_CUDA_IPC_NS_OWNER_COPY_STAGING=host: the host ring on one GPU too */
class owner_copy_host_ring_configured : public owner_copy_staged {
public:
    config_changes_t iface_config() const override
    {
        config_changes_t changes      = owner_copy_staged::iface_config();
        changes["OWNER_COPY_STAGING"] = "host";
        return changes;
    }

    size_t ring_size() const override { return 2 * ucs_get_page_size(); }
};


TEST_F(owner_copy_host_ring_configured, put_get_zcopy_legacy_importer) {
    const size_t ring = ring_size(), size = 3 * ring + 12345;
    remote r;
    ASSERT_NO_FATAL_FAILURE(export_legacy(size, 5, &r));
    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);

    put_get_ranges(local, r, size, 5, 500,
                   {{1, 1}, {4099, 4095}, {3, 2 * ring + 7}, {1, size - 2}});
    expect_one_ring(true);
    EXPECT_EQ(0u, m_node->ep_errors());
}

/*
 * One session, two rings: the owner sees both GPUs of a machine of two, we
 * GPU 0 only. Its memory on GPU 0 stages through a device ring on ours, its
 * memory on GPU 1 through a host ring, side by side in one session, with
 * copies of both in flight at once.
 */
class owner_copy_two_rings : public owner_copy_staged {
public:
    const char *agent_gpus() const override { return "0,1"; }
};


TEST_F(owner_copy_two_rings, owner_memory_on_our_gpu_and_another) {
    const size_t size = 3 * cuda_vmm_granularity() + 12345;
    remote near, far;

    ASSERT_NO_FATAL_FAILURE(export_copied(BUF_LEGACY, size, 1, &near, 0));
    ASSERT_NO_FATAL_FAILURE(export_copied(BUF_LEGACY, size, 2, &far, 1));
    if (other_gpu(near) || !other_gpu(far)) {
        GTEST_SKIP() << "needs the emulator's GPUs (CUDASIM_DEVICE_COUNT, "
                        "CUDASIM_VISIBLE_DEVICES)";
    }
    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);

    put_get_ranges(local, near, size, 1, 100, {{1, 1}, {4099, size - 4100}});
    put_get_ranges(local, far, size, 2, 200, {{1, 1}, {4099, size - 4100}});

    /* both rings at once: puts of the two halves of our buffer, each to its
     * half of one of the owner's buffers, then gets back */
    const size_t half = size / 2;
    auto both_halves = [&](bool is_put) {
        std::vector<completion> comps(2);
        ASSERT_EQ(UCS_INPROGRESS, post(is_put, local_ptr(local, 0), half,
                                       near.buf.addr, near.rkey.rkey,
                                       &comps[0]));
        ASSERT_EQ(UCS_INPROGRESS, post(is_put, local_ptr(local, half), half,
                                       far.buf.addr + half, far.rkey.rkey,
                                       &comps[1]));
        ASSERT_TRUE(m_node->progress_until([&] { return all_done(comps); }));
        EXPECT_EQ(UCS_OK, comps[0].status);
        EXPECT_EQ(UCS_OK, comps[1].status);
    };

    m_node->fill(local, 300);
    ASSERT_NO_FATAL_FAILURE(both_halves(true));
    EXPECT_TRUE(m_agent->check(near.buf.index, 300, 0, half));
    EXPECT_TRUE(m_agent->check(far.buf.index, 300, half, half));

    ASSERT_TRUE(m_agent->fill(near.buf.index, 301));
    ASSERT_TRUE(m_agent->fill(far.buf.index, 302));
    ASSERT_NO_FATAL_FAILURE(both_halves(false));
    EXPECT_TRUE(m_node->check(local, 301, 0, half));
    EXPECT_TRUE(m_node->check(local, 302, half, half));

    auto rings = staging_rings();
    ASSERT_EQ(2u, rings.size()) << "a device ring and a host ring";
    EXPECT_NE(rings[0]->ops, rings[1]->ops);
    EXPECT_EQ(0u, m_node->ep_errors());
}

} // namespace test
