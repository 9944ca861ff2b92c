/*
 * Registrations of many VMM allocations mapped back to back, as PyTorch's
 * expandable segments and TensorRT-LLM's KV cache map them
 * (docs/framework-memory.md): put/get between two agents ("pods") at offsets
 * that cross chunk boundaries, bytes checked on both sides; a registration
 * of 2,048 chunks with both sides at RLIMIT_NOFILE 1024; a chunk the owner
 * replaced is never used through its old allocation.
 *
 * Both sides are agents with the emulator's smallest granularity (4 KiB),
 * so that thousands of chunks take little memory: the test process's own
 * driver keeps its granularity.
 */
#include "fixture.h"

#include <gtest/gtest.h>


namespace {

using namespace test;

const size_t GRAN = 4096; /* CUDASIM_VMM_GRANULARITY below */


struct chunks_scenario {
    const char *name;
    bool       new_pid_ns; /* each agent in a PID namespace of its own */
};

std::ostream &operator<<(std::ostream &os, const chunks_scenario &s)
{
    return os << s.name;
}


class chunks : public ::testing::TestWithParam<chunks_scenario> {
protected:
    void SetUp() override
    {
        if (!cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        if (!copy_engine_hold_supported()) {
            /* thousands of chunks of a GPU's 2 MiB are too much memory */
            GTEST_SKIP() << "needs the emulator (CUDASIM_VMM_GRANULARITY)";
        }
        m_gran.reset(new scoped_env("CUDASIM_VMM_GRANULARITY",
                                    std::to_string(GRAN)));
        peer_options opts;
        opts.new_pid_ns = GetParam().new_pid_ns;
        m_owner.reset(new agent(opts));
        ASSERT_TRUE(m_owner->ok());
        m_importer.reset(new agent(opts));
        ASSERT_TRUE(m_importer->ok());
        ASSERT_TRUE(m_importer->connect(*m_owner));
    }

    void TearDown() override
    {
        m_importer.reset();
        m_owner.reset();
        m_gran.reset();
    }

    /* put then get of [offset, offset + size) of the owner's chunks */
    void put_get(const agent_buffer &remote, int local, size_t offset,
                 size_t size, uint32_t *seed)
    {
        SCOPED_TRACE("offset " + std::to_string(offset) + " size " +
                     std::to_string(size));
        ASSERT_TRUE(m_importer->fill(local, ++*seed, offset, size));
        ASSERT_EQ(UCS_OK, m_importer->copy(true, local, size,
                                           remote.addr + offset, remote.rkey,
                                           offset));
        EXPECT_TRUE(m_owner->check(remote.index, *seed, offset, size));

        ASSERT_TRUE(m_owner->fill(remote.index, ++*seed, offset, size));
        ASSERT_EQ(UCS_OK, m_importer->copy(false, local, size,
                                           remote.addr + offset, remote.rkey,
                                           offset));
        EXPECT_TRUE(m_importer->check(local, *seed, offset, size));
    }

    void put_get_across(size_t num_chunks)
    {
        size_t size         = num_chunks * GRAN;
        agent_buffer remote = m_owner->alloc(BUF_VMM_CHUNKS, size, 1);
        ASSERT_GE(remote.index, 0);
        agent_buffer local  = m_importer->alloc(BUF_VMM, size, 2);
        ASSERT_GE(local.index, 0);
        uint32_t seed       = 10;
        /* both pods at the limit a container often gets */
        ASSERT_TRUE(m_owner->set_nofile(1024));
        ASSERT_TRUE(m_importer->set_nofile(1024));

        /* the whole range, pieces across one and two boundaries, a piece
         * inside a chunk, the last bytes */
        put_get(remote, local.index, 0, size, &seed);
        put_get(remote, local.index, GRAN - 5, 10, &seed);
        put_get(remote, local.index, GRAN + 3, 2 * GRAN, &seed);
        put_get(remote, local.index, 2 * GRAN + 100, 200, &seed);
        put_get(remote, local.index, 5, size - 10, &seed);
        put_get(remote, local.index, size - 1, 1, &seed);
        /* beyond the registration: refused, nothing copied */
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  m_importer->copy(true, local.index, 2, remote.addr + size - 1,
                                   remote.rkey));
    }

    std::unique_ptr<scoped_env> m_gran;
    std::unique_ptr<agent>      m_owner;
    std::unique_ptr<agent>      m_importer;
};


TEST_P(chunks, put_get_across_4_chunks) {
    put_get_across(4);
}


TEST_P(chunks, put_get_across_64_chunks) {
    put_get_across(64);
}


/*
 * 2,048 chunks (a 40 GiB KV cache in 20 MiB allocations, here 4 KiB ones),
 * both sides at RLIMIT_NOFILE 1024 while the whole range moves in copies of
 * 128 chunks: neither the owner's broker nor the importer may hold an fd per
 * chunk. The importer's cache keeps its default limits: every chunk stays
 * mapped, which costs no fd (the emulator, as a driver, holds none per
 * import: test/cudasim/README.md, "Descriptors"). The owner's 2,048
 * allocations keep the emulator's memfds at 1024 and above, out of the
 * range the limit governs: the owner allocates under a soft limit of 4096.
 */
TEST_P(chunks, put_get_2048_chunks_nofile_1024) {
    const size_t num_chunks = 2048, per_copy = 128;
    const int nofile        = 1024;

    if (!m_owner->set_nofile(4096)) {
        GTEST_SKIP() << "the hard RLIMIT_NOFILE is below 4096: no room for "
                        "the emulator's memfds of 2,048 allocations above "
                     << nofile;
    }
    size_t size         = num_chunks * GRAN;
    int owner_low0      = m_owner->open_fds(nofile);
    agent_buffer remote = m_owner->alloc(BUF_VMM_CHUNKS, size, 1);
    ASSERT_GE(remote.index, 0);
    int owner_fds1      = m_owner->open_fds();
    /* the registration holds no fd per chunk */
    EXPECT_LT(m_owner->open_fds(nofile) - owner_low0, 16);
    agent_buffer local  = m_importer->alloc(BUF_VMM, size, 2);
    ASSERT_GE(local.index, 0);
    ASSERT_TRUE(m_owner->set_nofile(nofile));
    ASSERT_TRUE(m_importer->set_nofile(nofile));
    int importer_fds0 = m_importer->open_fds();

    ASSERT_TRUE(m_importer->fill(local.index, 7));
    for (size_t off = GRAN / 2; off < size; off += per_copy * GRAN) {
        size_t len = std::min(per_copy * GRAN, size - off);
        ASSERT_EQ(UCS_OK, m_importer->copy(true, local.index, len,
                                           remote.addr + off, remote.rkey,
                                           off)) << "offset " << off;
    }
    EXPECT_TRUE(m_owner->check(remote.index, 7, GRAN / 2, size - GRAN / 2));

    ASSERT_TRUE(m_owner->fill(remote.index, 8));
    for (size_t off = 0; off < size; off += per_copy * GRAN) {
        ASSERT_EQ(UCS_OK, m_importer->copy(false, local.index,
                                           per_copy * GRAN, remote.addr + off,
                                           remote.rkey, off))
                << "offset " << off;
    }
    EXPECT_TRUE(m_importer->check(local.index, 8, 0, size));
    /* 2,048 chunks mapped, no fd kept for them */
    EXPECT_LT(m_importer->open_fds() - importer_fds0, 16);
    /* every chunk exported was closed once sent */
    ASSERT_TRUE(m_owner->wait_broker_idle());
    EXPECT_EQ(owner_fds1, m_owner->open_fds());
}


/*
 * The cache counts chunks against its limits: an importer that keeps 16
 * regions moves 64 chunks, twice, in copies of 24 (more chunks than the
 * cache keeps), chunks evicted and imported again, and the bytes are right
 * both ways. (Evicting a pinned region, mutation cache_evicts_pinned, is
 * not caught here: datapath_pair.cache_never_evicts_a_pinned_region.)
 */
TEST_P(chunks, put_get_64_chunks_through_a_cache_of_16) {
    const size_t num_chunks = 64, per_copy = 24;
    scoped_env cache("UCX_CUDA_IPC_NS_CACHE_MAX_REGIONS", "16");

    /* the importer of SetUp read no cache limit: start one that does */
    m_importer.reset();
    peer_options opts;
    opts.new_pid_ns = GetParam().new_pid_ns;
    m_importer.reset(new agent(opts));
    ASSERT_TRUE(m_importer->ok());
    ASSERT_TRUE(m_importer->connect(*m_owner));

    size_t size         = num_chunks * GRAN;
    agent_buffer remote = m_owner->alloc(BUF_VMM_CHUNKS, size, 1);
    ASSERT_GE(remote.index, 0);
    agent_buffer local  = m_importer->alloc(BUF_VMM, size, 2);
    ASSERT_GE(local.index, 0);

    for (int round = 0; round < 2; ++round) {
        ASSERT_TRUE(m_importer->fill(local.index, 7 + round));
        for (size_t off = GRAN / 2; off < size; off += per_copy * GRAN) {
            size_t len = std::min(per_copy * GRAN, size - off);
            ASSERT_EQ(UCS_OK, m_importer->copy(true, local.index, len,
                                               remote.addr + off, remote.rkey,
                                               off)) << "offset " << off;
        }
        EXPECT_TRUE(m_owner->check(remote.index, 7 + round, GRAN / 2,
                                   size - GRAN / 2));

        ASSERT_TRUE(m_owner->fill(remote.index, 9 + round));
        for (size_t off = 0; off < size; off += per_copy * GRAN) {
            size_t len = std::min(per_copy * GRAN, size - off);
            ASSERT_EQ(UCS_OK, m_importer->copy(false, local.index, len,
                                               remote.addr + off, remote.rkey,
                                               off)) << "offset " << off;
        }
        EXPECT_TRUE(m_importer->check(local.index, 9 + round, 0, size));
    }
}


/*
 * The pool shrinks and grows: chunks 1 and 2 are replaced by new
 * allocations at the same addresses. The broker does not export the new
 * allocation for the old key (an op on chunk 2, never imported, fails with
 * a status); the new key never uses the importer's mapping of the old
 * chunk 1.
 */
TEST_P(chunks, replaced_chunk_is_never_used) {
    size_t size         = 4 * GRAN;
    agent_buffer remote = m_owner->alloc(BUF_VMM_CHUNKS, size, 1);
    ASSERT_GE(remote.index, 0);
    agent_buffer local  = m_importer->alloc(BUF_VMM, size, 2);
    ASSERT_GE(local.index, 0);

    /* chunks 0 and 1 are imported */
    ASSERT_EQ(UCS_OK, m_importer->copy(false, local.index, 2 * GRAN,
                                       remote.addr, remote.rkey));
    EXPECT_TRUE(m_importer->check(local.index, 1, 0, 2 * GRAN));

    ASSERT_TRUE(m_owner->replace_chunk(remote.index, 1));
    ASSERT_TRUE(m_owner->replace_chunk(remote.index, 2));
    ASSERT_TRUE(m_owner->fill(remote.index, 3));

    /* chunk 2 is gone for the old key */
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              m_importer->copy(false, local.index, GRAN,
                               remote.addr + 2 * GRAN, remote.rkey,
                               2 * GRAN));

    /* a new key sees the new allocations, not the old chunk 1 */
    bytes_t key = m_owner->reregister(remote.index);
    ASSERT_FALSE(key.empty());
    ASSERT_EQ(UCS_OK, m_importer->copy(false, local.index, size, remote.addr,
                                       key));
    EXPECT_TRUE(m_importer->check(local.index, 3, 0, size));

    ASSERT_TRUE(m_importer->fill(local.index, 4));
    ASSERT_EQ(UCS_OK, m_importer->copy(true, local.index, size, remote.addr,
                                       key));
    EXPECT_TRUE(m_owner->check(remote.index, 4, 0, size));
}


INSTANTIATE_TEST_SUITE_P(
        pods, chunks,
        ::testing::Values(chunks_scenario{"same_pid_ns", false},
                          chunks_scenario{"other_pid_ns", true}),
        ::testing::PrintToStringParamName());

} // namespace
