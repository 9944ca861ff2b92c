/*
 * cuda_ipc_ns: the owner peer of the fd exchange tests and their shared
 * helpers (fdx_peers.h).
 */
#include "fdx/fdx_peers.h"

extern "C" {
#include "cuda_ipc_ns_broker_serve.h"
}

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <vector>


namespace fdx_peers {

double now_sec()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


uint8_t pattern_byte(uint8_t pattern, size_t i)
{
    return (uint8_t)(pattern + i * 7);
}


int make_memfd(uint8_t pattern, size_t size)
{
    int fd = memfd_create("cuda_ipc_ns_test", MFD_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    if (ftruncate(fd, size) < 0) {
        close(fd);
        return -1;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    for (size_t i = 0; i < size; ++i) {
        ((uint8_t*)p)[i] = pattern_byte(pattern, i);
    }
    munmap(p, size);
    return fd;
}


bool check_bytes(int fd, uint8_t pattern, size_t size)
{
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        return false;
    }
    bool ok = true;
    for (size_t i = 0; ok && (i < size); ++i) {
        ok = (((uint8_t*)p)[i] == pattern_byte(pattern, i));
    }
    munmap(p, size);
    return ok;
}


uct_cuda_ipc_ns_rkey_info_t fd_key()
{
    uct_cuda_ipc_ns_rkey_info_t key = {};
    key.handle_type = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    return key;
}


uct_cuda_ipc_ns_rkey_info_t fd_key_of(const uct_cuda_ipc_ns_nsid_identity_t &id)
{
    uct_cuda_ipc_ns_rkey_info_t key = fd_key();
    key.pid        = id.pid;
    key.pid_ns     = id.pid_ns;
    key.start_time = id.start_time;
    return key;
}


int listen_as_chunk_owner(uint64_t reg_id, uct_cuda_ipc_ns_rkey_info_t *key)
{
    struct sockaddr_un sa = {};
    socklen_t salen       = sizeof(sa.sun_family);
    int lfd;

    /* autobind: the kernel picks a free abstract name */
    lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        return -1;
    }
    sa.sun_family = AF_UNIX;
    if (bind(lfd, (struct sockaddr*)&sa, salen) || listen(lfd, 16)) {
        close(lfd);
        return -1;
    }
    salen = sizeof(sa);
    if (getsockname(lfd, (struct sockaddr*)&sa, &salen)) {
        close(lfd);
        return -1;
    }
    *key                         = fd_key_of(*uct_cuda_ipc_ns_nsid_self());
    key->handle_type             = UCT_CUDA_IPC_NS_HANDLE_CHUNKS;
    key->handle.posix.fd         = -1;
    key->handle.posix.reg_id     = reg_id;
    key->handle.posix.alloc_id   = reg_id;
    key->broker_addr_len = salen - offsetof(struct sockaddr_un, sun_path);
    memcpy(key->broker_addr, sa.sun_path, key->broker_addr_len);
    return lfd;
}


uct_cuda_ipc_ns_broker_proto_fdx_config_t fdx_config(uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode,
                                                     double timeout)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {};
    cfg.mode        = mode;
    cfg.sock_dir    = NULL;
    cfg.timeout     = timeout;
    cfg.req_timeout = 0;
    cfg.allowed_uid = -1;
    return cfg;
}


/* Owner: runs a broker, registers memfds on request */
TEST_PEER_ROLE(fdx_owner)
{
    struct registration {
        int                           fd;
        uint64_t                      alloc_id;
        uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    };
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
    std::vector<registration> regs;
    std::vector<int> fillers;
    struct rlimit saved_nofile;
    uct_cuda_ipc_ns_broker_t *broker;
    owner_config ocfg;

    if (!chan.recv_obj(ocfg)) {
        return 1;
    }
    cfg.sock_dir    = ocfg.sock_dir;
    cfg.req_timeout = ocfg.req_timeout;
    cfg.allowed_uid = ocfg.allowed_uid;

    int status = uct_cuda_ipc_ns_broker_get(&cfg, &broker);
    chan.send_obj(status);
    if (status != UCS_OK) {
        return 2;
    }

    /* room for the fillers: no allocation once the fd table is full */
    fillers.reserve(4096);
    if (getrlimit(RLIMIT_NOFILE, &saved_nofile) != 0) {
        return 3;
    }

    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    owner_cmd cmd;
    /* the test closing the channel also ends the peer */
    while (chan.recv_obj(cmd, 120000)) {
        owner_reply reply = {};
        if (cmd.op == OWNER_QUIT) {
            break;
        } else if (cmd.op == OWNER_REGISTER) {
            registration r;
            r.fd       = make_memfd(cmd.pattern, cmd.size);
            r.alloc_id = cmd.alloc_id;
            reply.status = (r.fd < 0) ? UCS_ERR_IO_ERROR :
                           uct_cuda_ipc_ns_broker_register(broker, r.fd,
                                                           r.alloc_id,
                                                           reply.desc.token,
                                                           &r.reg);
            if (reply.status == UCS_OK) {
                const char *addr;
                regs.push_back(r);
                reply.desc.pid        = self->pid;
                reply.desc.pid_ns     = self->pid_ns;
                reply.desc.start_time = self->start_time;
                reply.desc.handle_type           = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
                reply.desc.handle.posix.fd       = r.fd;
                reply.desc.handle.posix.alloc_id = r.alloc_id;
                addr = uct_cuda_ipc_ns_broker_addr(broker,
                                                   &reply.desc.broker_addr_len);
                memcpy(reply.desc.broker_addr, addr,
                       reply.desc.broker_addr_len);
            }
        } else if (cmd.op == OWNER_UNREGISTER) {
            reply.status = UCS_ERR_NO_ELEM;
            for (auto it = regs.begin(); it != regs.end(); ++it) {
                if (it->alloc_id == cmd.alloc_id) {
                    uct_cuda_ipc_ns_broker_unregister(broker, it->reg);
                    close(it->fd);
                    regs.erase(it);
                    reply.status = UCS_OK;
                    break;
                }
            }
        } else if (cmd.op == OWNER_FILL_FDS) {
            /* the broker thread shares this fd table: its accept() fails
             * with EMFILE until the fillers are closed */
            struct rlimit low = saved_nofile;
            low.rlim_cur = std::min<rlim_t>(low.rlim_cur, cmd.size);
            reply.status = UCS_ERR_IO_ERROR;
            if (setrlimit(RLIMIT_NOFILE, &low) == 0) {
                int fd;
                errno = 0;
                while ((fillers.size() < fillers.capacity()) &&
                       ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)) {
                    fillers.push_back(fd);
                }
                if (errno == EMFILE) {
                    reply.status = UCS_OK;
                }
                /* leave cmd.alloc_id fds free */
                for (uint64_t i = 0; (i < cmd.alloc_id) && !fillers.empty();
                     ++i) {
                    close(fillers.back());
                    fillers.pop_back();
                }
            }
            reply.count = fillers.size();
        } else if (cmd.op == OWNER_FREE_FDS) {
            reply.count = fillers.size();
            for (int fd : fillers) {
                close(fd);
            }
            fillers.clear();
            reply.status = (setrlimit(RLIMIT_NOFILE, &saved_nofile) == 0) ?
                           UCS_OK : UCS_ERR_IO_ERROR;
        } else if (cmd.op == OWNER_ACCEPT_FAILURES) {
            uct_cuda_ipc_ns_broker_serve_stats_t stats;
            uct_cuda_ipc_ns_broker_serve_get_stats(&stats);
            reply.count  = (int)stats.accept_failures;
            reply.status = UCS_OK;
        }
        chan.send_obj(reply);
    }

    for (int fd : fillers) {
        close(fd);
    }
    for (auto &r : regs) {
        uct_cuda_ipc_ns_broker_unregister(broker, r.reg);
        close(r.fd);
    }
    uct_cuda_ipc_ns_broker_put(broker);
    return 0;
}


std::unique_ptr<test::peer>
start_owner(const test::peer_options &opts, const std::string &sock_dir,
            int allowed_uid, double req_timeout)
{
    std::unique_ptr<test::peer> owner(new test::peer("fdx_owner", opts));
    owner_config ocfg = {};
    int status;

    strncpy(ocfg.sock_dir, sock_dir.c_str(), sizeof(ocfg.sock_dir) - 1);
    ocfg.req_timeout = req_timeout;
    ocfg.allowed_uid = allowed_uid;
    EXPECT_TRUE(owner->chan().send_obj(ocfg));
    EXPECT_TRUE(owner->chan().recv_obj(status));
    EXPECT_EQ(UCS_OK, status);
    return owner;
}


/* one command, one reply */
static owner_reply owner_call(test::peer &owner, const owner_cmd &cmd)
{
    owner_reply reply = {};

    EXPECT_TRUE(owner.chan().send_obj(cmd));
    EXPECT_TRUE(owner.chan().recv_obj(reply));
    EXPECT_EQ(UCS_OK, reply.status) << "owner command " << cmd.op;
    return reply;
}


uct_cuda_ipc_ns_rkey_info_t owner_register(test::peer &owner,
                                           uint64_t alloc_id, uint8_t pattern,
                                           size_t size)
{
    owner_cmd cmd = {}; /* no uninitialized padding on the wire */

    cmd.op       = OWNER_REGISTER;
    cmd.alloc_id = alloc_id;
    cmd.pattern  = pattern;
    cmd.size     = size;
    return owner_call(owner, cmd).desc;
}


void owner_unregister(test::peer &owner, uint64_t alloc_id)
{
    owner_cmd cmd = {};

    cmd.op       = OWNER_UNREGISTER;
    cmd.alloc_id = alloc_id;
    owner_call(owner, cmd);
}


int owner_fill_fds(test::peer &owner, unsigned limit, unsigned spare)
{
    owner_cmd cmd = {};

    cmd.op       = OWNER_FILL_FDS;
    cmd.size     = limit;
    cmd.alloc_id = spare;
    return owner_call(owner, cmd).count;
}


int owner_free_fds(test::peer &owner)
{
    owner_cmd cmd = {};

    cmd.op = OWNER_FREE_FDS;
    return owner_call(owner, cmd).count;
}


int owner_accept_failures(test::peer &owner)
{
    owner_cmd cmd = {};

    cmd.op = OWNER_ACCEPT_FAILURES;
    return owner_call(owner, cmd).count;
}


void stop_owner(test::peer &owner)
{
    owner_cmd cmd = {};
    cmd.op        = OWNER_QUIT;
    owner.chan().send_obj(cmd);
    EXPECT_EQ(0, owner.wait());
}

} // namespace fdx_peers
