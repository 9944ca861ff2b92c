/*
 * Test helper: the node's network for "pods", peers in a network namespace
 * of their own (tests with UCX_NET_DEVICES over a veth).
 *
 * As a CNI bridge exists before a pod's processes start, the node's network
 * is made once per test process, before any test starts UCX (main.cc): UCX
 * 1.22 reads the routing table once per process (ucs/sys/netlink.c) and
 * would find no route through an interface added after its first use. This
 * side's device is a veth whose other end is a port of a bridge (UCX 1.22
 * ignores bridge devices unless UCX_TCP_BRIDGE_ENABLE=y). Each pod gets a
 * veth pair: the host end joins the bridge, the other end, named like this
 * side's device so that one UCX_NET_DEVICES serves both sides, goes into
 * the pod with its own address.
 *
 * A test process killed before its teardown leaves its bridge and address
 * behind: the next one removes those whose owner is gone and takes a subnet
 * no interface uses, under a lock shared by test processes. An owner holds a
 * lock of its own devices for its lifetime (a pid cannot tell: a suite in a
 * PID namespace names its devices by a pid the others cannot see).
 */
#ifndef TEST_COMMON_POD_NET_H
#define TEST_COMMON_POD_NET_H

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <sys/types.h>
#include <unistd.h>


namespace test {

class pod_network {
public:
    static constexpr const char *DEVICE_PREFIX = "cinbr";

    /* the one of this process; created by create() in main.cc */
    static pod_network &get()
    {
        static pod_network network;
        return network;
    }

    /* the bridge and its address; false when the kernel refuses */
    bool create()
    {
        if (m_created) {
            return true;
        }
        int lock = lock_node_network();
        if (lock < 0) {
            return false;
        }
        remove_stale_networks();
        m_owner   = open(owner_lock(m_device).c_str(),
                         O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        if ((m_owner < 0) || (flock(m_owner, LOCK_EX | LOCK_NB) != 0)) {
            close_owner_lock();
            close(lock);
            return false;
        }
        m_prefix  = free_prefix();
        m_created = !m_prefix.empty() && !sh("ip link add " + bridge() + " type bridge") &&
                    !sh("ip link add " + m_device + " type veth peer name " +
                        m_device + "u") &&
                    !sh("ip link set " + m_device + "u master " + bridge()) &&
                    !sh("ip addr add " + m_prefix + "1/24 dev " + m_device) &&
                    !sh("ip link set " + bridge() + " up") &&
                    !sh("ip link set " + m_device + "u up") &&
                    !sh("ip link set " + m_device + " up");
        if (!m_created) {
            destroy_links();
        }
        close(lock); /* our address is in place: the next one sees it */
        return m_created;
    }

    void destroy()
    {
        if (m_created) {
            destroy_links();
            m_created = false;
        }
    }

    bool created() const
    {
        return m_created;
    }

    /* UCX_NET_DEVICES on both sides */
    const std::string &device() const
    {
        return m_device;
    }

    /* Wire the pod whose process is @a pod (its network namespace exists):
     * its end is set up with the next address; false on failure */
    bool attach(pid_t pod, std::string *pod_ip)
    {
        std::string host_end = m_device + "p" + std::to_string(++m_pods);
        std::string in_pod   = "nsenter -t " + std::to_string(pod) + " -n ";

        if (!m_created || (m_pods > 250)) {
            return false;
        }
        *pod_ip = m_prefix + std::to_string(m_pods + 1);
        /* the host end goes away with the pod's namespace */
        return !sh("ip link add " + host_end + " type veth peer name " +
                   m_device + " netns " + std::to_string(pod)) &&
               !sh("ip link set " + host_end + " master " + bridge()) &&
               !sh("ip link set " + host_end + " up") &&
               !sh(in_pod + "ip addr add " + *pod_ip + "/24 dev " + m_device) &&
               !sh(in_pod + "ip link set " + m_device + " up") &&
               !sh(in_pod + "ip link set lo up");
    }

    /* the lock test processes take to change the node's network: an fd
     * to close, or -1 */
    static int lock_node_network()
    {
        int lock = open("/tmp/cuda_ipc_ns_pod_net.lock", O_RDWR | O_CREAT |
                        O_CLOEXEC, 0600);
        if ((lock >= 0) && (flock(lock, LOCK_EX) != 0)) {
            close(lock);
            return -1;
        }
        return lock;
    }

    /* held (flock) by the process whose devices are named @a device */
    static std::string owner_lock(const std::string &device)
    {
        return "/tmp/cuda_ipc_ns_pod_net." + device + ".lock";
    }

    /* the bridges and devices whose owner is gone: its lock is free (a
     * lock we cannot open, of another uid, counts as held); under
     * lock_node_network() */
    static void remove_stale_networks()
    {
        const std::string prefix = DEVICE_PREFIX;
        DIR *dir = opendir("/sys/class/net");
        struct dirent *entry;

        if (dir == nullptr) {
            return;
        }
        while ((entry = readdir(dir)) != nullptr) {
            std::string name = entry->d_name;
            /* a bridge, by what the kernel says it is: the name alone
             * cannot tell, as a device named by a pid whose hex ends in 'b'
             * ends in 'b' too (it was taken for a bridge, and a live suite's
             * device removed by the one started beside it) */
            if ((name.compare(0, prefix.size(), prefix) != 0) ||
                (name.size() <= prefix.size() + 1) || (name.back() != 'b') ||
                (access(("/sys/class/net/" + name + "/bridge").c_str(), F_OK) != 0)) {
                continue;
            }
            std::string device = name.substr(0, name.size() - 1);
            std::string path   = owner_lock(device);
            int owner = open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
            if (owner < 0) {
                continue;
            }
            if (flock(owner, LOCK_EX | LOCK_NB) == 0) {
                sh("ip link del " + device);
                sh("ip link del " + name);
                unlink(path.c_str());
            }
            close(owner);
        }
        closedir(dir);
    }

private:
    pod_network() :
        m_device(device_of(getpid())),
        m_created(false), m_pods(0), m_owner(-1)
    {
    }

    void close_owner_lock()
    {
        if (m_owner >= 0) {
            unlink(owner_lock(m_device).c_str());
            close(m_owner);
            m_owner = -1;
        }
    }

    /* this side's device of test process @a pid: its pid in hex, so that
     * every pid (up to 2^22) and the pod ends' suffix fit in IFNAMSIZ */
    static std::string device_of(pid_t pid)
    {
        char name[IFNAMSIZ];
        snprintf(name, sizeof(name), "%s%x", DEVICE_PREFIX, (unsigned)pid);
        return name;
    }

    /* 10.214.N. of the first N, from our pid on, that no interface uses */
    static std::string free_prefix()
    {
        std::set<unsigned> used;
        struct ifaddrs *ifas, *ifa;

        if (getifaddrs(&ifas) != 0) {
            return "";
        }
        for (ifa = ifas; ifa != nullptr; ifa = ifa->ifa_next) {
            if ((ifa->ifa_addr == nullptr) ||
                (ifa->ifa_addr->sa_family != AF_INET)) {
                continue;
            }
            uint32_t ip = ntohl(((struct sockaddr_in*)ifa->ifa_addr)->sin_addr.s_addr);
            if ((ip >> 16) == ((10u << 8) | 214u)) {
                used.insert((ip >> 8) & 0xff);
            }
        }
        freeifaddrs(ifas);
        for (unsigned i = 0; i < 250; ++i) {
            unsigned n = (getpid() + i) % 250;
            if (used.count(n) == 0) {
                return "10.214." + std::to_string(n) + ".";
            }
        }
        return "";
    }

    std::string bridge() const
    {
        return m_device + "b";
    }

    void destroy_links()
    {
        sh("ip link del " + m_device); /* and its bridge port */
        sh("ip link del " + bridge());
        close_owner_lock();
    }

    static int sh(const std::string &cmd)
    {
        return system((cmd + " >/dev/null 2>&1").c_str());
    }

    std::string m_device;
    std::string m_prefix;
    bool        m_created;
    unsigned    m_pods;
    int         m_owner;   /* our owner_lock(), held while our devices exist */
};

/* UCX_NET_DEVICES: the node network's device only, for the UCP tests in one
 * network namespace too: with every interface, another test process adding
 * or removing its own devices while both sides pack and unpack their worker
 * addresses makes them disagree on the lanes (UCX 1.22 asserts in wireup) */
inline void use_pod_network_device()
{
    if (pod_network::get().created()) {
        setenv("UCX_NET_DEVICES", pod_network::get().device().c_str(), 1);
    }
}

/* Wire the pod whose process is @a pod into the node's network, once the
 * peer said it runs (its namespaces exist); gtest failures otherwise */
inline void connect_pod(pid_t pod)
{
    std::string pod_ns = "/proc/" + std::to_string(pod) + "/ns/net";
    char ours[64] = {}, theirs[64] = {};
    std::string pod_ip;

    ASSERT_GT(readlink("/proc/self/ns/net", ours, sizeof(ours) - 1), 0);
    ASSERT_GT(readlink(pod_ns.c_str(), theirs, sizeof(theirs) - 1), 0);
    ASSERT_STRNE(ours, theirs) << "the peer has no netns of its own";
    ASSERT_TRUE(pod_network::get().attach(pod, &pod_ip))
            << "cannot wire the pod to " << pod_network::get().device();
}

} // namespace test

#endif
