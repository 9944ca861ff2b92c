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

#include <sys/types.h>
#include <string>


namespace test {

class pod_network {
public:
    static constexpr const char *DEVICE_PREFIX = "cinbr";

    /* the one of this process; created by create() in main.cc */
    static pod_network &get();

    /* the bridge and its address; false when the kernel refuses */
    bool create();

    void destroy();

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
    bool attach(pid_t pod, std::string *pod_ip);

    /* the lock test processes take to change the node's network: an fd
     * to close, or -1 */
    static int lock_node_network();

    /* held (flock) by the process whose devices are named @a device */
    static std::string owner_lock(const std::string &device);

    /* the bridges and devices whose owner is gone: its lock is free (a
     * lock we cannot open, of another uid, counts as held); under
     * lock_node_network() */
    static void remove_stale_networks();

private:
    pod_network();

    void close_owner_lock();

    /* this side's device of test process @a pid: its pid in hex, so that
     * every pid (up to 2^22) and the pod ends' suffix fit in IFNAMSIZ */
    static std::string device_of(pid_t pid);

    /* 10.214.N. of the first N, from our pid on, that no interface uses */
    static std::string free_prefix();

    std::string bridge() const
    {
        return m_device + "b";
    }

    void destroy_links();

    static int sh(const std::string &cmd);

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
void use_pod_network_device();

/* Wire the pod whose process is @a pod into the node's network, once the
 * peer said it runs (its namespaces exist); gtest failures otherwise */
void connect_pod(pid_t pod);

} // namespace test

#endif
