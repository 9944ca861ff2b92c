/*
 * Several devices (emulator: CUDASIM_DEVICE_COUNT): put and get between
 * buffers on different devices in both processes, legacy and VMM; peer
 * access as the driver needs it (legacy: CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
 * VMM: cuMemSetAccess for the device that copies); streams per remote device
 * and shared ones; the bandwidth the iface reports for the device pairs.
 *
 * The driver reads its device configuration once per process, so both sides
 * are agents started with the environment of the test.
 */
#include "fixture.h"

#include <gtest/gtest.h>
#include <string>
#include <vector>


namespace {

using namespace test;

const int    NUM_DEVICES = 3;
const size_t BUF_SIZE    = 2 * MiB; /* one VMM granule */


class multi_device : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        if (!copy_engine_hold_supported()) {
            /* the device count and links below are the emulator's */
            GTEST_SKIP() << "needs the emulator's device configuration";
        }
    }

    /* exporter (with @a exporter_opts) and importer agents, the importer
     * connected */
    void start(int devices, const peer_options &exporter_opts = {})
    {
        m_env.emplace_back(new scoped_env("CUDASIM_DEVICE_COUNT",
                                          std::to_string(devices)));
        m_exporter.reset(new agent(exporter_opts));
        ASSERT_TRUE(m_exporter->ok());
        m_importer.reset(new agent());
        ASSERT_TRUE(m_importer->ok());
        ASSERT_TRUE(m_importer->connect(*m_exporter));
    }

    void TearDown() override
    {
        m_importer.reset();
        m_exporter.reset();
        while (!m_env.empty()) { /* in reverse order */
            m_env.pop_back();
        }
    }

    /* put from a local buffer on every device to a remote one on every
     * device, and get back, bytes checked on both sides */
    void put_get_all_pairs(buffer_kind kind)
    {
        std::vector<agent_buffer> remote, local;
        uint32_t seed = 100;

        for (int dev = 0; dev < NUM_DEVICES; ++dev) {
            remote.push_back(m_exporter->alloc(kind, BUF_SIZE, 0, 0, dev));
            ASSERT_GE(remote.back().index, 0) << "device " << dev;
            local.push_back(m_importer->alloc(kind, BUF_SIZE, 0, 0, dev));
            ASSERT_GE(local.back().index, 0) << "device " << dev;
        }

        for (int l = 0; l < NUM_DEVICES; ++l) {
            for (int r = 0; r < NUM_DEVICES; ++r) {
                SCOPED_TRACE("local device " + std::to_string(l) +
                             ", remote device " + std::to_string(r));
                ASSERT_TRUE(m_importer->fill(local[l].index, ++seed));
                ASSERT_EQ(UCS_OK, m_importer->copy(true, local[l].index,
                                                   BUF_SIZE, remote[r].addr,
                                                   remote[r].rkey));
                EXPECT_TRUE(m_exporter->check(remote[r].index, seed, 0,
                                              BUF_SIZE));

                ASSERT_TRUE(m_exporter->fill(remote[r].index, ++seed));
                ASSERT_EQ(UCS_OK, m_importer->copy(false, local[l].index,
                                                   BUF_SIZE, remote[r].addr,
                                                   remote[r].rkey));
                EXPECT_TRUE(m_importer->check(local[l].index, seed, 0,
                                              BUF_SIZE));
            }
        }
    }

    /* the bandwidth an iface reports with @a native_atomics between the
     * devices (CUDASIM_NATIVE_ATOMICS) */
    double auto_bandwidth(const char *native_atomics)
    {
        scoped_env devices("CUDASIM_DEVICE_COUNT",
                           std::to_string(NUM_DEVICES));
        scoped_env atomics("CUDASIM_NATIVE_ATOMICS", native_atomics);
        agent peer;
        double bandwidth = 0;
        unsigned streams;

        EXPECT_TRUE(peer.ok());
        EXPECT_TRUE(peer.query(&bandwidth, &streams));
        return bandwidth;
    }

    std::vector<std::unique_ptr<scoped_env>> m_env;
    std::unique_ptr<agent>                   m_exporter;
    std::unique_ptr<agent>                   m_importer;
};


/* legacy memory of another device is opened with lazy peer access */
TEST_F(multi_device, legacy_put_get_between_devices) {
    start(NUM_DEVICES);
    put_get_all_pairs(BUF_LEGACY);
}


/* VMM memory is mapped with access for the device that copies */
TEST_F(multi_device, vmm_put_get_between_devices) {
    start(NUM_DEVICES);
    put_get_all_pairs(BUF_VMM);
}


/* legacy memory of another PID namespace, copied by its owner: our buffer
 * on each device stages through a ring of that device, all in one session
 * with the owner */
TEST_F(multi_device, owner_copy_put_get_between_devices) {
    peer_options opts;
    opts.new_pid_ns = true;
    m_env.emplace_back(new scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY", "y"));
    /* the owner's copies, not the importer's own open of its handle */
    m_env.emplace_back(new scoped_env("UCX_CUDA_IPC_NS_LEGACY_DIRECT", "n"));
    start(NUM_DEVICES, opts);
    put_get_all_pairs(BUF_LEGACY);
}


/* the same without peer access: within each device the copies still work,
 * which they do only through a ring on that device (the owner could not
 * copy into a ring on another) */
TEST_F(multi_device, owner_copy_ring_per_device) {
    peer_options opts;
    opts.new_pid_ns = true;
    m_env.emplace_back(new scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY", "y"));
    /* the owner's copies, not the importer's own open of its handle */
    m_env.emplace_back(new scoped_env("UCX_CUDA_IPC_NS_LEGACY_DIRECT", "n"));
    m_env.emplace_back(new scoped_env("CUDASIM_PEER_ACCESS", "0"));
    start(2, opts);

    for (int dev = 0; dev < 2; ++dev) {
        SCOPED_TRACE("device " + std::to_string(dev));
        agent_buffer remote = m_exporter->alloc(BUF_LEGACY, BUF_SIZE, 30 + dev,
                                                0, dev);
        agent_buffer local  = m_importer->alloc(BUF_LEGACY, BUF_SIZE, 40 + dev,
                                                0, dev);
        ASSERT_GE(remote.index, 0);
        ASSERT_GE(local.index, 0);
        ASSERT_EQ(UCS_OK, m_importer->copy(false, local.index, BUF_SIZE,
                                           remote.addr, remote.rkey));
        EXPECT_TRUE(m_importer->check(local.index, 30 + dev, 0, BUF_SIZE));
        ASSERT_TRUE(m_importer->fill(local.index, 50 + dev));
        ASSERT_EQ(UCS_OK, m_importer->copy(true, local.index, BUF_SIZE,
                                           remote.addr, remote.rkey));
        EXPECT_TRUE(m_exporter->check(remote.index, 50 + dev, 0, BUF_SIZE));
    }
}


/* without peer access between two devices, a copy between them fails
 * cleanly; one within a device still works */
TEST_F(multi_device, no_peer_access_fails_cleanly) {
    m_env.emplace_back(new scoped_env("CUDASIM_PEER_ACCESS", "0"));
    start(2);
    agent_buffer remote = m_exporter->alloc(BUF_LEGACY, BUF_SIZE, 7, 0, 0);
    agent_buffer same   = m_importer->alloc(BUF_LEGACY, BUF_SIZE, 0, 0, 0);
    agent_buffer other  = m_importer->alloc(BUF_LEGACY, BUF_SIZE, 0, 0, 1);
    ASSERT_GE(remote.index, 0);
    ASSERT_GE(same.index, 0);
    ASSERT_GE(other.index, 0);

    EXPECT_NE(UCS_OK, m_importer->copy(false, other.index, BUF_SIZE,
                                       remote.addr, remote.rkey));
    ASSERT_EQ(UCS_OK, m_importer->copy(false, same.index, BUF_SIZE,
                                       remote.addr, remote.rkey));
    EXPECT_TRUE(m_importer->check(same.index, 7, 0, BUF_SIZE));
}


/* one stream per remote device; with MAX_STREAMS=1 all remote devices
 * share one, and the copies on it stay correct and complete in post order */
TEST_F(multi_device, streams_per_remote_device_and_shared) {
    for (unsigned max_streams : {16u, 1u}) {
        SCOPED_TRACE("MAX_STREAMS=" + std::to_string(max_streams));
        scoped_env env("UCX_CUDA_IPC_NS_MAX_STREAMS",
                       std::to_string(max_streams));
        start(NUM_DEVICES);

        std::vector<agent_buffer> remote;
        std::vector<int> rkeys;
        for (int dev = 0; dev < NUM_DEVICES; ++dev) {
            remote.push_back(m_exporter->alloc(BUF_VMM, BUF_SIZE, 10 + dev, 0,
                                               dev));
            ASSERT_GE(remote.back().index, 0);
            rkeys.push_back(m_importer->rkey_unpack(remote.back().rkey));
            ASSERT_GE(rkeys.back(), 0);
        }
        /* local buffers on device 0: one context */
        agent_buffer src = m_importer->alloc(BUF_VMM, BUF_SIZE, 20, 0, 0);
        std::vector<agent_buffer> dst;
        for (int dev = 0; dev < NUM_DEVICES; ++dev) {
            dst.push_back(m_importer->alloc(BUF_VMM, BUF_SIZE, 0, 0, 0));
            ASSERT_GE(dst.back().index, 0);
        }
        ASSERT_GE(src.index, 0);

        /* get every remote buffer, then put src over each: the gets must
         * still see the remote buffers' first contents */
        for (int dev = 0; dev < NUM_DEVICES; ++dev) {
            ASSERT_TRUE(m_importer->post(false, dst[dev].index, BUF_SIZE,
                                         remote[dev].addr, rkeys[dev]));
        }
        for (int dev = 0; dev < NUM_DEVICES; ++dev) {
            ASSERT_TRUE(m_importer->post(true, src.index, BUF_SIZE,
                                         remote[dev].addr, rkeys[dev]));
        }
        std::vector<int> order;
        ASSERT_EQ(UCS_OK, m_importer->wait_posted(&order));
        ASSERT_EQ(2u * NUM_DEVICES, order.size());

        for (int dev = 0; dev < NUM_DEVICES; ++dev) {
            EXPECT_TRUE(m_importer->check(dst[dev].index, 10 + dev, 0,
                                          BUF_SIZE)) << dev;
            EXPECT_TRUE(m_exporter->check(remote[dev].index, 20, 0, BUF_SIZE))
                    << dev;
        }

        double bandwidth;
        unsigned num_streams = 0;
        ASSERT_TRUE(m_importer->query(&bandwidth, &num_streams));
        if (max_streams >= NUM_DEVICES) {
            EXPECT_EQ((unsigned)NUM_DEVICES, num_streams);
        } else {
            EXPECT_EQ(max_streams, num_streams);
            /* one stream: completions in post order */
            for (size_t i = 0; i < order.size(); ++i) {
                EXPECT_EQ((int)i, order[i]);
            }
        }
        TearDown();
    }
}


/* the iface reports the worst linked pair: NVLink only when every pair of
 * devices has native atomics (docs/configuration.md) */
TEST_F(multi_device, auto_bandwidth_follows_device_pairs) {
    /* compute capability 8 of the emulated devices: NVLink 300 GB/s, PCIe
     * 25 GB/s */
    EXPECT_DOUBLE_EQ(300e9, auto_bandwidth("all"));
    EXPECT_DOUBLE_EQ(25e9, auto_bandwidth("0"));
    /* devices 0 and 1 linked, 2 over PCIe: the worst pair counts */
    EXPECT_DOUBLE_EQ(25e9, auto_bandwidth("0-1"));
    EXPECT_DOUBLE_EQ(25e9, auto_bandwidth("1-2,0-2"));
    EXPECT_DOUBLE_EQ(300e9, auto_bandwidth("0-1,1-2,0-2"));
}

} // namespace
