/*
 * cuda_ipc_ns: the fd broker against a client of our own uid that tries to
 * starve it (cuda_ipc_ns_broker_serve.h): idle connections, many more than
 * its table holds, connections that never send their request, and a broker
 * out of fds. A legitimate import must still be served. Each test breaks
 * when its guarantee goes (test/mutation/mutations.list).
 */
#include "fdx/fdx_peers.h"

#include <gtest/gtest.h>

extern "C" {
#include "cuda_ipc_ns_broker_serve.h"
#include "cuda_ipc_ns_scm.h"
}

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>


namespace {

using namespace fdx_peers;

/* turns a hang (a broker that never accepts or answers) into a failure */
const int SAFETY_NET_SEC = 30;


void set_timeout(int sock, int optname, int sec)
{
    struct timeval tv = {sec, 0};
    ASSERT_EQ(0, setsockopt(sock, SOL_SOCKET, optname, &tv, sizeof(tv)));
}


/* sockets among the open fds of process @a pid */
int count_sockets(pid_t pid)
{
    std::string dir_name = "/proc/" + std::to_string(pid) + "/fd";
    DIR *dir             = opendir(dir_name.c_str());
    char target[64];
    struct dirent *e;
    int count = 0;

    if (dir == nullptr) {
        return -1;
    }
    while ((e = readdir(dir)) != nullptr) {
        std::string path = dir_name + "/" + e->d_name;
        ssize_t len      = readlink(path.c_str(), target, sizeof(target) - 1);
        if ((len > 0) && (strncmp(target, "socket:", 7) == 0)) {
            ++count;
        }
    }
    closedir(dir);
    return count;
}


/* the broker thread of process @a pid (pthread_setname_np), or -1 */
pid_t broker_thread(pid_t pid)
{
    std::string dir_name = "/proc/" + std::to_string(pid) + "/task";
    DIR *dir             = opendir(dir_name.c_str());
    struct dirent *e;
    pid_t tid = -1;

    if (dir == nullptr) {
        return -1;
    }
    while ((tid < 0) && ((e = readdir(dir)) != nullptr)) {
        std::ifstream comm(dir_name + "/" + e->d_name + "/comm");
        std::string name;
        if (std::getline(comm, name) && (name == "cuda_ipc_ns_brk")) {
            tid = atoi(e->d_name);
        }
    }
    closedir(dir);
    return tid;
}


/* CPU time of thread @a tid of @a pid in clock ticks (utime + stime), or
 * -1 */
long thread_cpu_ticks(pid_t pid, pid_t tid)
{
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" +
                    std::to_string(tid) + "/stat");
    std::string stat;
    long utime, stime;

    if (!std::getline(f, stat)) {
        return -1;
    }
    /* fields 14 and 15; the name (field 2) may hold spaces: count from the
     * ')' that ends it, after which comes field 3 */
    std::istringstream rest(stat.substr(stat.rfind(')') + 1));
    std::string field;
    for (int i = 3; i < 14; ++i) {
        rest >> field;
    }
    if (!(rest >> utime >> stime)) {
        return -1;
    }
    return utime + stime;
}


class broker_dos : public ::testing::Test {
protected:
    void SetUp() override
    {
        /* a thousand held connections need more than a soft limit of 1024 */
        ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &m_nofile));
        struct rlimit rl = m_nofile;
        if (rl.rlim_cur < 2048) {
            rl.rlim_cur = std::min<rlim_t>(2048, rl.rlim_max);
            ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
        }
    }

    void TearDown() override
    {
        for (int fd : m_clients) {
            close(fd);
        }
        EXPECT_EQ(0, setrlimit(RLIMIT_NOFILE, &m_nofile));
    }

    /* A socket connected to the broker of @a desc (an abstract name), or
     * -errno. Blocking: waits for room in the broker's backlog (the safety
     * net: SO_SNDTIMEO); else fails with EAGAIN when the backlog is full. */
    int connect_broker(const uct_cuda_ipc_ns_rkey_info_t &desc, bool blocking)
    {
        struct sockaddr_un sa = {};
        socklen_t len = offsetof(struct sockaddr_un, sun_path) +
                        desc.broker_addr_len;
        int sock, err;

        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, desc.broker_addr, desc.broker_addr_len);
        sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
                      (blocking ? 0 : SOCK_NONBLOCK), 0);
        if (sock < 0) {
            return -errno;
        }
        struct timeval tv = {SAFETY_NET_SEC, 0};
        setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(sock, (struct sockaddr*)&sa, len) < 0) {
            err = errno;
            close(sock);
            return -err;
        }
        return sock;
    }

    /* @a n connections that never send a request, held until the end */
    void hold_idle(const uct_cuda_ipc_ns_rkey_info_t &desc, unsigned n)
    {
        for (unsigned i = 0; i < n; ++i) {
            int sock = connect_broker(desc, true);
            ASSERT_GE(sock, 0) << "connection " << i << ": "
                               << strerror(-sock)
                               << " (the broker stopped accepting?)";
            m_clients.push_back(sock);
        }
    }

    /* Return once the broker accepted every connection made so far: the
     * backlog is first in, first out, and a malformed request is answered
     * (and its connection closed) as soon as the broker reads it */
    void sync_broker(const uct_cuda_ipc_ns_rkey_info_t &desc)
    {
        uint8_t reply[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE + 1];
        int sock = connect_broker(desc, true);

        ASSERT_GE(sock, 0) << strerror(-sock);
        set_timeout(sock, SO_RCVTIMEO, SAFETY_NET_SEC);
        EXPECT_EQ(3, send(sock, "abc", 3, MSG_NOSIGNAL));
        EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE,
                  recv(sock, reply, sizeof(reply), 0))
                << "no answer to the probe: " << strerror(errno);
        close(sock);
    }

    /* Request the fd of @a desc on our connection @a sock; expect it */
    void request_on(int sock, const uct_cuda_ipc_ns_rkey_info_t &desc,
                    uint8_t pattern)
    {
        uint8_t req[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE];
        uint8_t reply[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE];
        uint64_t alloc_id;
        unsigned bstatus;
        size_t len;
        int fd;

        uct_cuda_ipc_ns_broker_proto_pack_request(req, desc.handle.posix.alloc_id,
                                                  desc.token);
        ASSERT_EQ((ssize_t)sizeof(req),
                  send(sock, req, sizeof(req), MSG_NOSIGNAL))
                << "the broker closed our connection: " << strerror(errno);
        set_timeout(sock, SO_RCVTIMEO, SAFETY_NET_SEC);
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_scm_recv_fd(sock, reply,
                                                      sizeof(reply), 0, &len,
                                                      &fd))
                << "the broker closed our connection without an answer";
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_reply(reply, len,
                                                                    &bstatus,
                                                                    &alloc_id));
        EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_OK, bstatus);
        EXPECT_EQ(desc.handle.posix.alloc_id, alloc_id);
        ASSERT_GE(fd, 0);
        EXPECT_TRUE(check_bytes(fd, pattern, MEM_SIZE));
        close(fd);
    }

    /* A client that connects, and sends its request only after more
     * clients connected (fewer than the table holds), is served: the
     * newcomer is kept, and the oldest connection, not the newest, makes
     * room */
    void expect_held_client_served(const uct_cuda_ipc_ns_rkey_info_t &desc,
                                   uint8_t pattern)
    {
        int sock = connect_broker(desc, true);

        ASSERT_GE(sock, 0) << strerror(-sock);
        m_clients.push_back(sock);
        ASSERT_NO_FATAL_FAILURE(hold_idle(desc, 10));
        /* the broker took it, and the ten, with its table full */
        ASSERT_NO_FATAL_FAILURE(sync_broker(desc));
        request_on(sock, desc, pattern);
    }

    /* An import as the transport does it */
    void expect_import(const uct_cuda_ipc_ns_rkey_info_t &desc,
                       uint8_t pattern, double timeout)
    {
        auto cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_BROKER, timeout);
        int fd   = -1;

        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_fdx_import(&cfg, &desc, &fd, NULL));
        EXPECT_TRUE(check_bytes(fd, pattern, MEM_SIZE));
        close(fd);
    }

    struct rlimit    m_nofile;
    std::vector<int> m_clients; /* the attacker's connections, and ours */
};


TEST_F(broker_dos, two_hundred_idle_connections_do_not_block_an_import)
{
    /* an hour: no deadline frees a slot during the test, only eviction */
    auto owner = start_owner(test::peer_options(), "", -1, 3600.0);
    auto desc  = owner_register(*owner, 0xd001, 0xd1);

    ASSERT_NO_FATAL_FAILURE(hold_idle(desc, 200));
    ASSERT_NO_FATAL_FAILURE(sync_broker(desc));
    ASSERT_NO_FATAL_FAILURE(expect_held_client_served(desc, 0xd1));
    expect_import(desc, 0xd1, 2.0);

    stop_owner(*owner);
}


TEST_F(broker_dos, thousand_held_connections)
{
    auto owner    = start_owner(test::peer_options(), "", -1, 3600.0);
    auto desc     = owner_register(*owner, 0xd002, 0xd2);
    int sockets0  = count_sockets(owner->pid());
    unsigned full = 0;

    /* as fast as we can: what finds the backlog full is refused */
    for (int i = 0; i < 1000; ++i) {
        int sock = connect_broker(desc, false);
        if (sock == -EAGAIN) {
            ++full;
            continue;
        }
        ASSERT_GE(sock, 0) << strerror(-sock);
        m_clients.push_back(sock);
    }
    std::cout << "[ INFO     ] 1000 connects: " << m_clients.size()
              << " held, " << full << " found the backlog full" << std::endl;
    ASSERT_GT(m_clients.size(), (size_t)UCT_CUDA_IPC_NS_BROKER_MAX_CONNS);

    ASSERT_NO_FATAL_FAILURE(sync_broker(desc));
    /* its table, and at most the probe's connection, closed just after
     * its answer */
    int held = count_sockets(owner->pid()) - sockets0;
    std::cout << "[ INFO     ] the broker holds " << held << " connections"
              << std::endl;
    EXPECT_LE(held, UCT_CUDA_IPC_NS_BROKER_MAX_CONNS + 1);

    ASSERT_NO_FATAL_FAILURE(expect_held_client_served(desc, 0xd2));
    expect_import(desc, 0xd2, 2.0);

    stop_owner(*owner);
}


TEST_F(broker_dos, idle_connection_closed_at_request_deadline)
{
    auto owner = start_owner(test::peer_options(), "", -1, 0.2);
    auto desc  = owner_register(*owner, 0xd003, 0xd3);
    char buf[64];

    int sock = connect_broker(desc, true);
    ASSERT_GE(sock, 0) << strerror(-sock);
    m_clients.push_back(sock);
    set_timeout(sock, SO_RCVTIMEO, SAFETY_NET_SEC);

    double t0   = now_sec();
    ssize_t len = recv(sock, buf, sizeof(buf), 0);
    int err     = errno;
    double elapsed = now_sec() - t0;
    EXPECT_TRUE((len == 0) || ((len < 0) && (err == ECONNRESET)))
            << "the broker kept a connection without a request: recv "
            << len << " (" << strerror(err) << ") after " << elapsed << " s";
    EXPECT_GE(elapsed, 0.15) << "closed before its deadline";

    expect_import(desc, 0xd3, 2.0);
    stop_owner(*owner);
}


TEST_F(broker_dos, broker_at_fd_limit_does_not_spin)
{
    auto owner   = start_owner();
    auto desc    = owner_register(*owner, 0xd004, 0xd4);
    pid_t tid    = broker_thread(owner->pid());
    int sockets0 = count_sockets(owner->pid());
    long hz      = sysconf(_SC_CLK_TCK);

    ASSERT_GT(tid, 0) << "no thread named cuda_ipc_ns_brk";
    EXPECT_GT(owner_fill_fds(*owner, 256), 0);
    /* queued connections keep the listening socket readable, and accept()
     * fails with EMFILE: no idle connection to close for room */
    ASSERT_NO_FATAL_FAILURE(hold_idle(desc, 4));

    /* the one wait: a measurement */
    long ticks0 = thread_cpu_ticks(owner->pid(), tid);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    long ticks1 = thread_cpu_ticks(owner->pid(), tid);
    ASSERT_GE(ticks0, 0);
    ASSERT_GE(ticks1, 0);
    std::cout << "[ INFO     ] broker thread: " << (ticks1 - ticks0)
              << " clock ticks of CPU in 2 s (" << hz << " per second)"
              << std::endl;
    EXPECT_LT(ticks1 - ticks0, 2 * hz / 10) << "the broker spins on accept";
    EXPECT_EQ(sockets0, count_sockets(owner->pid()))
            << "accept() did not fail: the fd table was not full";

    EXPECT_GT(owner_free_fds(*owner), 0);
    /* accepting again after the back-off */
    expect_import(desc, 0xd4, 2.0);
    stop_owner(*owner);
}

/*
 * One fd free: accepting a client takes it, and the next accept() fails
 * with EMFILE although nobody waits. That must not close the client just
 * accepted, which is still checking the broker before it sends its request:
 * our client sends only once the broker counted that failure (a real
 * importer's owner check may or may not outrun the broker's accept loop).
 */
TEST_F(broker_dos, imports_succeed_with_one_fd_free)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0xd005, 0xd5);

    EXPECT_GT(owner_fill_fds(*owner, 256, 1), 0);
    int failures = owner_accept_failures(*owner);
    int sock     = connect_broker(desc, true);
    ASSERT_GE(sock, 0) << strerror(-sock);
    m_clients.push_back(sock);
    double guard = now_sec() + SAFETY_NET_SEC;
    while ((owner_accept_failures(*owner) == failures) && (now_sec() < guard)) {
    }
    ASSERT_GT(owner_accept_failures(*owner), failures)
            << "the broker never tried to accept past our connection";
    request_on(sock, desc, 0xd5);

    for (int i = 0; i < 10; ++i) {
        expect_import(desc, 0xd5, 2.0);
    }
    EXPECT_GT(owner_free_fds(*owner), 0);
    stop_owner(*owner);
}

} // namespace
