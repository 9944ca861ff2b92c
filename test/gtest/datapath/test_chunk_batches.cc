/*
 * The first use of many chunks of a registration of several allocations
 * (docs/framework-memory.md, "First use"): the chunks an op touches that the
 * importer has not mapped yet come in batches, one GET_CHUNK_FDS round trip
 * to the owner's broker per 16 of them, never one per chunk; chunks already
 * mapped cost nothing. The owner's broker counts what it served.
 *
 * Both sides are agents ("pods", each in a PID namespace of its own) with
 * the emulator's smallest granularity (4 KiB), as in test_chunks.cc.
 */
#include "fixture.h"

extern "C" {
#include "cuda_ipc_ns_broker_proto.h"
}

#include <gtest/gtest.h>


namespace {

using namespace test;

const size_t GRAN     = 4096; /* CUDASIM_VMM_GRANULARITY below */
const uint32_t BATCH  = UCT_CUDA_IPC_NS_BROKER_FDS_MAX;


/* Round trips for @a n chunks in one run */
uint64_t batches(uint64_t n)
{
    return (n + BATCH - 1) / BATCH;
}


class chunk_batches : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        if (!copy_engine_hold_supported()) {
            GTEST_SKIP() << "needs the emulator (CUDASIM_VMM_GRANULARITY)";
        }
        m_gran.reset(new scoped_env("CUDASIM_VMM_GRANULARITY",
                                    std::to_string(GRAN)));
        peer_options opts;
        opts.new_pid_ns = true;
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

    /* a get of chunks [first, first + count) of @a remote (through the key
     * the importer unpacked once, @a rkey_index, which keeps the layout) to
     * the start of @a local: what the owner's broker served for it */
    broker_stats get_chunks(const agent_buffer &remote, int rkey_index,
                            int local, size_t first, size_t count)
    {
        broker_stats before = {}, after = {};
        std::vector<int> order;

        EXPECT_TRUE(m_owner->broker_served(&before));
        EXPECT_TRUE(m_importer->post(false, local, count * GRAN,
                                     remote.addr + first * GRAN, rkey_index));
        EXPECT_EQ(UCS_OK, m_importer->wait_posted(&order))
                << "chunks " << first << "..+" << count;
        EXPECT_TRUE(m_owner->broker_served(&after));
        return {after.layout_requests - before.layout_requests,
                after.chunk_fds_requests - before.chunk_fds_requests,
                after.chunk_fds_sent - before.chunk_fds_sent};
    }

    std::unique_ptr<scoped_env> m_gran;
    std::unique_ptr<agent>      m_owner;
    std::unique_ptr<agent>      m_importer;
};


/* An op over 64 chunks never mapped: the layout, then 64 fds in
 * ceil(64 / 16) round trips; the same op again asks nothing */
TEST_F(chunk_batches, first_use_of_64_chunks) {
    const size_t num_chunks = 64;
    agent_buffer remote     = m_owner->alloc(BUF_VMM_CHUNKS,
                                             num_chunks * GRAN, 1);
    ASSERT_GE(remote.index, 0);
    agent_buffer local      = m_importer->alloc(BUF_VMM, num_chunks * GRAN, 2);
    ASSERT_GE(local.index, 0);
    int rkey                = m_importer->rkey_unpack(remote.rkey);
    ASSERT_GE(rkey, 0);

    broker_stats served = get_chunks(remote, rkey, local.index, 0, num_chunks);
    EXPECT_EQ(1u, served.layout_requests);
    EXPECT_LE(served.chunk_fds_requests, batches(num_chunks));
    EXPECT_EQ(num_chunks, served.chunk_fds_sent);
    EXPECT_TRUE(m_importer->check(local.index, 1, 0, num_chunks * GRAN));

    served = get_chunks(remote, rkey, local.index, 0, num_chunks);
    EXPECT_EQ(0u, served.layout_requests);
    EXPECT_EQ(0u, served.chunk_fds_requests) << "all mapped";
    EXPECT_EQ(0u, served.chunk_fds_sent);
}


/* Only the chunks not mapped yet are asked for, each run of them in
 * batches: after chunks 0..9 and 20..21, an op over all 64 asks for
 * 10..19 (one round trip) and 22..63 (42 chunks, three) */
TEST_F(chunk_batches, only_chunks_not_mapped_are_asked) {
    const size_t num_chunks = 64;
    agent_buffer remote     = m_owner->alloc(BUF_VMM_CHUNKS,
                                             num_chunks * GRAN, 3);
    ASSERT_GE(remote.index, 0);
    agent_buffer local      = m_importer->alloc(BUF_VMM, num_chunks * GRAN, 4);
    ASSERT_GE(local.index, 0);
    int rkey                = m_importer->rkey_unpack(remote.rkey);
    ASSERT_GE(rkey, 0);

    broker_stats served = get_chunks(remote, rkey, local.index, 0, 10);
    EXPECT_EQ(1u, served.layout_requests);
    EXPECT_EQ(1u, served.chunk_fds_requests);
    EXPECT_EQ(10u, served.chunk_fds_sent);

    served = get_chunks(remote, rkey, local.index, 20, 2);
    EXPECT_EQ(1u, served.chunk_fds_requests);
    EXPECT_EQ(2u, served.chunk_fds_sent);

    served = get_chunks(remote, rkey, local.index, 0, num_chunks);
    EXPECT_EQ(0u, served.layout_requests);
    EXPECT_EQ(batches(10) + batches(42), served.chunk_fds_requests);
    EXPECT_EQ(52u, served.chunk_fds_sent);
    EXPECT_TRUE(m_importer->check(local.index, 3, 0, num_chunks * GRAN));
}

} // namespace
