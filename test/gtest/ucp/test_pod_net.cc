/*
 * The pod network's sweep (common/pod_net.h): a test process removes the
 * bridges and devices of test processes that are gone, and nothing of one
 * that lives, whatever its name. Found when the suite first ran as two
 * shards side by side (test/gtest/run_shards.sh): a runner whose pid in hex
 * ends in 'b' had its device taken for a bridge and removed by the other.
 * The names below are of pids above the kernel's limit (2^22), so that no
 * live test process owns them.
 */
#include "common/pod_net.h"

#include <gtest/gtest.h>
#include <sys/file.h>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>


namespace {

bool link_exists(const std::string &name)
{
    return access(("/sys/class/net/" + name).c_str(), F_OK) == 0;
}

int sh(const std::string &cmd)
{
    return system((cmd + " >/dev/null 2>&1").c_str());
}

/* one sweep, as create() runs it */
void sweep()
{
    int lock = test::pod_network::lock_node_network();
    ASSERT_GE(lock, 0);
    test::pod_network::remove_stale_networks();
    close(lock);
}

class pod_net : public ::testing::Test {
protected:
    void TearDown() override
    {
        for (const std::string &name : m_links) {
            sh("ip link del " + name);
        }
        owner_gone();
        unlink(test::pod_network::owner_lock(m_device).c_str());
    }

    /* a live test process's devices, made as create() makes them: its
     * owner lock taken first (a sweep beside us leaves them alone), then
     * its veth @a device (the other end @a device "u") as a port of its
     * bridge @a device "b" */
    void add_network(const std::string &device)
    {
        m_device = device;
        m_owner  = open(test::pod_network::owner_lock(device).c_str(),
                        O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        ASSERT_GE(m_owner, 0);
        ASSERT_EQ(0, flock(m_owner, LOCK_EX | LOCK_NB));
        m_links.push_back(device + "b");
        m_links.push_back(device);
        ASSERT_EQ(0, sh("ip link add " + device + "b type bridge"));
        ASSERT_EQ(0, sh("ip link add " + device + " type veth peer name " +
                        device + "u"));
        ASSERT_EQ(0, sh("ip link set " + device + "u master " + device + "b"));
    }

    /* the process that made them is gone: its lock is free */
    void owner_gone()
    {
        if (m_owner >= 0) {
            close(m_owner);
            m_owner = -1;
        }
    }

    std::vector<std::string> m_links;
    std::string              m_device;
    int                      m_owner = -1;
};

TEST_F(pod_net, sweep_removes_the_network_of_a_process_gone)
{
    add_network("cinbr7ffffe");
    owner_gone();
    sweep();
    EXPECT_FALSE(link_exists("cinbr7ffffeb"));
    EXPECT_FALSE(link_exists("cinbr7ffffe"));
}

TEST_F(pod_net, sweep_keeps_the_network_of_a_live_process)
{
    add_network("cinbr7ffffd");
    sweep();
    EXPECT_TRUE(link_exists("cinbr7ffffdb"));
    EXPECT_TRUE(link_exists("cinbr7ffffd"));
}

/* a live process's device named by a pid whose hex ends in 'b' is no bridge
 * of a device "cinbr7ffff" */
TEST_F(pod_net, sweep_keeps_a_live_device_whose_name_ends_like_a_bridge)
{
    add_network("cinbr7ffffb");
    sweep();
    EXPECT_TRUE(link_exists("cinbr7ffffb"));
    EXPECT_TRUE(link_exists("cinbr7ffffbb"));
}

} // namespace
