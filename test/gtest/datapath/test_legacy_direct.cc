/*
 * Legacy memory of another PID namespace opened by the importer itself
 * (UCX_CUDA_IPC_NS_LEGACY_DIRECT, docs/owner-copies.md, "Which path a
 * legacy key takes"): an agent, pid 1 of a new PID namespace, exports
 * cuMemAlloc memory with its owner's copies on (its key names its broker);
 * we are not pid 1, so the emulator opens its handle here, as driver 580
 * did on an H200. Put and get go through our mapping cache, one copy by our
 * copy engine, and the owner's broker launches no copy. Where the open is
 * predicted to fail (the key's pid is ours, its GPU is not ours) the key is
 * an owner copy key at once; where it fails (the emulator's
 * CUDASIM_LEGACY_IPC_PIDNS=refuse, the refusal older drivers are reported
 * to give) the op, and every later key of that owner, go to the owner's
 * copies, logged once. Bytes are checked on both sides.
 */
#include "fixture.h"
#include "common/peer.h"

extern "C" {
#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_legacy_direct.h"
#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_iface.h"
}

#include <gtest/gtest.h>
#include <atomic>
#include <cstring>
#include <string>


namespace test {

namespace {

/* The failures of our own open that the module logged (at diag level, once
 * per owner) since construction, and the driver's answer to the last one:
 * its counters, not the log, whose level a test cannot raise while other
 * threads read it */
class fallback_log {
public:
    fallback_log() : m_base(logged()) {}

    uint64_t count() const { return logged() - m_base; }

    static std::string last()
    {
        char answer[64];
        uint64_t n;

        uct_cuda_ipc_ns_legacy_direct_get_stats(&n, answer, sizeof(answer));
        return answer;
    }

private:
    static uint64_t logged()
    {
        char answer[64];
        uint64_t n;

        uct_cuda_ipc_ns_legacy_direct_get_stats(&n, answer, sizeof(answer));
        return n;
    }

    uint64_t m_base;
};

} // namespace


class legacy_direct : public datapath_pair {
public:
    void SetUp() override
    {
        datapath_pair::SetUp();
        if (IsSkipped()) {
            return;
        }
        /* the agent's legacy keys name its broker: its copies are there
         * to fall back to */
        m_env.reset(new scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY", "y"));
        peer_options opts;
        opts.new_pid_ns = true; /* pid 1 there; we are not */
        start(md_config(), {}, opts);
        ASSERT_NE(uct_cuda_ipc_ns_nsid_self()->pid, m_agent->remote_pid());
    }

    void TearDown() override
    {
        datapath_pair::TearDown();
        m_env.reset();
    }

    /* our md's configuration (LEGACY_DIRECT: default) */
    virtual config_changes_t md_config() const { return {}; }

    static uct_cuda_ipc_ns_md_rkey_t *key_of(const remote &r)
    {
        return (uct_cuda_ipc_ns_md_rkey_t*)r.rkey.rkey;
    }

    /* a legacy buffer of the agent and its key, unpacked here */
    remote export_legacy(size_t size, uint32_t seed)
    {
        remote r = export_buffer(BUF_LEGACY, size, seed);
        EXPECT_NE(nullptr, key_of(r));
        return r;
    }

    /* @a r's key changed by @a change, unpacked (released at TearDown) */
    template <typename F>
    ucs_status_t unpack_changed(const remote &r, F change,
                                uct_rkey_bundle_t *bundle)
    {
        uct_cuda_ipc_ns_rkey_info_t info;
        bytes_t key(r.buf.rkey.size());
        ucs_status_t status;

        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(r.buf.rkey.data(),
                                                     r.buf.rkey.size(),
                                                     &info));
        change(&info);
        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&info, key.data()));
        status = uct_rkey_unpack(m_node->component(), key.data(), bundle);
        if (status == UCS_OK) {
            m_rkeys.push_back(*bundle);
        }
        return status;
    }

    uct_cuda_ipc_ns_copy_op_sessions_t *copies()
    {
        return &ucs_derived_of(m_node->iface(),
                               uct_cuda_ipc_ns_iface_t)->copies;
    }

    /* copies the agent's broker launched */
    uint64_t owner_copies()
    {
        broker_stats stats = {};
        EXPECT_TRUE(m_agent->broker_served(&stats));
        return stats.copies;
    }

    /* a put then a get of [offset, offset + length) between our buffer
     * @a local and the agent's buffer of @a r (both @a size bytes), bytes
     * checked on both sides and around the range (offset > 0 and
     * offset + length < size: a check of 0 bytes checks to the end) */
    void put_get(int local, const remote &r, size_t size, size_t offset,
                 size_t length, uint32_t seed)
    {
        const size_t tail = offset + length;

        ASSERT_TRUE(m_agent->fill(r.buf.index, seed));
        m_node->fill(local, seed + 1);
        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, true,
                                       (char*)m_node->buf(local).ptr + offset,
                                       length, r.buf.addr + offset,
                                       r.rkey.rkey));
        EXPECT_TRUE(m_agent->check(r.buf.index, seed + 1, offset, length));
        EXPECT_TRUE(m_agent->check(r.buf.index, seed, 0, offset));
        EXPECT_TRUE(m_agent->check(r.buf.index, seed, tail, size - tail));

        ASSERT_TRUE(m_agent->fill(r.buf.index, seed + 2));
        m_node->fill(local, seed + 3);
        ASSERT_EQ(UCS_OK, m_node->copy(m_ep, false,
                                       (char*)m_node->buf(local).ptr + offset,
                                       length, r.buf.addr + offset,
                                       r.rkey.rkey));
        EXPECT_TRUE(m_node->check(local, seed + 2, offset, length));
        EXPECT_TRUE(m_node->check(local, seed + 3, 0, offset));
        EXPECT_TRUE(m_node->check(local, seed + 3, tail, size - tail));
    }

    std::unique_ptr<scoped_env> m_env;
};


/* Different pid numbers, the key's GPU ours: the key is opened here; put
 * and get zcopy, put short and get bcopy move the bytes through our mapping
 * cache (the second op a hit), and the owner launched no copy */
TEST_F(legacy_direct, opened_here_when_the_pid_numbers_differ) {
    const size_t size = 3 * MiB;
    uct_cuda_ipc_ns_cache_stats_t before, after;
    remote r = export_legacy(size, 1);
    ASSERT_NE(nullptr, key_of(r));
    EXPECT_FALSE(key_of(r)->owner_copy) << "opened here";
    EXPECT_TRUE(key_of(r)->direct_fallback) << "its owner copies it if not";

    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);
    uct_cuda_ipc_ns_cache_get_stats(&before);
    ASSERT_NO_FATAL_FAILURE(put_get(local, r, size, 4099, MiB + 3, 10));
    uct_cuda_ipc_ns_cache_get_stats(&after);
    EXPECT_EQ(before.misses + 1, after.misses) << "mapped once";
    EXPECT_LE(before.hits + 1, after.hits) << "then found in the cache";
    EXPECT_LE(before.regions + 1, after.regions) << "the owner's region";

    /* put short and get bcopy on the same mapping */
    const char data[] = "legacy memory of another pod";
    char got[sizeof(data)] = {};
    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, data, sizeof(data),
                                       r.buf.addr + 17, r.rkey.rkey));
    struct unpack_arg {
        char *dst;
    } arg = {got};
    ucs_status_t done = uct_ep_get_bcopy(
            m_ep,
            [](void *a, const void *src, size_t len) {
                memcpy(((unpack_arg*)a)->dst, src, len);
            },
            &arg, sizeof(got), r.buf.addr + 17, r.rkey.rkey, nullptr);
    EXPECT_EQ(UCS_OK, done);
    EXPECT_EQ(0, memcmp(data, got, sizeof(data)));

    EXPECT_FALSE(key_of(r)->owner_copy);
    EXPECT_TRUE(ucs_list_is_empty(&copies()->sessions))
            << "no session with the owner";
    EXPECT_EQ(0u, owner_copies()) << "the owner's broker copied nothing";
}


/* The key's pid is ours, in another PID namespace: the driver would take
 * us for the exporter (CUDA_ERROR_INVALID_CONTEXT), so the key goes to its
 * owner's copies without an open being tried */
TEST_F(legacy_direct, equal_pid_number_predicted) {
    uct_rkey_bundle_t bundle;
    remote r = export_legacy(MiB, 1);

    ASSERT_EQ(UCS_OK, unpack_changed(r,
                                     [](uct_cuda_ipc_ns_rkey_info_t *info) {
                                         info->pid = uct_cuda_ipc_ns_nsid_self()->pid;
                                     },
                                     &bundle));
    EXPECT_TRUE(((uct_cuda_ipc_ns_md_rkey_t*)bundle.rkey)->owner_copy);
    EXPECT_FALSE(((uct_cuda_ipc_ns_md_rkey_t*)bundle.rkey)->direct_fallback);
}


/* The key's GPU is not one we can use: not opened here either */
TEST_F(legacy_direct, gpu_not_ours_predicted) {
    uct_rkey_bundle_t bundle;
    remote r = export_legacy(MiB, 1);

    ASSERT_EQ(UCS_OK, unpack_changed(r,
                                     [](uct_cuda_ipc_ns_rkey_info_t *info) {
                                         info->dev_uuid[3] ^= 0x5a;
                                     },
                                     &bundle));
    EXPECT_TRUE(((uct_cuda_ipc_ns_md_rkey_t*)bundle.rkey)->owner_copy);
    EXPECT_FALSE(((uct_cuda_ipc_ns_md_rkey_t*)bundle.rkey)->owner_gpu_usable);
}


/* A driver that refuses the open (as older drivers are reported to): the
 * first op falls back to the owner's copies, bytes right both ways; the
 * failure is logged once, with the driver's answer; a later key of the
 * same owner goes to its copies at unpack, no open tried */
TEST_F(legacy_direct, refused_open_falls_back_to_the_owner_once) {
    if (!copy_engine_hold_supported()) {
        GTEST_SKIP() << "needs the emulator's refusing setting";
    }
    const size_t size = 2 * MiB;
    scoped_env refuse("CUDASIM_LEGACY_IPC_PIDNS", "refuse");
    fallback_log log;
    remote r = export_legacy(size, 1);
    ASSERT_NE(nullptr, key_of(r));
    ASSERT_TRUE(key_of(r)->direct_fallback);

    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);
    ASSERT_NO_FATAL_FAILURE(put_get(local, r, size, 13, 65537, 20));
    EXPECT_TRUE(key_of(r)->owner_copy) << "through the owner now";
    EXPECT_FALSE(key_of(r)->direct_fallback);
    EXPECT_GE(owner_copies(), 2u) << "the owner copied both ways";
    EXPECT_EQ(1u, log.count());
    EXPECT_EQ("CUDA_ERROR_INVALID_CONTEXT", fallback_log::last());

    remote r2 = export_legacy(size, 2);
    ASSERT_NE(nullptr, key_of(r2));
    EXPECT_TRUE(key_of(r2)->owner_copy) << "remembered for that owner";
    ASSERT_NO_FATAL_FAILURE(put_get(local, r2, size, 1, size - 2, 30));
    EXPECT_EQ(1u, log.count()) << "logged once per owner";
}


/* UCX_CUDA_IPC_NS_LEGACY_DIRECT=n: the owner's copies, as before */
class legacy_direct_off : public legacy_direct {
    config_changes_t md_config() const override
    {
        return {{"LEGACY_DIRECT", "n"}};
    }
};


TEST_F(legacy_direct_off, owner_copies_always) {
    const size_t size = MiB;
    remote r = export_legacy(size, 1);
    ASSERT_NE(nullptr, key_of(r));
    EXPECT_TRUE(key_of(r)->owner_copy);

    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);
    ASSERT_NO_FATAL_FAILURE(put_get(local, r, size, 5, 4097, 40));
    EXPECT_GE(owner_copies(), 2u);
}


/* UCX_CUDA_IPC_NS_LEGACY_DIRECT=y: opened here, and a refused open is the
 * op's error, not a fallback */
class legacy_direct_only : public legacy_direct {
    config_changes_t md_config() const override
    {
        return {{"LEGACY_DIRECT", "y"}};
    }
};


TEST_F(legacy_direct_only, refused_open_is_an_error) {
    if (!copy_engine_hold_supported()) {
        GTEST_SKIP() << "needs the emulator's refusing setting";
    }
    const size_t size = MiB;
    remote r = export_legacy(size, 1);
    ASSERT_NE(nullptr, key_of(r));
    EXPECT_FALSE(key_of(r)->owner_copy);
    EXPECT_FALSE(key_of(r)->direct_fallback);

    int local = m_node->alloc(BUF_LEGACY, size);
    ASSERT_GE(local, 0);
    {
        scoped_env refuse("CUDASIM_LEGACY_IPC_PIDNS", "refuse");
        EXPECT_NE(UCS_OK, m_node->copy(m_ep, true, m_node->buf(local).ptr,
                                       size, r.buf.addr, r.rkey.rkey));
    }
    EXPECT_FALSE(key_of(r)->owner_copy);
    EXPECT_EQ(0u, owner_copies());
    /* the driver opens it: the same key works */
    ASSERT_NO_FATAL_FAILURE(put_get(local, r, size, 3, 5000, 50));
    EXPECT_EQ(0u, owner_copies());
}


/*
 * Both pid 1 of their own PID namespaces, as identical pods: an importer
 * agent moves the owner agent's legacy memory; its key is predicted to
 * collide, so the owner's broker makes the copies (the driver was not
 * asked: the emulator would answer CUDA_ERROR_INVALID_CONTEXT), bytes right
 * both ways.
 */
TEST_F(legacy_direct, equal_pid_numbers_between_two_pods) {
    const size_t size = MiB + 4096;
    peer_options opts;
    opts.new_pid_ns = true;
    agent importer(opts);
    ASSERT_TRUE(importer.ok());
    ASSERT_EQ(m_agent->remote_pid(), importer.remote_pid());
    ASSERT_TRUE(importer.connect(*m_agent));

    agent_buffer owned = m_agent->alloc(BUF_LEGACY, size, 7);
    ASSERT_GE(owned.index, 0);
    agent_buffer local = importer.alloc(BUF_LEGACY, size, 8);
    ASSERT_GE(local.index, 0);

    uint64_t before = owner_copies();
    ASSERT_EQ(UCS_OK, importer.copy(true, local.index, size, owned.addr,
                                    owned.rkey));
    EXPECT_TRUE(m_agent->check(owned.index, 8, 0, size));
    ASSERT_TRUE(m_agent->fill(owned.index, 9));
    ASSERT_EQ(UCS_OK, importer.copy(false, local.index, size, owned.addr,
                                    owned.rkey));
    EXPECT_TRUE(importer.check(local.index, 9, 0, size));
    EXPECT_GE(owner_copies(), before + 2) << "through the owner's copies";
}

} // namespace test
