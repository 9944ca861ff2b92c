/*
 * The node's network for "pods" (pod_net.h).
 */
#include "common/pod_net.h"

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
#include <unistd.h>


namespace test {

pod_network &pod_network::get()
{
    static pod_network network;
    return network;
}


bool pod_network::create()
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


void pod_network::destroy()
{
    if (m_created) {
        destroy_links();
        m_created = false;
    }
}


bool pod_network::attach(pid_t pod, std::string *pod_ip)
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


int pod_network::lock_node_network()
{
    int lock = open("/tmp/cuda_ipc_ns_pod_net.lock", O_RDWR | O_CREAT |
                    O_CLOEXEC, 0600);
    if ((lock >= 0) && (flock(lock, LOCK_EX) != 0)) {
        close(lock);
        return -1;
    }
    return lock;
}


std::string pod_network::owner_lock(const std::string &device)
{
    return "/tmp/cuda_ipc_ns_pod_net." + device + ".lock";
}


void pod_network::remove_stale_networks()
{
    const std::string prefix = DEVICE_PREFIX;
    DIR *dir = opendir("/sys/class/net");
    struct dirent *entry;

    if (dir == nullptr) {
        return;
    }
    while ((entry = readdir(dir)) != nullptr) {
        std::string name = entry->d_name;
        /* a bridge, by what the kernel says it is: the name alone cannot
         * tell, as a device named by a pid whose hex ends in 'b' ends in
         * 'b' too (it was taken for a bridge, and a live suite's device
         * removed by the one started beside it) */
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


pod_network::pod_network() :
    m_device(device_of(getpid())),
    m_created(false), m_pods(0), m_owner(-1)
{
}


void pod_network::close_owner_lock()
{
    if (m_owner >= 0) {
        unlink(owner_lock(m_device).c_str());
        close(m_owner);
        m_owner = -1;
    }
}


std::string pod_network::device_of(pid_t pid)
{
    char name[IFNAMSIZ];
    snprintf(name, sizeof(name), "%s%x", DEVICE_PREFIX, (unsigned)pid);
    return name;
}


std::string pod_network::free_prefix()
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


void pod_network::destroy_links()
{
    sh("ip link del " + m_device); /* and its bridge port */
    sh("ip link del " + bridge());
    close_owner_lock();
}


int pod_network::sh(const std::string &cmd)
{
    return system((cmd + " >/dev/null 2>&1").c_str());
}


void use_pod_network_device()
{
    if (pod_network::get().created()) {
        setenv("UCX_NET_DEVICES", pod_network::get().device().c_str(), 1);
    }
}


void connect_pod(pid_t pod)
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
