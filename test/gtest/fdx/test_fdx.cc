/*
 * cuda_ipc_ns: fd exchange tests (docs/security.md).
 *
 * Real processes in real namespaces: an owner peer registers a memfd with its
 * broker and hands the test the descriptor a remote key would carry; the test
 * (or an importer peer under seccomp, in another network namespace, as
 * another uid) imports it and checks the bytes through mmap. No CUDA needed:
 * the fd exchange does not care what the fd is.
 */
#include "fdx/fdx_peers.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <memory>
#include <string>
#include <thread>
#include <vector>


namespace {

using namespace fdx_peers;

/* ---------------------------------------------------------------------------
 * Messages between the test and its importer peers (the owner's:
 * fdx_peers.h)
 * ------------------------------------------------------------------------ */

struct import_req {
    int                         mode;
    double                      timeout;
    int                         allowed_uid; /* the broker's uid may be it */
    uct_cuda_ipc_ns_rkey_info_t desc;
    uint8_t                     pattern;
    size_t                      size;
};

struct import_result {
    int      status;
    int      bytes_ok;
    uint64_t pidfd_delta;
    uint64_t broker_delta;
    double   elapsed;
    int      fd_delta;
};

struct silent_reply {
    uint8_t                         addr_len;
    char                            addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    uct_cuda_ipc_ns_nsid_identity_t id; /* of the silent broker's process */
};


/* ---------------------------------------------------------------------------
 * Peer roles (the owner: fdx_peers.cc)
 * ------------------------------------------------------------------------ */

/* Importer: imports once, checks the bytes, reports */
TEST_PEER_ROLE(fdx_importer)
{
    import_req req;
    import_result res = {};
    uint64_t p0, b0, p1, b1;
    int fd = -1;

    if (!chan.recv_obj(req)) {
        return 1;
    }

    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg =
            fdx_config((uct_cuda_ipc_ns_broker_proto_fdx_mode_t)req.mode, req.timeout);
    cfg.allowed_uid = req.allowed_uid;
    int fds0 = test::count_open_fds();
    uct_cuda_ipc_ns_fdx_get_stats(&p0, &b0);
    double t0  = now_sec();
    res.status = uct_cuda_ipc_ns_fdx_import(&cfg, &req.desc, &fd, NULL);
    res.elapsed = now_sec() - t0;
    uct_cuda_ipc_ns_fdx_get_stats(&p1, &b1);
    res.pidfd_delta  = p1 - p0;
    res.broker_delta = b1 - b0;
    if (res.status == UCS_OK) {
        res.bytes_ok = check_bytes(fd, req.pattern, req.size);
        close(fd);
    }
    res.fd_delta = test::count_open_fds() - fds0;
    chan.send_obj(res);
    return 0;
}


/* A "broker" that accepts connections and never answers */
TEST_PEER_ROLE(fdx_silent_broker)
{
    struct sockaddr_un sa = {};
    silent_reply reply    = {};
    int lfd, cfd, dummy;

    lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sa.sun_family = AF_UNIX;
    int len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
                       "cuda_ipc_ns_test_silent-%d", (int)getpid());
    reply.addr_len = len + 1;
    reply.id       = *uct_cuda_ipc_ns_nsid_self();
    memcpy(reply.addr, sa.sun_path, reply.addr_len);
    if ((lfd < 0) ||
        bind(lfd, (struct sockaddr*)&sa,
             offsetof(struct sockaddr_un, sun_path) + reply.addr_len) ||
        listen(lfd, 8)) {
        return 1;
    }
    chan.send_obj(reply);

    cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    /* hold the connection until the test says we are done */
    chan.recv_obj(dummy, 60000);
    if (cfd >= 0) {
        close(cfd);
    }
    close(lfd);
    return 0;
}


/* ---------------------------------------------------------------------------
 * Fixture
 * ------------------------------------------------------------------------ */

class test_fdx : public ::testing::Test {
protected:
    import_result run_importer(const test::peer_options &opts,
                               uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode,
                               const uct_cuda_ipc_ns_rkey_info_t &desc,
                               uint8_t pattern, double timeout = 2.0,
                               int allowed_uid = -1)
    {
        test::peer importer("fdx_importer", opts);
        import_req req    = {};
        import_result res = {};

        req.mode        = mode;
        req.timeout     = timeout;
        req.allowed_uid = allowed_uid;
        req.desc    = desc;
        req.pattern = pattern;
        req.size    = MEM_SIZE;
        EXPECT_TRUE(importer.chan().send_obj(req));
        EXPECT_TRUE(importer.chan().recv_obj(res, 60000));
        EXPECT_EQ(0, importer.wait());
        return res;
    }

    /* import in this process; checks bytes and fd accounting */
    ucs_status_t import_here(uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode,
                             const uct_cuda_ipc_ns_rkey_info_t &desc,
                             uint8_t pattern, uint64_t *pidfd_delta,
                             uint64_t *broker_delta, double timeout = 2.0,
                             double *elapsed = NULL)
    {
        uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(mode, timeout);
        uint64_t p0, b0, p1, b1;
        int fds0 = test::count_open_fds();
        int fd   = -1;

        uct_cuda_ipc_ns_fdx_get_stats(&p0, &b0);
        double t0 = now_sec();
        ucs_status_t status = uct_cuda_ipc_ns_fdx_import(&cfg, &desc, &fd, NULL);
        if (elapsed != NULL) {
            *elapsed = now_sec() - t0;
        }
        uct_cuda_ipc_ns_fdx_get_stats(&p1, &b1);
        *pidfd_delta  = p1 - p0;
        *broker_delta = b1 - b0;
        if (status == UCS_OK) {
            EXPECT_GE(fd, 0);
            EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
            EXPECT_TRUE(check_bytes(fd, pattern, MEM_SIZE));
            close(fd);
        } else {
            EXPECT_EQ(-1, fd) << "no fd on failure";
        }
        EXPECT_TRUE(fd_count_settles(fds0)) << "fd leak";
        return status;
    }

    /* A broker in this process closes its end of a connection on its own
     * thread, maybe just after the client returned: wait for that event
     * (the module's broker), or for the test's fake broker thread to end */
    bool fd_count_settles(int expected)
    {
        if (m_fake_broker.joinable()) {
            m_fake_broker.join();
        }
        uct_cuda_ipc_ns_broker_wait_idle();
        return test::count_open_fds() == expected;
    }

    /* a private 0700 directory for pathname sockets */
    std::string make_sock_dir()
    {
        char tmpl[] = "/tmp/cuda_ipc_ns_fdx_XXXXXX";
        EXPECT_NE(nullptr, mkdtemp(tmpl));
        m_dirs.push_back(tmpl);
        return tmpl;
    }

    void TearDown() override
    {
        if (m_fake_broker.joinable()) {
            m_fake_broker.join();
        }
        for (auto &d : m_dirs) {
            std::string cmd = "rm -rf '" + d + "'";
            EXPECT_EQ(0, system(cmd.c_str()));
        }
    }

    std::vector<std::string> m_dirs;
    std::thread              m_fake_broker; /* a hostile broker in a thread */
};


/* ---------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------ */

TEST_F(test_fdx, same_pid_ns_uses_pidfd)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0x1001, 0x11);
    uint64_t pd, bd;

    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->pid_ns, desc.pid_ns);
    ASSERT_TRUE(uct_cuda_ipc_ns_fdx_pidfd_usable());
    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_AUTO, desc, 0x11, &pd,
                                  &bd));
    EXPECT_EQ(1u, pd);
    EXPECT_EQ(0u, bd);

    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_PIDFD, desc, 0x11, &pd,
                                  &bd));
    EXPECT_EQ(1u, pd);
    EXPECT_EQ(0u, bd);

    /* the broker also serves a peer in the same namespace */
    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0x11, &pd,
                                  &bd));
    EXPECT_EQ(0u, pd);
    EXPECT_EQ(1u, bd);

    stop_owner(*owner);
}


TEST_F(test_fdx, seccomp_blocked_pidfd_getfd_uses_broker)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0x2002, 0x22);
    test::peer_options opts;
    opts.block_pidfd_getfd = true;

    import_result res = run_importer(opts, UCT_CUDA_IPC_NS_FDX_AUTO, desc, 0x22);
    EXPECT_EQ(UCS_OK, res.status);
    EXPECT_TRUE(res.bytes_ok);
    EXPECT_EQ(0u, res.pidfd_delta);
    EXPECT_EQ(1u, res.broker_delta);
    EXPECT_EQ(0, res.fd_delta);

    /* mode "pidfd" has nowhere to fall back to */
    res = run_importer(opts, UCT_CUDA_IPC_NS_FDX_PIDFD, desc, 0x22);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, res.status);
    EXPECT_EQ(0u, res.pidfd_delta + res.broker_delta);
    EXPECT_EQ(0, res.fd_delta);

    stop_owner(*owner);
}


TEST_F(test_fdx, owner_in_other_pid_ns_uses_broker)
{
    test::peer_options opts;
    opts.new_pid_ns = true;
    auto owner = start_owner(opts);
    auto desc  = owner_register(*owner, 0x3003, 0x33);
    uint64_t pd, bd, pid1_ns = 0;

    /* the key names the owner as pid 1 of its own namespace; in ours pid 1
     * (if it exists at all) is another process */
    EXPECT_EQ(1u, desc.pid);
    EXPECT_NE(uct_cuda_ipc_ns_nsid_self()->pid_ns, desc.pid_ns);
    if (uct_cuda_ipc_ns_nsid_pid_ns(1, &pid1_ns) == UCS_OK) {
        EXPECT_NE(desc.pid_ns, pid1_ns);
    }

    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_AUTO, desc, 0x33, &pd,
                                  &bd));
    EXPECT_EQ(0u, pd) << "pidfd must not be used across PID namespaces";
    EXPECT_EQ(1u, bd);

    EXPECT_EQ(UCS_ERR_UNREACHABLE, import_here(UCT_CUDA_IPC_NS_FDX_PIDFD, desc,
                                               0x33, &pd, &bd));
    EXPECT_EQ(0u, pd + bd);

    stop_owner(*owner);
}


TEST_F(test_fdx, importer_in_other_net_ns_pathname_socket)
{
    std::string dir = make_sock_dir() + "/socks"; /* created by the broker */
    auto owner = start_owner(test::peer_options(), dir);
    auto desc  = owner_register(*owner, 0x4004, 0x44);
    test::peer_options opts;
    opts.new_net_ns = true;
    struct stat st;

    ASSERT_EQ(0, stat(dir.c_str(), &st));
    EXPECT_EQ(0700u, st.st_mode & 07777);
    ASSERT_NE('\0', desc.broker_addr[0]);
    EXPECT_EQ(0, strncmp(desc.broker_addr, dir.c_str(), dir.size()));

    import_result res = run_importer(opts, UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                     0x44);
    EXPECT_EQ(UCS_OK, res.status);
    EXPECT_TRUE(res.bytes_ok);
    EXPECT_EQ(1u, res.broker_delta);
    EXPECT_EQ(0, res.fd_delta);

    /* the socket file goes away with the broker */
    std::string path(desc.broker_addr, desc.broker_addr_len);
    EXPECT_EQ(0, access(path.c_str(), F_OK));
    stop_owner(*owner);
    EXPECT_NE(0, access(path.c_str(), F_OK));
}


/* A broker killed with SIGKILL leaves its socket file in the shared socket
 * directory; the next broker to start there removes it, and only it */
TEST_F(test_fdx, broker_start_removes_sockets_of_killed_brokers)
{
    std::string dir = make_sock_dir();
    auto live       = start_owner(test::peer_options(), dir);
    auto live_desc  = owner_register(*live, 0x5101, 0x51);
    auto killed     = start_owner(test::peer_options(), dir);
    auto dead_desc  = owner_register(*killed, 0x5102, 0x52);
    std::string live_path(live_desc.broker_addr, live_desc.broker_addr_len);
    std::string dead_path(dead_desc.broker_addr, dead_desc.broker_addr_len);

    ASSERT_EQ(0, kill(killed->pid(), SIGKILL));
    EXPECT_EQ(128 + SIGKILL, killed->wait());
    ASSERT_EQ(0, access(dead_path.c_str(), F_OK)) << "SIGKILL leaves the file";

    /* not ours to remove: a dead socket under another name, a file with
     * our name that is no socket */
    std::string other_dead = dir + "/other.sock";
    std::string not_socket = dir + "/cuda_ipc_ns-1-0123456789abcdef.sock";
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un sa = {};
    sa.sun_family = AF_UNIX;
    strncpy(sa.sun_path, other_dead.c_str(), sizeof(sa.sun_path) - 1);
    ASSERT_EQ(0, bind(fd, (struct sockaddr*)&sa, sizeof(sa)));
    close(fd); /* bound, never listened: connect() is refused */
    fd = open(not_socket.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    close(fd);

    /* a new broker in that directory */
    auto next      = start_owner(test::peer_options(), dir);
    auto next_desc = owner_register(*next, 0x5103, 0x53);
    std::string next_path(next_desc.broker_addr, next_desc.broker_addr_len);

    EXPECT_NE(0, access(dead_path.c_str(), F_OK)) << "the dead broker's socket";
    EXPECT_EQ(0, access(live_path.c_str(), F_OK)) << "the live broker's socket";
    EXPECT_EQ(0, access(next_path.c_str(), F_OK));
    EXPECT_EQ(0, access(other_dead.c_str(), F_OK)) << "not our name";
    EXPECT_EQ(0, access(not_socket.c_str(), F_OK)) << "not a socket";

    /* and the live broker still serves */
    uint64_t pd, bd;
    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, live_desc, 0x51,
                                  &pd, &bd));
    EXPECT_EQ(1u, bd);

    stop_owner(*next);
    stop_owner(*live);
}


TEST_F(test_fdx, importer_in_other_net_ns_abstract_socket_unreachable)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0x5005, 0x55);
    test::peer_options opts;
    opts.new_net_ns = true;

    ASSERT_EQ('\0', desc.broker_addr[0]);
    import_result res = run_importer(opts, UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                     0x55, 2.0);
    /* refused, not timed out (the status tells them apart) */
    EXPECT_EQ(UCS_ERR_UNREACHABLE, res.status);
    EXPECT_EQ(0u, res.broker_delta);
    EXPECT_EQ(0, res.fd_delta);

    stop_owner(*owner);
}


TEST_F(test_fdx, other_uid_refused)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0x6006, 0x66);
    test::peer_options opts;
    opts.uid = 65534;

    /* the abstract socket is reachable by anyone: the broker must refuse,
     * even an importer that trusts the broker's uid (so that it is the
     * broker's check, not the importer's, that refuses here) */
    const int owner_uid = (int)geteuid();
    import_result res   = run_importer(opts, UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                       0x66, 2.0, owner_uid);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, res.status);
    EXPECT_EQ(0u, res.broker_delta);
    EXPECT_EQ(0, res.fd_delta);

    /* auto: pidfd_getfd fails (no ptrace right on a root process), then the
     * broker refuses */
    res = run_importer(opts, UCT_CUDA_IPC_NS_FDX_AUTO, desc, 0x66, 2.0,
                       owner_uid);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, res.status);
    EXPECT_EQ(0u, res.pidfd_delta + res.broker_delta);
    EXPECT_EQ(0, res.fd_delta);

    stop_owner(*owner);
}


TEST_F(test_fdx, other_uid_allowed_by_config)
{
    auto owner = start_owner(test::peer_options(), "", 65534);
    auto desc  = owner_register(*owner, 0x6007, 0x67);
    test::peer_options opts;
    opts.uid = 65534;

    /* the importer trusts the owner's uid as the owner trusts its own */
    import_result res = run_importer(opts, UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                     0x67, 2.0, (int)geteuid());
    EXPECT_EQ(UCS_OK, res.status);
    EXPECT_TRUE(res.bytes_ok);
    EXPECT_EQ(1u, res.broker_delta);

    /* without that, the broker's uid is not one the importer believes */
    res = run_importer(opts, UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0x67);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, res.status);
    EXPECT_EQ(0, res.fd_delta);

    stop_owner(*owner);
}


TEST_F(test_fdx, wrong_token_refused)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0x7007, 0x77);
    auto other = owner_register(*owner, 0x7008, 0x78);
    uint64_t pd, bd;

    auto bad = desc;
    bad.token[7] ^= 0x01;
    EXPECT_EQ(UCS_ERR_NO_ELEM, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, bad,
                                           0x77, &pd, &bd));
    EXPECT_EQ(0u, bd);

    /* a valid token of another registration does not open this one */
    bad = desc;
    memcpy(bad.token, other.token, sizeof(bad.token));
    EXPECT_EQ(UCS_ERR_NO_ELEM, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, bad,
                                           0x77, &pd, &bd));

    /* nor does the right token with another allocation id */
    bad = desc;
    bad.handle.posix.alloc_id = other.handle.posix.alloc_id + 100;
    EXPECT_EQ(UCS_ERR_NO_ELEM, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, bad,
                                           0x77, &pd, &bd));

    /* the broker still serves the right one */
    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0x77, &pd,
                                  &bd));
    EXPECT_EQ(1u, bd);

    stop_owner(*owner);
}


TEST_F(test_fdx, released_registration_refused)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0x8008, 0x88);
    uint64_t pd, bd;

    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0x88, &pd,
                                  &bd));
    owner_unregister(*owner, desc.handle.posix.alloc_id);
    EXPECT_EQ(UCS_ERR_NO_ELEM, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                           0x88, &pd, &bd));
    EXPECT_EQ(0u, bd);

    stop_owner(*owner);
}


TEST_F(test_fdx, start_time_mismatch_refused)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0x9009, 0x99);
    uint64_t pd, bd;

    /* a key of an earlier process that had the same pid */
    auto stale = desc;
    stale.start_time -= 1;
    for (auto mode : {UCT_CUDA_IPC_NS_FDX_AUTO, UCT_CUDA_IPC_NS_FDX_PIDFD}) {
        EXPECT_EQ(UCS_ERR_UNREACHABLE, import_here(mode, stale, 0x99, &pd,
                                                   &bd));
        EXPECT_EQ(0u, pd + bd) << "no fd obtained, no fallback";
    }

    stop_owner(*owner);

    /* the owner is gone: nothing to import; refused, not timed out */
    EXPECT_EQ(UCS_ERR_UNREACHABLE, import_here(UCT_CUDA_IPC_NS_FDX_AUTO, desc,
                                               0x99, &pd, &bd, 2.0));
}


TEST_F(test_fdx, silent_broker_times_out)
{
    /* a broker of this process: the importer's owner check passes */
    uct_cuda_ipc_ns_rkey_info_t desc = fd_key_of(*uct_cuda_ipc_ns_nsid_self());
    uint64_t pd, bd;
    double elapsed;

    desc.handle.posix.alloc_id = 1;

    /* 1) listens, never accepts: the connection waits in the backlog */
    {
        struct sockaddr_un sa = {};
        int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        ASSERT_GE(lfd, 0);
        sa.sun_family = AF_UNIX;
        int len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
                           "cuda_ipc_ns_test_backlog-%d", (int)getpid());
        desc.broker_addr_len = len + 1;
        memcpy(desc.broker_addr, sa.sun_path, desc.broker_addr_len);
        ASSERT_EQ(0, bind(lfd, (struct sockaddr*)&sa,
                          offsetof(struct sockaddr_un, sun_path) +
                          desc.broker_addr_len));
        ASSERT_EQ(0, listen(lfd, 4));

        EXPECT_EQ(UCS_ERR_TIMED_OUT,
                  import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0, &pd, &bd,
                              0.5, &elapsed));
        EXPECT_GE(elapsed, 0.45) << "the timeout really waited";
        close(lfd);

        /* 2) nobody listens any more: refused (UNREACHABLE, not TIMED_OUT) */
        EXPECT_EQ(UCS_ERR_UNREACHABLE,
                  import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0, &pd, &bd,
                              0.5, &elapsed));
    }

    /* 3) accepts, never answers */
    {
        test::peer silent("fdx_silent_broker");
        silent_reply reply;
        ASSERT_TRUE(silent.chan().recv_obj(reply));
        desc                 = fd_key_of(reply.id);
        desc.handle.posix.alloc_id = 1;
        desc.broker_addr_len = reply.addr_len;
        memcpy(desc.broker_addr, reply.addr, reply.addr_len);

        EXPECT_EQ(UCS_ERR_TIMED_OUT,
                  import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0, &pd, &bd,
                              0.5, &elapsed));
        EXPECT_GE(elapsed, 0.45) << "the timeout really waited";
        int done = 1;
        silent.chan().send_obj(done);
        EXPECT_EQ(0, silent.wait());
    }
}


/* A broker answering OK with two fds: the importer keeps neither */
TEST_F(test_fdx, reply_with_two_fds_refused)
{
    uct_cuda_ipc_ns_rkey_info_t desc = fd_key();
    struct sockaddr_un sa            = {};
    socklen_t salen                  = sizeof(sa.sun_family);
    uint64_t pd, bd;

    /* autobind: the kernel picks a free abstract name */
    int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_GE(lfd, 0);
    sa.sun_family = AF_UNIX;
    ASSERT_EQ(0, bind(lfd, (struct sockaddr*)&sa, salen));
    ASSERT_EQ(0, listen(lfd, 4));
    salen = sizeof(sa);
    ASSERT_EQ(0, getsockname(lfd, (struct sockaddr*)&sa, &salen));
    desc                       = fd_key_of(*uct_cuda_ipc_ns_nsid_self());
    desc.handle.posix.alloc_id = 7;
    desc.broker_addr_len       = salen - offsetof(struct sockaddr_un, sun_path);
    memcpy(desc.broker_addr, sa.sun_path, desc.broker_addr_len);

    m_fake_broker = std::thread([lfd]() {
        uint8_t req[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE];
        uint8_t reply[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE];
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

        if (cfd >= 0) {
            EXPECT_EQ((ssize_t)sizeof(req), recv(cfd, req, sizeof(req), 0));
            uct_cuda_ipc_ns_broker_proto_pack_reply(
                    reply, UCT_CUDA_IPC_NS_BROKER_STATUS_OK, 7);
            EXPECT_TRUE(test::send_with_fds(cfd, reply, sizeof(reply),
                                            {0, 1}));
            close(cfd);
        }
    });
    EXPECT_EQ(UCS_ERR_IO_ERROR, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                            0, &pd, &bd));
    EXPECT_EQ(0u, bd);
    close(lfd);
}


/* Silent or hostile clients do not stall the broker for others */
TEST_F(test_fdx, broker_survives_bad_clients)
{
    auto owner = start_owner(test::peer_options(), "", -1, 3600.0);
    auto desc  = owner_register(*owner, 0xa00a, 0xaa);
    struct sockaddr_un sa = {};
    socklen_t salen;
    uint64_t pd, bd;
    int silent[3];

    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, desc.broker_addr, desc.broker_addr_len);
    salen = offsetof(struct sockaddr_un, sun_path) + desc.broker_addr_len;

    for (int i = 0; i < 3; ++i) {
        silent[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        ASSERT_EQ(0, connect(silent[i], (struct sockaddr*)&sa, salen));
    }

    /* malformed request: a short message */
    int bad = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_EQ(0, connect(bad, (struct sockaddr*)&sa, salen));
    ASSERT_EQ(3, send(bad, "abc", 3, 0));
    uint8_t reply[64];
    struct timeval tv = {2, 0};
    setsockopt(bad, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ASSERT_EQ(UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE,
              recv(bad, reply, sizeof(reply), 0));
    unsigned bstatus;
    uint64_t alloc_id;
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_reply(
                              reply, UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE,
                              &bstatus, &alloc_id));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_REQUEST, bstatus);
    close(bad);

    /* a valid request with an unknown protocol version */
    uint8_t req[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE];
    uct_cuda_ipc_ns_broker_proto_pack_request(req, desc.handle.posix.alloc_id,
                                              desc.token);
    req[4] = 99;
    bad = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_EQ(0, connect(bad, (struct sockaddr*)&sa, salen));
    setsockopt(bad, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ASSERT_EQ((ssize_t)sizeof(req), send(bad, req, sizeof(req), 0));
    ASSERT_EQ(UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE,
              recv(bad, reply, sizeof(reply), 0));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_proto_unpack_reply(
                              reply, UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE,
                              &bstatus, &alloc_id));
    EXPECT_EQ((unsigned)UCT_CUDA_IPC_NS_BROKER_STATUS_BAD_VERSION, bstatus);
    close(bad);

    /* served despite three silent connections: the broker's request
     * deadline is an hour, so a broker stalled by them would make this
     * import (timeout 30 s, a safety net) time out */
    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0xaa, &pd,
                                  &bd, 30.0));

    for (int i = 0; i < 3; ++i) {
        close(silent[i]);
    }
    stop_owner(*owner);
}


TEST_F(test_fdx, no_fd_leak_1000_imports)
{
    auto owner = start_owner();
    auto desc  = owner_register(*owner, 0xb00b, 0xbb);
    auto cfg_p = fdx_config(UCT_CUDA_IPC_NS_FDX_PIDFD);
    auto cfg_b = fdx_config(UCT_CUDA_IPC_NS_FDX_BROKER);
    uint64_t p0, b0, p1, b1;
    int fd;

    /* warm up once: the probe and the identity are computed once */
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_fdx_import(&cfg_p, &desc, &fd, NULL));
    close(fd);

    int baseline = test::count_open_fds();
    uct_cuda_ipc_ns_fdx_get_stats(&p0, &b0);
    for (int i = 0; i < 1000; ++i) {
        fd = -1;
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_fdx_import(&cfg_p, &desc, &fd, NULL));
        if ((i % 100) == 0) {
            EXPECT_TRUE(check_bytes(fd, 0xbb, MEM_SIZE));
        }
        close(fd);

        fd = -1;
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_fdx_import(&cfg_b, &desc, &fd, NULL));
        if ((i % 100) == 0) {
            EXPECT_TRUE(check_bytes(fd, 0xbb, MEM_SIZE));
        }
        close(fd);
    }
    uct_cuda_ipc_ns_fdx_get_stats(&p1, &b1);
    EXPECT_EQ(1000u, p1 - p0);
    EXPECT_EQ(1000u, b1 - b0);
    EXPECT_EQ(baseline, test::count_open_fds());

    /* refusals leave nothing behind either */
    auto bad_token = desc;
    bad_token.token[0] ^= 0xff;
    auto stale = desc;
    stale.start_time += 1;
    for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(UCS_ERR_NO_ELEM,
                  uct_cuda_ipc_ns_fdx_import(&cfg_b, &bad_token, &fd, NULL));
        EXPECT_EQ(UCS_ERR_UNREACHABLE,
                  uct_cuda_ipc_ns_fdx_import(&cfg_p, &stale, &fd, NULL));
    }
    EXPECT_EQ(baseline, test::count_open_fds());

    stop_owner(*owner);
}


/* ---------------------------------------------------------------------------
 * Broker object
 * ------------------------------------------------------------------------ */

TEST_F(test_fdx, broker_refcount_and_address)
{
    auto cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
    uct_cuda_ipc_ns_broker_t *b1, *b2;
    int fds0 = test::count_open_fds();
    uint8_t len;

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_get(&cfg, &b1));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_get(&cfg, &b2));
    EXPECT_EQ(b1, b2) << "one broker per process";

    const char *addr = uct_cuda_ipc_ns_broker_addr(b1, &len);
    ASSERT_GT(len, 1);
    EXPECT_LE(len, UCT_CUDA_IPC_NS_BROKER_ADDR_MAX);
    EXPECT_EQ('\0', addr[0]) << "abstract by default";
    std::string name(addr + 1, len - 1);
    std::string prefix = "cuda_ipc_ns-" + std::to_string(getpid()) + "-";
    EXPECT_EQ(0u, name.find(prefix)) << name;
    EXPECT_EQ(prefix.size() + 16, name.size()) << name;

    /* registering and releasing in-process */
    int memfd = make_memfd(0xcc, MEM_SIZE);
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    uct_cuda_ipc_ns_rkey_info_t desc = fd_key();
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_register(b1, memfd, 42,
                                                      desc.token, &reg));
    desc.pid        = getpid();
    desc.pid_ns     = uct_cuda_ipc_ns_nsid_self()->pid_ns;
    desc.start_time = uct_cuda_ipc_ns_nsid_self()->start_time;
    desc.handle.posix.fd       = memfd;
    desc.handle.posix.alloc_id = 42;
    desc.broker_addr_len = len;
    memcpy(desc.broker_addr, addr, len);
    uint64_t pd, bd;
    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0xcc, &pd,
                                  &bd));
    EXPECT_EQ(UCS_OK, import_here(UCT_CUDA_IPC_NS_FDX_AUTO, desc, 0xcc, &pd,
                                  &bd));
    uct_cuda_ipc_ns_broker_unregister(b1, reg);
    EXPECT_EQ(UCS_ERR_NO_ELEM, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                           0xcc, &pd, &bd));
    close(memfd);

    uct_cuda_ipc_ns_broker_put(b2);
    /* still served after one put */
    EXPECT_EQ(UCS_ERR_NO_ELEM, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc,
                                           0xcc, &pd, &bd));
    uct_cuda_ipc_ns_broker_put(b1);
    /* gone after the last one */
    EXPECT_EQ(UCS_ERR_UNREACHABLE, import_here(UCT_CUDA_IPC_NS_FDX_BROKER,
                                               desc, 0xcc, &pd, &bd));
    EXPECT_TRUE(fd_count_settles(fds0));
}


TEST_F(test_fdx, broker_sock_dir_checks)
{
    auto cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
    uct_cuda_ipc_ns_broker_t *broker;
    std::string base = make_sock_dir();
    int fds0 = test::count_open_fds();

    /* group/other permissions: refused */
    std::string open_dir = base + "/open";
    ASSERT_EQ(0, mkdir(open_dir.c_str(), 0755));
    ASSERT_EQ(0, chmod(open_dir.c_str(), 0755));
    cfg.sock_dir = open_dir.c_str();
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_broker_get(&cfg, &broker));

    /* not ours: refused */
    std::string foreign = base + "/foreign";
    ASSERT_EQ(0, mkdir(foreign.c_str(), 0700));
    ASSERT_EQ(0, chown(foreign.c_str(), 65534, 65534));
    cfg.sock_dir = foreign.c_str();
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_broker_get(&cfg, &broker));

    /* too long for sun_path */
    std::string longdir = base + "/" + std::string(100, 'x');
    cfg.sock_dir = longdir.c_str();
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_cuda_ipc_ns_broker_get(&cfg, &broker));

    /* absent: created 0700, socket inside, removed at the end */
    std::string fresh = base + "/fresh";
    cfg.sock_dir = fresh.c_str();
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_get(&cfg, &broker));
    struct stat st;
    ASSERT_EQ(0, stat(fresh.c_str(), &st));
    EXPECT_EQ(0700u, st.st_mode & 07777);
    uint8_t len;
    const char *addr = uct_cuda_ipc_ns_broker_addr(broker, &len);
    std::string path(addr, len);
    EXPECT_EQ(0u, path.find(fresh + "/cuda_ipc_ns-")) << path;
    ASSERT_EQ(0, stat(path.c_str(), &st));
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    uct_cuda_ipc_ns_broker_put(broker);
    EXPECT_NE(0, stat(path.c_str(), &st));
    EXPECT_TRUE(fd_count_settles(fds0));
}


TEST_F(test_fdx, forked_child_starts_own_broker)
{
    auto cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
    uct_cuda_ipc_ns_broker_t *broker;
    uint8_t len;

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_get(&cfg, &broker));
    const char *paddr = uct_cuda_ipc_ns_broker_addr(broker, &len);
    std::string parent_addr(paddr, len);

    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        uct_cuda_ipc_ns_broker_t *child_broker;
        int code = 0;
        /* the inherited object is not ours: putting it is a no-op */
        uct_cuda_ipc_ns_broker_put(broker);
        if (uct_cuda_ipc_ns_broker_get(&cfg, &child_broker) != UCS_OK) {
            code = 1;
        } else {
            const char *caddr = uct_cuda_ipc_ns_broker_addr(child_broker,
                                                            &len);
            std::string addr(caddr, len);
            if ((child_broker == broker) || (addr == parent_addr) ||
                (addr.find("cuda_ipc_ns-" + std::to_string(getpid()) + "-") !=
                 1)) {
                code = 2;
            }
            uct_cuda_ipc_ns_broker_put(child_broker);
        }
        _exit(code);
    }

    int status;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status));

    /* the parent's broker still works */
    uct_cuda_ipc_ns_rkey_info_t desc = fd_key_of(*uct_cuda_ipc_ns_nsid_self());
    desc.broker_addr_len = len = parent_addr.size();
    memcpy(desc.broker_addr, parent_addr.data(), len);
    uint64_t pd, bd;
    EXPECT_EQ(UCS_ERR_NO_ELEM, import_here(UCT_CUDA_IPC_NS_FDX_BROKER, desc, 0,
                                           &pd, &bd));
    uct_cuda_ipc_ns_broker_put(broker);
}


TEST_F(test_fdx, mode_names)
{
    EXPECT_STREQ("auto", uct_cuda_ipc_ns_fdx_mode_names[UCT_CUDA_IPC_NS_FDX_AUTO]);
    EXPECT_STREQ("pidfd", uct_cuda_ipc_ns_fdx_mode_names[UCT_CUDA_IPC_NS_FDX_PIDFD]);
    EXPECT_STREQ("broker", uct_cuda_ipc_ns_fdx_mode_names[UCT_CUDA_IPC_NS_FDX_BROKER]);
    EXPECT_EQ(nullptr, uct_cuda_ipc_ns_fdx_mode_names[UCT_CUDA_IPC_NS_FDX_LAST]);
}

} // namespace


/* Our identity is read once per process and again in a child of fork():
 * the child's keys must name the child (its pid), not the parent */
TEST(fdx_identity, a_forked_child_reads_its_own)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    int status;

    ASSERT_EQ((uint32_t)getpid(), self->pid);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const uct_cuda_ipc_ns_nsid_identity_t *child = uct_cuda_ipc_ns_nsid_self();
        _exit((child->pid == (uint32_t)getpid()) ? 0 : 1);
    }
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
            << "the child took its parent's identity";
    EXPECT_EQ((uint32_t)getpid(), uct_cuda_ipc_ns_nsid_self()->pid);
}
