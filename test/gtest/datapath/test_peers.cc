/*
 * Many peers at once (issue 17, item 3): one exporting agent, eight
 * importing agents (three of them pid 1 of their own PID namespace) pulling
 * their own slices of one VMM POSIX-fd buffer, while one importer is
 * SIGKILLed with its copies in flight and an fd request open. The exporter
 * itself is the witness: its fd count, its broker's connections, and its
 * registration (the exported fd) after the buffer is freed.
 */
#include "fixture.h"

#include <gtest/gtest.h>


namespace {

using namespace test;


class many_peers : public ::testing::Test {
public:
    void SetUp() override
    {
        if (!cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
    }
};


/*
 * Slices of 1 MiB: the pattern of a seed repeats every MiB
 * (pattern_byte(s, k + n MiB) == pattern_byte(s, k)), so slice i, filled in
 * place with seed SEED0 + i, is checked at offset 0 of the importer's buffer
 * with that seed. Distinct seeds give distinct bytes: an importer that read
 * a neighbour's slice fails.
 */
TEST_F(many_peers, eight_importers_one_killed_the_exporter_leaks_nothing) {
    const int      num_importers = 8;
    const int      num_other_ns  = 3;
    const int      victim        = 5;
    const size_t   slice         = 1 * MiB;
    const uint32_t seed0         = 70;

    /* a client that dies silently must be noticed by its hang-up, not by
     * the broker's deadline for a request: make that deadline moot */
    scoped_env req_timeout("UCX_CUDA_IPC_NS_SOCK_REQ_TIMEOUT", "3600s");

    agent exporter;
    ASSERT_TRUE(exporter.ok());
    int fds_before = exporter.open_fds();
    ASSERT_GT(fds_before, 0);

    agent_buffer eb = exporter.alloc(BUF_VMM, num_importers * slice, 0);
    ASSERT_GE(eb.index, 0);
    for (int i = 0; i < num_importers; ++i) {
        ASSERT_TRUE(exporter.fill(eb.index, seed0 + i, i * slice, slice));
    }
    EXPECT_GT(exporter.open_fds(), fds_before) << "the exported fd is open";

    {
        std::vector<std::unique_ptr<agent>> importers;
        std::vector<int> local(num_importers);
        for (int i = 0; i < num_importers; ++i) {
            peer_options opts;
            opts.new_pid_ns = (i % 3 == 1) && (i / 3 < num_other_ns);
            importers.emplace_back(new agent(opts));
            agent &imp = *importers.back();
            ASSERT_TRUE(imp.ok()) << "importer " << i;
            if (opts.new_pid_ns) {
                EXPECT_EQ(1u, imp.remote_pid()) << "importer " << i;
            }
            ASSERT_TRUE(imp.connect(exporter)) << "importer " << i;
            local[i] = imp.alloc(BUF_VMM, slice, 0).index;
            ASSERT_GE(local[i], 0) << "importer " << i;
            ASSERT_EQ(0, imp.rkey_unpack(eb.rkey)) << "importer " << i;
        }

        /* the victim's copy stays queued on its held copy engine */
        if (!importers[victim]->hold_copies(true)) {
            GTEST_SKIP() << "needs the emulator's copy-engine hold";
        }

        /* all post their get before any waits: the pulls overlap */
        for (int i = 0; i < num_importers; ++i) {
            ASSERT_TRUE(importers[i]->post(false, local[i], slice,
                                           eb.addr + i * slice, 0))
                    << "importer " << i;
        }

        /* the victim also has an fd request open when it dies: connected
         * to the exporter's broker, request not sent */
        ASSERT_TRUE(importers[victim]->broker_connect(eb.rkey));
        importers[victim]->kill_now();

        for (int i = 0; i < num_importers; ++i) {
            if (i == victim) {
                continue;
            }
            std::vector<int> order;
            EXPECT_EQ(UCS_OK, importers[i]->wait_posted(&order))
                    << "importer " << i;
            EXPECT_EQ(1u, order.size()) << "importer " << i;
            EXPECT_TRUE(importers[i]->check(local[i], seed0 + i, 0, slice))
                    << "importer " << i << " got its own slice";
        }

        /* the exporter's bytes are untouched by all this */
        for (int i = 0; i < num_importers; ++i) {
            EXPECT_TRUE(exporter.check(eb.index, seed0 + i, i * slice, slice));
        }
        importers.clear(); /* the survivors exit: their mappings go */
    }

    /* the dead client's connection too: the broker closed every one (a
     * broker that keeps one never answers: the agent's channel times out,
     * and the exporter is killed rather than waited for again) */
    if (!exporter.wait_broker_idle()) {
        exporter.kill_now();
        FAIL() << "the exporter's broker kept a connection open";
    }
    ASSERT_TRUE(exporter.free(eb.index));
    EXPECT_EQ(fds_before, exporter.open_fds())
            << "the exporter leaks no fd: connections, exported fd";
}

} // namespace
