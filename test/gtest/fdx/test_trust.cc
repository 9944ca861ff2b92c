/*
 * The importer authenticates the broker it talks to (docs/security.md,
 * "Threats"): a process that answers at a key's broker address without
 * being the key's owner is not believed, whatever it sends; the fd must be
 * the key's allocation; socket directories are opened without links and
 * under safe parents.
 *
 * The attacker is a peer process (test/gtest/common/peer.h) of another uid,
 * or of our uid in our or another PID namespace, that binds the address a
 * key names and answers every request with OK and an fd of its own memory.
 */
#include "common/cuda_alloc.h"
#include "common/peer.h"
#include "fdx/fake_broker.h"

#include <gtest/gtest.h>

extern "C" {
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_map.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_scm.h"
}

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>


namespace {

const size_t FAKE_SIZE = 2 * 1024 * 1024;


using test::fake_broker_cfg;
using test::fake_broker_report;


/*
 * The attacker (fake_broker.h): listens at the address it is given and
 * answers every request, as a broker would, with OK and an fd of a memfd
 * full of 0xee, or silently holds every connection, until the test closes
 * the channel.
 */
TEST_PEER_ROLE(trust_fake_broker)
{
    fake_broker_cfg cfg;
    fake_broker_report report = {};
    struct sockaddr_un sa     = {};
    std::vector<int> held;
    unsigned count = 0;
    int lfd, memfd;

    if (!chan.recv_obj(cfg)) {
        return 1;
    }

    memfd = memfd_create("attacker", MFD_CLOEXEC);
    if ((memfd < 0) || (ftruncate(memfd, FAKE_SIZE) < 0)) {
        return 2;
    }
    std::vector<uint8_t> bytes(FAKE_SIZE, 0xee);
    if (pwrite(memfd, bytes.data(), bytes.size(), 0) != (ssize_t)bytes.size()) {
        return 3;
    }

    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, cfg.addr, cfg.addr_len);
    lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    report.status = ((lfd < 0) ||
                     bind(lfd, (struct sockaddr*)&sa,
                          offsetof(struct sockaddr_un, sun_path) +
                          cfg.addr_len + (cfg.addr[0] != '\0')) ||
                     listen(lfd, 8)) ? errno : 0;
    report.id     = *uct_cuda_ipc_ns_nsid_self();
    chan.send_obj(report);
    if (report.status != 0) {
        return 4;
    }

    /* the listener that reported itself exits; its child keeps the socket */
    if (cfg.orphan && (fork() != 0)) {
        return 0;
    }

    for (;;) {
        struct pollfd pfds[2] = {{chan.fd(), POLLIN, 0}, {lfd, POLLIN, 0}};
        if ((poll(pfds, 2, -1) < 0) || pfds[0].revents) {
            break; /* the test is done with us */
        }
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
            continue;
        } else if (cfg.silent) {
            held.push_back(cfd);
            ++count;
            continue;
        }
        uint8_t req[UCT_CUDA_IPC_NS_BROKER_REQ_SIZE + 1];
        uct_cuda_ipc_ns_broker_proto_req_t parsed;
        struct pollfd cpfd = {cfd, POLLIN, 0};
        ssize_t len = (poll(&cpfd, 1, 2000) == 1) ?
                      recv(cfd, req, sizeof(req), 0) : -1;
        if ((len > 0) &&
            (uct_cuda_ipc_ns_broker_proto_unpack_request(req, len, &parsed) ==
             UCT_CUDA_IPC_NS_BROKER_STATUS_OK)) {
            uint8_t reply[UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE];
            ++count;
            uct_cuda_ipc_ns_broker_proto_pack_reply(reply,
                                                    UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                                                    parsed.alloc_id);
            (void)uct_cuda_ipc_ns_scm_send_fd(cfd, reply, sizeof(reply),
                                              memfd, MSG_NOSIGNAL);
        }
        close(cfd);
    }

    /* the test reads the count after closing its writing side */
    for (int fd : held) {
        close(fd);
    }
    close(lfd);
    if (cfg.orphan) {
        chan.send_obj(count);
        _exit(0);
    }
    return (int)count;
}


/* An importer in a PID namespace of its own: imports the keys it gets
 * through their brokers and answers each status */
TEST_PEER_ROLE(trust_importer)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {};
    uct_cuda_ipc_ns_rkey_info_t key;

    cfg.mode        = UCT_CUDA_IPC_NS_FDX_BROKER;
    cfg.timeout     = 2.0;
    cfg.allowed_uid = -1;
    while (chan.recv_obj(key)) {
        int fd         = -1;
        int32_t status = uct_cuda_ipc_ns_fdx_import(&cfg, &key, &fd, NULL);
        if (fd >= 0) {
            close(fd);
        }
        if (!chan.send_obj(status)) {
            return 1;
        }
    }
    return 0;
}


/* A process that is gone, and the key it left behind: its identity and the
 * abstract broker name it would have used */
uct_cuda_ipc_ns_rkey_info_t dead_exporter_key()
{
    uct_cuda_ipc_ns_rkey_info_t key = {};
    int pfd[2];

    EXPECT_EQ(0, pipe2(pfd, O_CLOEXEC));
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(pfd[1]);
        (void)!read(pfd[0], &c, 1);
        _exit(0);
    }
    close(pfd[0]);

    key.handle_type            = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    key.pid                    = pid;
    key.pid_ns                 = uct_cuda_ipc_ns_nsid_self()->pid_ns;
    key.length                 = FAKE_SIZE;
    key.handle.posix.fd        = 3;
    key.handle.posix.alloc_id  = 0x5a5a;
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_nsid_start_time(pid, &key.start_time));
    int len = snprintf(key.broker_addr + 1, sizeof(key.broker_addr) - 1,
                       "cuda_ipc_ns-%d-00112233445566%02x", (int)pid,
                       (unsigned)(getpid() & 0xff));
    key.broker_addr_len = len + 1;

    close(pfd[1]);
    int status;
    EXPECT_EQ(pid, waitpid(pid, &status, 0));
    return key;
}


/* make @a key name the process of @a id as its owner */
void owned_by(uct_cuda_ipc_ns_rkey_info_t *key,
              const uct_cuda_ipc_ns_nsid_identity_t &id)
{
    key->pid        = id.pid;
    key->pid_ns     = id.pid_ns;
    key->start_time = id.start_time;
}


uct_cuda_ipc_ns_broker_proto_fdx_config_t broker_only(int allowed_uid = -1)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {};
    cfg.mode        = UCT_CUDA_IPC_NS_FDX_BROKER;
    cfg.timeout     = 2.0;
    cfg.allowed_uid = allowed_uid;
    return cfg;
}


class trust : public ::testing::Test {
protected:
    /* start the attacker at @a key's broker address */
    std::unique_ptr<test::peer> squat(const uct_cuda_ipc_ns_rkey_info_t &key,
                                      const test::peer_options &opts,
                                      fake_broker_report *report)
    {
        std::unique_ptr<test::peer> fake(new test::peer("trust_fake_broker",
                                                        opts));
        fake_broker_cfg cfg = {};
        cfg.addr_len        = key.broker_addr_len;
        memcpy(cfg.addr, key.broker_addr, key.broker_addr_len);
        EXPECT_TRUE(fake->chan().send_obj(cfg));
        EXPECT_TRUE(fake->chan().recv_obj(*report));
        EXPECT_EQ(0, report->status) << strerror(report->status);
        return fake;
    }

    /* how many requests the attacker read: its exit code */
    unsigned requests_read(std::unique_ptr<test::peer> &fake)
    {
        shutdown(fake->chan().fd(), SHUT_WR);
        return fake->wait();
    }

    /* import @a key through its broker: the status; no fd may stay */
    ucs_status_t import(const uct_cuda_ipc_ns_rkey_info_t &key,
                        int allowed_uid = -1)
    {
        uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = broker_only(allowed_uid);
        int fds0 = test::count_open_fds();
        int fd = -1, pidfd = -1;

        ucs_status_t status = uct_cuda_ipc_ns_fdx_import(&cfg, &key, &fd,
                                                         &pidfd);
        if (status == UCS_OK) {
            close(fd);
            if (pidfd >= 0) {
                close(pidfd);
            }
        }
        EXPECT_EQ(fds0, test::count_open_fds()) << "an fd stayed behind";
        return status;
    }
};


/* Another uid binds the abstract name of an exporter that died */
TEST_F(trust, squatter_of_another_uid_is_not_believed)
{
    auto key = dead_exporter_key();
    fake_broker_report report;
    test::peer_options opts;
    opts.uid = 65534;

    auto fake = squat(key, opts, &report);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, import(key));
    EXPECT_EQ(0u, requests_read(fake)) << "the token went to the squatter";
}


/* Our uid, our PID namespace, another process than the key's owner */
TEST_F(trust, squatter_of_our_uid_but_another_pid_is_not_believed)
{
    auto key = dead_exporter_key();
    fake_broker_report report;

    auto fake = squat(key, test::peer_options(), &report);
    EXPECT_NE(key.pid, report.id.pid);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, import(key));

    /* the squatter's pid, but the start time of another process: the pid
     * was reused */
    key.pid        = report.id.pid;
    key.start_time = report.id.start_time - 1;
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, import(key));
    EXPECT_EQ(0u, requests_read(fake));
}


/*
 * The key's owner listened, left the socket to a child and exited: the
 * socket's credentials name a process that is gone, and the child (our
 * uid, maybe another namespace) is nobody the key names.
 */
TEST_F(trust, socket_left_by_an_exited_owner_is_not_believed)
{
    auto key = dead_exporter_key();
    fake_broker_report report;
    fake_broker_cfg cfg = {};
    unsigned requests;

    /* (in a PID namespace of its own the listener would be pid 1, whose
     * exit ends the namespace and the child with it) */
    test::peer fake("trust_fake_broker");
    cfg.addr_len = key.broker_addr_len;
    cfg.orphan   = 1;
    memcpy(cfg.addr, key.broker_addr, key.broker_addr_len);
    ASSERT_TRUE(fake.chan().send_obj(cfg));
    ASSERT_TRUE(fake.chan().recv_obj(report));
    ASSERT_EQ(0, report.status);
    EXPECT_EQ(0, fake.wait()) << "the listener exited";

    owned_by(&key, report.id);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, import(key));
    shutdown(fake.chan().fd(), SHUT_WR);
    ASSERT_TRUE(fake.chan().recv_obj(requests));
    EXPECT_EQ(0u, requests) << "the token went to the listener's child";
}


/*
 * Pod to pod: importer and squatter each in a PID namespace of its own, so
 * neither sees the other in /proc; the squatter is pid 1 there, as the
 * key's owner was in its namespace. Only the kernel's answer about the
 * squatter's PID namespace (PIDFD_GET_PID_NAMESPACE) tells them apart.
 */
TEST_F(trust, squatter_in_a_sibling_pid_namespace_is_not_believed)
{
    auto key = dead_exporter_key();
    fake_broker_report report;
    test::peer_options opts;
    opts.new_pid_ns = true;

    auto fake = squat(key, opts, &report);
    ASSERT_EQ(1u, report.id.pid);
    test::peer importer("trust_importer", opts);
    int32_t status;

    ASSERT_NE(key.pid_ns, report.id.pid_ns);
    key.pid        = report.id.pid;
    key.start_time = report.id.start_time;
    ASSERT_TRUE(importer.chan().send_obj(key));
    ASSERT_TRUE(importer.chan().recv_obj(status));
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, status);

    /* the same key with the squatter's namespace: believed (it is the
     * owner the key names) */
    key.pid_ns = report.id.pid_ns;
    ASSERT_TRUE(importer.chan().send_obj(key));
    ASSERT_TRUE(importer.chan().recv_obj(status));
    EXPECT_EQ(UCS_OK, status);

    shutdown(importer.chan().fd(), SHUT_WR);
    EXPECT_EQ(0, importer.wait());
    EXPECT_EQ(1u, requests_read(fake));
}


/* Our uid in another PID namespace, where it may even have the key's pid */
TEST_F(trust, squatter_in_another_pid_namespace_is_not_believed)
{
    auto key = dead_exporter_key();
    fake_broker_report report;
    test::peer_options opts;
    opts.new_pid_ns = true;

    auto fake = squat(key, opts, &report);
    EXPECT_NE(key.pid_ns, report.id.pid_ns);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, import(key));

    /* a key naming the squatter's namespace but another pid in it */
    key.pid_ns     = report.id.pid_ns;
    key.pid        = report.id.pid + 1;
    key.start_time = report.id.start_time;
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, import(key));
    EXPECT_EQ(0u, requests_read(fake));
}


/* The real owner is believed: the checks refuse only impostors */
TEST_F(trust, owner_in_another_pid_namespace_is_believed)
{
    auto key = dead_exporter_key();
    fake_broker_report report;
    test::peer_options opts;
    opts.new_pid_ns = true;

    auto fake = squat(key, opts, &report);
    owned_by(&key, report.id);
    EXPECT_EQ(UCS_OK, import(key));
    EXPECT_EQ(1u, requests_read(fake));
}


/* The broker's uid is believed only when it is ours or the allowed one */
TEST_F(trust, owner_of_another_uid_needs_the_allowed_uid)
{
    auto key = dead_exporter_key();
    fake_broker_report report;
    test::peer_options opts;
    opts.uid = 65534;

    auto fake = squat(key, opts, &report);
    owned_by(&key, report.id);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, import(key));
    EXPECT_EQ(UCS_OK, import(key, 65534));
    EXPECT_EQ(1u, requests_read(fake));
}


/*
 * The fd must be the key's allocation: exactly its length. This process is
 * the owner (its own broker serves the fd), so the owner check passes and
 * only the allocation check can refuse.
 */
class trust_allocation : public trust {
protected:
    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver";
        }
        uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = broker_only();
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_get(&cfg, &m_broker));
    }

    void TearDown() override
    {
        for (auto &e : m_exports) {
            uct_cuda_ipc_ns_broker_unregister(m_broker, e.reg);
            close(e.fd);
            (void)uct_cuda_ipc_ns_drv.cuMemRelease(e.handle);
        }
        if (m_broker != nullptr) {
            uct_cuda_ipc_ns_broker_put(m_broker);
        }
    }

    /* a key of @a key_length for an allocation of @a size bytes */
    uct_cuda_ipc_ns_rkey_info_t export_alloc(size_t size, size_t key_length)
    {
        const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
        CUmemAllocationProp prop                    = {};
        uct_cuda_ipc_ns_rkey_info_t key             = {};
        exported e;
        const char *addr;
        int fd;

        prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id          = 0;
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        EXPECT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuMemCreate(&e.handle, size,
                                                                &prop, 0));
        EXPECT_EQ(CUDA_SUCCESS,
                  uct_cuda_ipc_ns_drv.cuMemExportToShareableHandle(
                          &fd, e.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                          0));
        e.fd = fd;
        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_broker_register(m_broker, e.fd,
                                                          0x600d + m_exports.size(),
                                                          key.token, &e.reg));
        owned_by(&key, *self);
        key.handle_type           = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
        key.base                  = 0x7f0000000000ull;
        key.length                = key_length;
        key.handle.posix.fd       = e.fd;
        key.handle.posix.alloc_id = 0x600d + m_exports.size();
        addr = uct_cuda_ipc_ns_broker_addr(m_broker, &key.broker_addr_len);
        memcpy(key.broker_addr, addr, key.broker_addr_len);
        m_exports.push_back(e);
        return key;
    }

    ucs_status_t map(const uct_cuda_ipc_ns_rkey_info_t &key)
    {
        uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = broker_only();
        uct_cuda_ipc_ns_map_t mapping;

        ucs_status_t status = uct_cuda_ipc_ns_map(&cfg, &key, 0, &mapping,
                                                  NULL);
        if (status == UCS_OK) {
            uct_cuda_ipc_ns_map_unmap(&mapping);
        }
        uct_cuda_ipc_ns_broker_wait_idle();
        return status;
    }

    size_t granularity()
    {
        CUmemAllocationProp prop = {};
        size_t gran;
        prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        EXPECT_EQ(CUDA_SUCCESS,
                  uct_cuda_ipc_ns_drv.cuMemGetAllocationGranularity(
                          &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        return gran;
    }

    struct exported {
        CUmemGenericAllocationHandle handle;
        int                          fd;
        uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    };

    uct_cuda_ipc_ns_broker_t *m_broker = nullptr;
    std::vector<exported>    m_exports;
};


TEST_F(trust_allocation, exact_length_is_mapped)
{
    size_t gran = granularity();
    EXPECT_EQ(UCS_OK, map(export_alloc(2 * gran, 2 * gran)));
}


TEST_F(trust_allocation, bigger_allocation_is_refused)
{
    size_t gran = granularity();
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, map(export_alloc(4 * gran, 2 * gran)));
}


TEST_F(trust_allocation, smaller_allocation_is_refused)
{
    size_t gran = granularity();
    EXPECT_NE(UCS_OK, map(export_alloc(2 * gran, 4 * gran)));
}


/*
 * Socket directories. Pathname sockets live in a directory every peer
 * mounts; a path names whatever sits there at the time of use, so the
 * directory and its parents must be safe from other uids.
 */
class trust_sock_dir : public ::testing::Test {
protected:
    std::string make_dir(mode_t mode)
    {
        char tmpl[] = "/tmp/cuda_ipc_ns_trust_XXXXXX";
        EXPECT_NE(nullptr, mkdtemp(tmpl));
        EXPECT_EQ(0, chmod(tmpl, mode));
        m_dirs.push_back(tmpl);
        return tmpl;
    }

    void TearDown() override
    {
        for (auto &d : m_dirs) {
            std::string cmd = "rm -rf '" + d + "'";
            EXPECT_EQ(0, system(cmd.c_str()));
        }
    }

    ucs_status_t start_broker(const std::string &dir,
                              uct_cuda_ipc_ns_broker_t **broker_p)
    {
        uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = broker_only();
        cfg.sock_dir                     = dir.c_str();
        return uct_cuda_ipc_ns_broker_get(&cfg, broker_p);
    }

    std::vector<std::string> m_dirs;
};


TEST_F(trust_sock_dir, symlink_refused)
{
    std::string base = make_dir(0755);
    std::string real = base + "/real", link = base + "/link";
    uct_cuda_ipc_ns_broker_t *broker;

    ASSERT_EQ(0, mkdir(real.c_str(), 0700));
    ASSERT_EQ(0, symlink(real.c_str(), link.c_str()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, start_broker(link, &broker));

    /* an importer does not follow one either */
    uct_cuda_ipc_ns_rkey_info_t key = dead_exporter_key();
    std::string path = link + "/cuda_ipc_ns-1-0011223344556677.sock";
    key.broker_addr_len = path.size();
    memcpy(key.broker_addr, path.data(), path.size());
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = broker_only();
    int fd;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_fdx_import(&cfg, &key, &fd, NULL));
}


TEST_F(trust_sock_dir, parent_writable_by_others_refused)
{
    uct_cuda_ipc_ns_broker_t *broker;

    /* others could rename the directory away and plant their own */
    std::string open_parent = make_dir(0777);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, start_broker(open_parent + "/socks",
                                                  &broker));
    std::string group_parent = make_dir(0775);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, start_broker(group_parent + "/socks",
                                                  &broker));

    /* sticky (as /tmp): others cannot rename what is ours */
    std::string sticky_parent = make_dir(01777);
    ASSERT_EQ(UCS_OK, start_broker(sticky_parent + "/socks", &broker));
    uct_cuda_ipc_ns_broker_put(broker);
}


TEST_F(trust_sock_dir, importer_refuses_an_unsafe_or_odd_path)
{
    uct_cuda_ipc_ns_rkey_info_t key               = dead_exporter_key();
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = broker_only();
    fake_broker_report report;
    int fd;

    /* a directory others may write to */
    std::string path = make_dir(0777) + "/cuda_ipc_ns-1-0011223344556677.sock";
    key.broker_addr_len = path.size();
    memcpy(key.broker_addr, path.data(), path.size());
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_fdx_import(&cfg, &key, &fd, NULL));

    /* a socket that is not a broker's, even one of our uid that answers as
     * one and is the process the key names */
    path                = make_dir(0700) + "/not_a_broker.sock";
    key.broker_addr_len = path.size();
    memcpy(key.broker_addr, path.data(), path.size());
    test::peer fake("trust_fake_broker");
    fake_broker_cfg fcfg = {};
    fcfg.addr_len        = key.broker_addr_len;
    memcpy(fcfg.addr, key.broker_addr, key.broker_addr_len);
    ASSERT_TRUE(fake.chan().send_obj(fcfg));
    ASSERT_TRUE(fake.chan().recv_obj(report));
    ASSERT_EQ(0, report.status);
    owned_by(&key, report.id);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_fdx_import(&cfg, &key, &fd, NULL));
    shutdown(fake.chan().fd(), SHUT_WR);
    EXPECT_EQ(0, fake.wait()) << "the request reached a socket of another name";
}


/* Renaming the directory after the broker started changes nothing: the
 * broker removes its socket from the directory it opened, never from
 * whatever sits at the path now */
TEST_F(trust_sock_dir, renamed_directory_keeps_the_opened_one)
{
    std::string base  = make_dir(0700);
    std::string dir   = base + "/socks", moved = base + "/moved";
    uct_cuda_ipc_ns_broker_t *broker;
    struct stat st;
    uint8_t len;

    ASSERT_EQ(UCS_OK, start_broker(dir, &broker));
    const char *addr = uct_cuda_ipc_ns_broker_addr(broker, &len);
    std::string name = std::string(addr, len).substr(dir.size());

    ASSERT_EQ(0, rename(dir.c_str(), moved.c_str()));
    ASSERT_EQ(0, mkdir(dir.c_str(), 0700));
    std::string planted = dir + name;
    int pfd = open(planted.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    ASSERT_GE(pfd, 0);
    close(pfd);

    uct_cuda_ipc_ns_broker_put(broker);
    EXPECT_EQ(0, stat(planted.c_str(), &st)) << "removed the planted file";
    EXPECT_NE(0, stat((moved + name).c_str(), &st)) << "socket left behind";
}

} // namespace
