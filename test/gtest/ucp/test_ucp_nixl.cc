/*
 * UCP the way NIXL uses it (its src/plugins/ucx), over cu_ipc_ns:
 * workers exchange their addresses out of band; endpoints in peer
 * error-handling mode (UCP_ERR_HANDLING_MODE_PEER); ucp_mem_map with flags 0
 * on the application's own cuMemCreate (POSIX fd) and cuMemAlloc buffers,
 * which ucp_mem_query must class CUDA; ucp_rkey_pack / ucp_ep_rkey_unpack;
 * bursts of ucp_put_nbx / ucp_get_nbx with the memh, completed by
 * ucp_ep_flush_nbx, then an active message that notifies the target, whose
 * progress thread waits on ucp_worker_get_efd + ucp_worker_arm;
 * UCX_RNDV_THRESH=inf. The target is pid 1 of another PID namespace (and of
 * another network namespace, joined by a veth pair), or, for legacy
 * cuMemAlloc memory (whose IPC handles do not cross PID namespaces), in ours.
 *
 * Peer mode makes UCP want UCT_MD_FLAG_INVALIDATE on rendezvous lanes; the
 * tests check that the data really goes through cu_ipc_ns (mapping cache
 * counters), and that a killed target fails the initiator's requests,
 * rendezvous and RMA, with nothing hanging or leaking. ucp_nixl_chunks
 * runs the bursts on VMM memory in many allocations mapped back to back
 * (PyTorch's expandable segments). ucp_nixl_owner_copy runs them on
 * legacy memory across PID namespaces, which the owner's broker copies
 * (UCX_CUDA_IPC_NS_OWNER_COPY=y, docs/owner-copies.md).
 */
#include "common/cuda_alloc.h"
#include "common/uct_util.h"
#include "common/peer.h"
#include "common/pod_net.h"
#include "common/scoped_env.h"
#include "common/scratch_dir.h"
#include "common/ucp_side.h"

extern "C" {
#include "cuda_ipc_ns_broker_serve.h"
#include "cuda_ipc_ns_cache.h"
}

#include <gtest/gtest.h>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>


namespace {

typedef std::vector<uint8_t> bytes_t;

const size_t   MiB        = 1ul << 20;
const size_t   MAX_SIZE   = 64 * MiB;
const size_t   SIZES[]    = {8, 4096, 65536 + 8, MiB, 64 * MiB};
/* UCX_TLS: cu_ipc_ns, the CUDA copy transport (cu_cpy_ns, or UCX's own
 * cuda_copy where it is loaded) and tcp: test::module_tls() */
const unsigned NOTIF_ID   = 7;
const unsigned BURST      = 4;  /* ops per burst */
const int      WAIT_MS    = 60000; /* hang guard only */

enum { BUF_VMM = 0, BUF_LEGACY = 1, BUF_COUNT };

enum nixl_op : uint32_t {
    OP_FILL = 1, /* fill buffer buf with seed */
    OP_CHECK,    /* wait for notif notifications, check buf holds seed */
    OP_TAG_SEND, /* fill buf with seed, send it as tag message seed */
    OP_COPIES,   /* the copies our broker launched for importers */
    OP_EXIT
};

struct nixl_cmd {
    uint32_t op;
    uint32_t buf;
    uint32_t seed;
    uint32_t notif;
    uint64_t size;
};

struct nixl_setup {
    int32_t legacy;  /* also a cuMemAlloc buffer */
    int32_t rndv;    /* rendezvous from 8 KiB, not NIXL's "inf" */
    int32_t chunked; /* the VMM buffer in chunks of the granularity */
};

/* What the target sends after its worker address */
struct nixl_hello {
    int32_t  status;
    int32_t  mem_type[BUF_COUNT];
    uint64_t addr[BUF_COUNT];
    uint32_t rkey_len[BUF_COUNT];
    uint8_t  rkey[BUF_COUNT][512];
};


using test::hang_guard_ms;
using test::seed_pattern;
using test::seed_fill;
using test::seed_holds;

/* open fds of the kinds the module holds: exported or imported memory
 * (memfd on the emulator, /dev/nvidia* on a GPU) and peer watches (pidfd);
 * UCP's own sockets, timers and event fds come and go */
int count_module_fds()
{
    int count = 0;

    for (const auto &fd : test::open_fd_targets()) {
        const std::string &target = fd.second;
        count += (target.find("memfd:") != std::string::npos) ||
                 (target.find("[pidfd]") != std::string::npos) ||
                 (target.compare(0, 11, "/dev/nvidia") == 0);
    }
    return count;
}


/* what the non-socket fds are, for a failure message */
std::string list_non_socket_fds()
{
    std::string out;

    for (const auto &fd : test::open_fd_targets()) {
        if (fd.second.compare(0, 7, "socket:") != 0) {
            out += std::to_string(fd.first) + "=" + fd.second + " ";
        }
    }
    return out;
}


/* A NIXL-like UCP agent: context (RMA, AM, TAG), worker, one peer-mode ep */
class agent {
public:
    /* @a rndv_thresh: NIXL's "inf" when NULL. With a rendezvous threshold
     * the context has TAG but not WAKEUP: UCX 1.13.1 wants
     * UCT_IFACE_FLAG_EVENT_RECV on rendezvous lanes of TAG+WAKEUP contexts,
     * which cu_ipc_ns (no receives) does not report */
    agent(ucs_thread_mode_t thread_mode, const char *rndv_thresh = nullptr)
    {
        ucp_params_t params               = {};
        ucp_worker_params_t worker_params = {};
        ucp_config_t *config;

        if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
            return;
        }
        ucp_config_modify(config, "TLS", test::module_tls().c_str());
        /* NIXL's default unless the environment says otherwise */
        ucp_config_modify(config, "RNDV_THRESH",
                          rndv_thresh ? rndv_thresh : "inf");
        params.field_mask = UCP_PARAM_FIELD_FEATURES |
                            UCP_PARAM_FIELD_MT_WORKERS_SHARED;
        params.features   = UCP_FEATURE_RMA | UCP_FEATURE_AM |
                            (rndv_thresh ? UCP_FEATURE_TAG : UCP_FEATURE_WAKEUP);
        params.mt_workers_shared = 1;
        status = ucp_init(&params, config, &context);
        ucp_config_release(config);
        if (status != UCS_OK) {
            return;
        }
        worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        worker_params.thread_mode = thread_mode;
        status = ucp_worker_create(context, &worker_params, &worker);
    }

    ~agent()
    {
        if (ep != nullptr) {
            close_ep();
        }
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
        }
        if (context != nullptr) {
            ucp_cleanup(context);
        }
    }

    bool ok() const { return (status == UCS_OK) && (worker != nullptr); }

    bytes_t address()
    {
        ucp_address_t *addr;
        size_t len;
        if (ucp_worker_get_address(worker, &addr, &len) != UCS_OK) {
            return bytes_t();
        }
        bytes_t bytes((uint8_t*)addr, (uint8_t*)addr + len);
        ucp_worker_release_address(worker, addr);
        return bytes;
    }

    static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
    {
        agent *self = (agent*)arg;
        ++self->ep_errors;
        self->ep_error_status = status;
    }

    ucs_status_t connect(const bytes_t &remote)
    {
        ucp_ep_params_t params = {};
        params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                 UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.address         = (const ucp_address_t*)remote.data();
        params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
        params.err_handler.cb  = ep_error_cb;
        params.err_handler.arg = this;
        return ucp_ep_create(worker, &params, &ep);
    }

    void close_ep()
    {
        ucp_request_param_t param = {};
        param.op_attr_mask        = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags               = UCP_EP_CLOSE_FLAG_FORCE;
        wait(ucp_ep_close_nbx(ep, &param));
        ep = nullptr;
    }

    /* ucp_mem_map with flags 0, as NIXL registers application memory */
    ucp_mem_h map(void *ptr, size_t length)
    {
        ucp_mem_map_params_t params = {};
        ucp_mem_h memh;
        params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                            UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                            UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        params.address    = ptr;
        params.length     = length;
        params.flags      = 0;
        return (ucp_mem_map(context, &params, &memh) == UCS_OK) ? memh : nullptr;
    }

    static ucs_memory_type_t mem_type(ucp_mem_h memh)
    {
        ucp_mem_attr_t attr;
        attr.field_mask = UCP_MEM_ATTR_FIELD_MEM_TYPE;
        return (ucp_mem_query(memh, &attr) == UCS_OK) ? attr.mem_type :
               UCS_MEMORY_TYPE_LAST;
    }

    /* progress until @a req completes */
    ucs_status_t wait(ucs_status_ptr_t req)
    {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(hang_guard_ms(WAIT_MS));
        ucs_status_t st;

        if (UCS_PTR_IS_ERR(req) || (req == nullptr)) {
            return UCS_PTR_STATUS(req);
        }
        do {
            ucp_worker_progress(worker);
            st = ucp_request_check_status(req);
        } while ((st == UCS_INPROGRESS) &&
                 (std::chrono::steady_clock::now() < deadline));
        if (st == UCS_INPROGRESS) {
            ucp_request_cancel(worker, req);
            return UCS_ERR_TIMED_OUT; /* request leaked: the test fails */
        }
        ucp_request_free(req);
        return st;
    }

    ucs_status_ptr_t flush()
    {
        ucp_request_param_t param = {};
        return ucp_ep_flush_nbx(ep, &param);
    }

    /* completes once UCP has destroyed the lanes it discarded (each after
     * its cancel-flush: a failed endpoint's copies in flight land first) */
    ucs_status_ptr_t worker_flush()
    {
        ucp_request_param_t param = {};
        return ucp_worker_flush_nbx(worker, &param);
    }

    /* the notification NIXL sends after a transfer */
    ucs_status_ptr_t notify(uint32_t seed)
    {
        ucp_request_param_t param = {};
        m_notif_seed              = seed;
        return ucp_am_send_nbx(ep, NOTIF_ID, &m_notif_seed, sizeof(m_notif_seed),
                               NULL, 0, &param);
    }

    /* @a count ops of [local, local + size) <-> [remote, ...), split */
    std::vector<ucs_status_ptr_t> burst(bool put, void *local, uint64_t remote,
                                        size_t size, ucp_mem_h memh,
                                        ucp_rkey_h rkey)
    {
        std::vector<ucs_status_ptr_t> reqs;
        size_t chunk = (size >= BURST * 8) ? (size / BURST) : size;

        for (size_t off = 0; off < size; off += chunk) {
            ucp_request_param_t param = {};
            size_t len                = std::min(chunk, size - off);
            param.op_attr_mask        = UCP_OP_ATTR_FIELD_MEMH;
            param.memh                = memh;
            void *ptr                 = (char*)local + off;
            reqs.push_back(put ? ucp_put_nbx(ep, ptr, len, remote + off, rkey,
                                             &param) :
                                 ucp_get_nbx(ep, ptr, len, remote + off, rkey,
                                             &param));
        }
        return reqs;
    }

    ucs_status_t  status          = UCS_ERR_LAST;
    ucp_context_h context         = nullptr;
    ucp_worker_h  worker          = nullptr;
    ucp_ep_h      ep              = nullptr;
    int           ep_errors       = 0;
    ucs_status_t  ep_error_status = UCS_OK;

private:
    uint32_t      m_notif_seed    = 0;
};


/* The target's notifications, received on its progress thread */
struct notif_box {
    std::mutex              lock;
    std::condition_variable cond;
    uint32_t                count     = 0;
    uint32_t                last_seed = 0;
    int                     sent      = 0;
    ucs_status_t            send_status = UCS_OK;
};

void send_done_cb(void *request, ucs_status_t status, void *user_data)
{
    notif_box *box = (notif_box*)user_data;
    std::lock_guard<std::mutex> guard(box->lock);
    box->send_status = status;
    box->sent        = 1;
    box->cond.notify_all();
}

ucs_status_t notif_cb(void *arg, const void *header, size_t header_length,
                      void *data, size_t length,
                      const ucp_am_recv_param_t *param)
{
    notif_box *box = (notif_box*)arg;
    std::lock_guard<std::mutex> guard(box->lock);
    if (header_length == sizeof(uint32_t)) {
        memcpy(&box->last_seed, header, sizeof(uint32_t));
    }
    ++box->count;
    box->cond.notify_all();
    return UCS_OK;
}


/* Target: owns the buffers, progress thread on the worker's event fd */
TEST_PEER_ROLE(nixl_target)
{
    nixl_setup setup;
    nixl_hello hello = {};
    notif_box box;
    char initiator_addr[4096];
    nixl_cmd cmd;

    /* our namespaces exist (peer_exec unshared them before exec): say so,
     * then the test sets up our network */
    char ready = 1;
    if (!chan.send(&ready, 1) || !chan.recv_obj(setup, WAIT_MS) ||
        !test::cuda_init()) {
        return 1;
    }
    test::cuda_vmm_memory vmm(MAX_SIZE, setup.chunked);
    std::unique_ptr<test::cuda_legacy_buffer> legacy;
    void *bufs[BUF_COUNT] = {vmm.ptr(), nullptr};
    if (setup.legacy) {
        legacy.reset(new test::cuda_legacy_buffer(MAX_SIZE));
        bufs[BUF_LEGACY] = legacy->ptr();
    }

    agent ag(UCS_THREAD_MODE_MULTI, setup.rndv ? "8192" : nullptr);
    if (!ag.ok()) {
        return 2;
    }

    ucp_am_handler_param_t am_param = {};
    am_param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                          UCP_AM_HANDLER_PARAM_FIELD_CB |
                          UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am_param.id         = NOTIF_ID;
    am_param.cb         = notif_cb;
    am_param.arg        = &box;
    if (ucp_worker_set_am_recv_handler(ag.worker, &am_param) != UCS_OK) {
        return 3;
    }

    ucp_mem_h memh[BUF_COUNT] = {};
    for (int b = 0; b < BUF_COUNT; ++b) {
        void *rkey;
        size_t rkey_len;
        if (bufs[b] == nullptr) {
            continue;
        }
        memh[b] = ag.map(bufs[b], MAX_SIZE);
        if ((memh[b] == nullptr) ||
            (ucp_rkey_pack(ag.context, memh[b], &rkey, &rkey_len) != UCS_OK)) {
            return 4;
        }
        hello.mem_type[b] = agent::mem_type(memh[b]);
        if (rkey_len <= sizeof(hello.rkey[b])) {
            memcpy(hello.rkey[b], rkey, rkey_len);
            hello.rkey_len[b] = rkey_len;
        }
        ucp_rkey_buffer_release(rkey);
        hello.addr[b] = (uintptr_t)bufs[b];
    }

    bytes_t address = ag.address();
    hello.status    = UCS_OK;
    if (!chan.send(address.data(), address.size()) || !chan.send_obj(hello)) {
        return 5;
    }
    ssize_t len = chan.recv(initiator_addr, sizeof(initiator_addr), WAIT_MS);
    if ((len <= 0) ||
        (ag.connect(bytes_t(initiator_addr, initiator_addr + len)) != UCS_OK)) {
        return 6;
    }

    /* the progress thread, as NIXL's: progress, arm, sleep on the fd (a
     * context without WAKEUP, for the rendezvous test: progress, poll the
     * stop fd) */
    int efd = -1, stop_fd = eventfd(0, EFD_CLOEXEC);
    if ((stop_fd < 0) ||
        (!setup.rndv && (ucp_worker_get_efd(ag.worker, &efd) != UCS_OK))) {
        return 7;
    }
    std::thread progress([&]() {
        while (setup.rndv) {
            struct pollfd pfd = {stop_fd, POLLIN, 0};
            ucp_worker_progress(ag.worker);
            if ((poll(&pfd, 1, 0) > 0) && (pfd.revents & POLLIN)) {
                return;
            }
        }
        for (;;) {
            while (ucp_worker_progress(ag.worker) != 0) {
            }
            if (ucp_worker_arm(ag.worker) == UCS_ERR_BUSY) {
                continue;
            }
            struct pollfd pfd[2] = {{efd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
            if ((poll(pfd, 2, -1) < 0) && (errno != EINTR)) {
                break;
            }
            if (pfd[1].revents & POLLIN) {
                break;
            }
        }
    });

    while (chan.recv_obj(cmd, WAIT_MS) && (cmd.op != OP_EXIT)) {
        int32_t result = UCS_OK;
        void *buf      = bufs[cmd.buf % BUF_COUNT];
        if (cmd.op == OP_COPIES) {
            uct_cuda_ipc_ns_broker_serve_stats_t stats;
            uct_cuda_ipc_ns_broker_serve_get_stats(&stats);
            result = (int32_t)stats.copies;
        } else if (buf == nullptr) {
            result = UCS_ERR_INVALID_PARAM;
        } else if (cmd.op == OP_FILL) {
            seed_fill(buf, cmd.seed, cmd.size);
        } else if (cmd.op == OP_TAG_SEND) {
            /* completed on the progress thread */
            seed_fill(buf, cmd.seed, cmd.size);
            ucp_request_param_t param = {};
            param.op_attr_mask        = UCP_OP_ATTR_FIELD_CALLBACK |
                                        UCP_OP_ATTR_FIELD_USER_DATA;
            param.cb.send             = send_done_cb;
            param.user_data           = &box;
            std::unique_lock<std::mutex> guard(box.lock);
            box.sent = 0;
            /* not held across the call: the progress thread holds the
             * worker's lock when it runs send_done_cb, which takes box.lock
             * (a lock-order inversion TSan reports) */
            guard.unlock();
            ucs_status_ptr_t req = ucp_tag_send_nbx(ag.ep, buf, cmd.size,
                                                    cmd.seed, &param);
            if (UCS_PTR_IS_PTR(req)) {
                guard.lock();
                box.cond.wait_for(guard, std::chrono::milliseconds(hang_guard_ms(WAIT_MS)),
                                  [&]() { return box.sent != 0; });
                result = (box.sent != 0) ? box.send_status : UCS_ERR_TIMED_OUT;
                guard.unlock();
                ucp_request_free(req);
            } else {
                result = UCS_PTR_STATUS(req);
            }
        } else if (cmd.op == OP_CHECK) {
            std::unique_lock<std::mutex> guard(box.lock);
            if (!box.cond.wait_for(guard, std::chrono::milliseconds(hang_guard_ms(WAIT_MS)),
                                   [&]() { return box.count >= cmd.notif; })) {
                result = UCS_ERR_TIMED_OUT;
            } else if (box.last_seed != cmd.seed) {
                result = UCS_ERR_INVALID_PARAM;
            }
            guard.unlock();
            if ((result == UCS_OK) && !seed_holds(buf, cmd.seed, cmd.size)) {
                result = UCS_ERR_MESSAGE_TRUNCATED; /* stands for wrong bytes */
            }
        }
        if (!chan.send_obj(result)) {
            break;
        }
    }

    uint64_t wake = 1;
    if (write(stop_fd, &wake, sizeof(wake)) != sizeof(wake)) {
        progress.detach(); /* cannot stop it: exit anyway */
        return 8;
    }
    progress.join();
    close(stop_fd);
    ag.close_ep();
    for (int b = 0; b < BUF_COUNT; ++b) {
        if (memh[b] != nullptr) {
            ucp_mem_unmap(ag.context, memh[b]);
        }
    }
    chan.send_obj(cmd); /* done: the initiator may tear down */
    return 0;
}


enum nixl_ns { SAME_NS, OTHER_PID_NS, OTHER_PID_AND_NET_NS };


class ucp_nixl : public ::testing::TestWithParam<nixl_ns> {
protected:
    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        if (getenv("UCX_MEMTYPE_CACHE") != nullptr) {
            GTEST_SKIP() << "UCX_MEMTYPE_CACHE is set: ucp_mem_query of the "
                            "application's own memory needs the default";
        }
        /* both sides read these when they create their contexts */
        test::use_pod_network_device();
        if (GetParam() == OTHER_PID_AND_NET_NS) {
            m_sock_dir.reset(new test::scratch_dir("cuda_ipc_ns_nixl"));
            ASSERT_FALSE(m_sock_dir->path().empty());
            setenv("UCX_CUDA_IPC_NS_SOCK_DIR", m_sock_dir->path().c_str(), 1);
        }
    }

    void TearDown() override
    {
        m_peer.reset();
        m_sock_dir.reset();
        unsetenv("UCX_NET_DEVICES");
        unsetenv("UCX_CUDA_IPC_NS_SOCK_DIR");
    }

    /* legacy memory from another PID namespace, copied by its owner */
    virtual bool owner_copy() const { return false; }

    /* legacy memory from another PID namespace, opened here (the pid
     * numbers differ: UCX_CUDA_IPC_NS_LEGACY_DIRECT=auto) */
    virtual bool legacy_direct() const { return false; }

    /* a cuMemAlloc buffer on each side besides the VMM one */
    bool legacy() const
    {
        return (GetParam() == SAME_NS) || owner_copy() || legacy_direct();
    }

    /* progress @a ag until @a done holds, or past the hang guard (the
     * checks after it then say what did not happen) */
    template <typename Done> void progress_until(agent &ag, Done done)
    {
        auto guard = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(hang_guard_ms(WAIT_MS));
        while (!done() && (std::chrono::steady_clock::now() < guard)) {
            ucp_worker_progress(ag.worker);
        }
    }

    /* start the target (and its network: before our agent reads
     * UCX_NET_DEVICES) */
    void start_target(bool rndv = false, bool chunked = false)
    {
        test::peer_options opts;

        opts.new_pid_ns = (GetParam() != SAME_NS);
        opts.new_net_ns = (GetParam() == OTHER_PID_AND_NET_NS);
        m_peer.reset(new test::peer("nixl_target", opts));
        char ready = 0;
        ASSERT_EQ(1, m_peer->chan().recv(&ready, 1, WAIT_MS))
                << "the target never started";
        if (opts.new_net_ns) {
            test::connect_pod(m_peer->pid());
        }
        nixl_setup setup = {legacy(), rndv, chunked};
        ASSERT_TRUE(m_peer->chan().send_obj(setup));
    }

    /* exchange worker addresses and keys; @a ag connects */
    void connect_target(agent &ag)
    {
        char target_addr[4096];
        ssize_t len = m_peer->chan().recv(target_addr, sizeof(target_addr),
                                          WAIT_MS);
        ASSERT_GT(len, 0);
        ASSERT_TRUE(m_peer->chan().recv_obj(m_hello, WAIT_MS));
        ASSERT_EQ(UCS_OK, m_hello.status);
        ASSERT_EQ(UCS_OK, ag.connect(bytes_t(target_addr, target_addr + len)));
        bytes_t address = ag.address();
        ASSERT_TRUE(m_peer->chan().send(address.data(), address.size()));
        for (int b = 0; b < (legacy() ? BUF_COUNT : 1); ++b) {
            EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, m_hello.mem_type[b])
                    << "target: ucp_mem_query of its buffer " << b;
            ASSERT_NE(0u, m_hello.rkey_len[b]);
            ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(ag.ep, m_hello.rkey[b],
                                                 &m_rkey[b]));
        }
    }

    /* a command to the target, progressing our worker meanwhile */
    int32_t call(agent &ag, uint32_t op, uint32_t buf, uint32_t seed,
                 size_t size, uint32_t notif = 0)
    {
        nixl_cmd cmd   = {op, buf, seed, notif, size};
        int32_t result = UCS_ERR_LAST;
        EXPECT_TRUE(m_peer->chan().send_obj(cmd));
        for (int ms = 0; ms < hang_guard_ms(WAIT_MS); ++ms) {
            ucp_worker_progress(ag.worker);
            ssize_t ret = m_peer->chan().recv(&result, sizeof(result), 1);
            if (ret >= 0) {
                break;
            }
        }
        return result;
    }

    void stop_target(agent &ag)
    {
        for (auto &rkey : m_rkey) {
            if (rkey != nullptr) {
                ucp_rkey_destroy(rkey);
                rkey = nullptr;
            }
        }
        nixl_cmd cmd = {OP_EXIT, 0, 0, 0, 0};
        ASSERT_TRUE(m_peer->chan().send_obj(cmd));
        for (int ms = 0; ms < hang_guard_ms(WAIT_MS); ++ms) {
            ucp_worker_progress(ag.worker);
            if (m_peer->chan().recv(&cmd, sizeof(cmd), 1) >= 0) {
                break;
            }
        }
        ag.close_ep();
        EXPECT_EQ(0, m_peer->wait());
    }

    ucs_status_t wait_all(agent &ag, std::vector<ucs_status_ptr_t> reqs)
    {
        ucs_status_t result = UCS_OK;
        for (auto req : reqs) {
            ucs_status_t st = ag.wait(req);
            if (result == UCS_OK) {
                result = st;
            }
        }
        return result;
    }

    void bursts(bool chunked);

    /* @a n ops on buffer @a b: through a mapping here (@a mapped), or
     * through copies by the owner (@a owner) */
    void count_ops(int b, size_t n, size_t *mapped, size_t *owner) const
    {
        *((owner_copy() && (b == BUF_LEGACY)) ? owner : mapped) += n;
    }

    std::unique_ptr<test::peer> m_peer;
    nixl_hello                  m_hello = {};
    ucp_rkey_h                  m_rkey[BUF_COUNT] = {};
    std::unique_ptr<test::scratch_dir> m_sock_dir;
};


/* Bursts of puts and gets of each size, each burst flushed, the puts
 * notified; both VMM buffers in chunks of the granularity when @a chunked */
void ucp_nixl::bursts(bool chunked)
{
    start_target(false, chunked);
    ASSERT_FALSE(HasFatalFailure());
    agent ag(UCS_THREAD_MODE_SINGLE);
    ASSERT_TRUE(ag.ok());

    /* the initiator's own buffers, registered with flags 0 */
    test::cuda_vmm_memory vmm(MAX_SIZE, chunked);
    std::unique_ptr<test::cuda_legacy_buffer> leg;
    void *local[BUF_COUNT] = {vmm.ptr(), nullptr};
    if (legacy()) {
        leg.reset(new test::cuda_legacy_buffer(MAX_SIZE));
        local[BUF_LEGACY] = leg->ptr();
    }
    ucp_mem_h memh[BUF_COUNT] = {};
    for (int b = 0; b < (legacy() ? BUF_COUNT : 1); ++b) {
        memh[b] = ag.map(local[b], MAX_SIZE);
        ASSERT_NE(nullptr, memh[b]);
        EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, agent::mem_type(memh[b]));
    }

    connect_target(ag);
    ASSERT_FALSE(HasFatalFailure());

    uct_cuda_ipc_ns_cache_stats_t before, after;
    uct_cuda_ipc_ns_cache_get_stats(&before);
    int32_t copies_before = call(ag, OP_COPIES, 0, 0, 0);
    uint32_t seed = 100, notif = 0;
    size_t ops    = 0, owner_ops = 0; /* mapped here; copied by the owner */
    for (int b = 0; b < (legacy() ? BUF_COUNT : 1); ++b) {
        for (size_t size : SIZES) {
            SCOPED_TRACE(std::string(b == BUF_VMM ? "vmm " : "legacy ") +
                         std::to_string(size));
            /* put burst, flush, notify; the target checks on notification */
            seed_fill(local[b], ++seed, size);
            auto reqs = ag.burst(true, local[b], m_hello.addr[b], size, memh[b],
                                 m_rkey[b]);
            count_ops(b, reqs.size(), &ops, &owner_ops);
            EXPECT_EQ(UCS_OK, wait_all(ag, reqs));
            EXPECT_EQ(UCS_OK, ag.wait(ag.flush()));
            EXPECT_EQ(UCS_OK, ag.wait(ag.notify(seed)));
            EXPECT_EQ(UCS_OK, call(ag, OP_CHECK, b, seed, size, ++notif))
                    << "put";

            /* get burst, flush */
            EXPECT_EQ(UCS_OK, call(ag, OP_FILL, b, ++seed, size));
            reqs = ag.burst(false, local[b], m_hello.addr[b], size, memh[b],
                            m_rkey[b]);
            count_ops(b, reqs.size(), &ops, &owner_ops);
            EXPECT_EQ(UCS_OK, wait_all(ag, reqs));
            EXPECT_EQ(UCS_OK, ag.wait(ag.flush()));
            EXPECT_TRUE(seed_holds(local[b], seed, size)) << "get";
        }
    }

    /* cu_ipc_ns moved the data: every op went through its mapping cache
     * (UCP without cu_ipc_ns on the RMA lane would emulate RMA over tcp) */
    uct_cuda_ipc_ns_cache_get_stats(&after);
    EXPECT_GE(after.hits + after.misses, before.hits + before.misses + ops);
    /* and the owner copied every op on its legacy buffer, at least once */
    EXPECT_GE(call(ag, OP_COPIES, 0, 0, 0), copies_before + (int32_t)owner_ops);
    if (legacy_direct()) {
        EXPECT_EQ(copies_before, call(ag, OP_COPIES, 0, 0, 0))
                << "the owner copied: its legacy buffer was not opened here";
    }
    EXPECT_EQ(0, ag.ep_errors);

    stop_target(ag);
    for (auto m : memh) {
        if (m != nullptr) {
            ucp_mem_unmap(ag.context, m);
        }
    }
}


TEST_P(ucp_nixl, put_get_bursts_flush_notify) {
    bursts(false);
}


/* The target is killed with a rendezvous send (its buffer's key sent, never
 * read) and an RMA burst in flight: every request completes with an error,
 * the error handler runs once, the buffer is free at once, and neither the
 * exported fds nor the mappings of the dead target stay behind */
TEST_P(ucp_nixl, killed_target_fails_requests) {
    /* rendezvous from 8 KiB for the tag message (NIXL itself uses RMA only) */
    start_target(true);
    ASSERT_FALSE(HasFatalFailure());
    agent ag(UCS_THREAD_MODE_SINGLE, "8192");
    ASSERT_TRUE(ag.ok());
    test::cuda_vmm_buffer vmm(MAX_SIZE), rndv_buf(MAX_SIZE);
    ucp_mem_h memh = ag.map(vmm.ptr(), MAX_SIZE);
    ASSERT_NE(nullptr, memh);

    uct_cuda_ipc_ns_cache_stats_t before, during, after;
    /* an earlier test's dead peer may wait in the cache for its next use,
     * with its pidfd (test::count_open_fds() says why) */
    uct_cuda_ipc_ns_cache_reap();
    uct_cuda_ipc_ns_cache_get_stats(&before);
    int fds_before       = count_module_fds();
    std::string fds_list = list_non_socket_fds();

    connect_target(ag);
    ASSERT_FALSE(HasFatalFailure());

    ucp_request_param_t param = {};

    /* a transfer that works, mapping the target's buffer here */
    seed_fill(vmm.ptr(), 1, MAX_SIZE);
    EXPECT_EQ(UCS_OK, wait_all(ag, ag.burst(true, vmm.ptr(), m_hello.addr[0],
                                            MAX_SIZE, memh, m_rkey[0])));
    EXPECT_EQ(UCS_OK, ag.wait(ag.flush()));
    uct_cuda_ipc_ns_cache_get_stats(&during);
    EXPECT_GT(during.regions, before.regions) << "the target's buffer mapped";

    /* a rendezvous from the target: we read its buffer with cu_ipc_ns only
     * if UCP put it on the rendezvous lanes, which in peer mode takes
     * UCT_MD_FLAG_INVALIDATE (1.13.1 ucp/wireup/select.c) */
    ucs_status_ptr_t rreq = ucp_tag_recv_nbx(ag.worker, rndv_buf.ptr(),
                                             MAX_SIZE, 77, (ucp_tag_t)-1,
                                             &param);
    EXPECT_EQ(UCS_OK, call(ag, OP_TAG_SEND, BUF_VMM, 77, MAX_SIZE));
    EXPECT_EQ(UCS_OK, ag.wait(rreq));
    EXPECT_TRUE(seed_holds(rndv_buf.ptr(), 77, MAX_SIZE));
    uct_cuda_ipc_ns_cache_stats_t rndv_stats;
    uct_cuda_ipc_ns_cache_get_stats(&rndv_stats);
    EXPECT_GT(rndv_stats.hits + rndv_stats.misses, during.hits + during.misses)
            << "the rendezvous went through cu_ipc_ns";

    /* a rendezvous the target never receives: UCP registered rndv_buf and
     * sent its key; then an RMA burst; then the target dies */
    ucs_status_ptr_t rndv = ucp_tag_send_nbx(ag.ep, rndv_buf.ptr(), MAX_SIZE,
                                             42, &param);
    ASSERT_FALSE(UCS_PTR_IS_ERR(rndv));
    ASSERT_NE(nullptr, rndv) << "a 64 MiB tag message completes at once";
    EXPECT_GT(count_module_fds(), fds_before)
            << "rendezvous buffer exported by cu_ipc_ns";
    std::vector<ucs_status_ptr_t> reqs;
    for (int i = 0; i < 4; ++i) {
        auto burst = ag.burst(i % 2, vmm.ptr(), m_hello.addr[0], MAX_SIZE,
                              memh, m_rkey[0]);
        reqs.insert(reqs.end(), burst.begin(), burst.end());
    }
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(m_peer->kill());

    /* every request completes; the flush and the rendezvous with an error */
    wait_all(ag, reqs);
    ucs_status_t flush_status = ag.wait(ag.flush());
    ucs_status_t rndv_status  = ag.wait(rndv);
    double elapsed = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(UCS_ERR_TIMED_OUT, rndv_status) << "hung";
    EXPECT_TRUE(UCS_STATUS_IS_ERR(rndv_status))
            << ucs_status_string(rndv_status);
    EXPECT_TRUE(UCS_STATUS_IS_ERR(flush_status))
            << ucs_status_string(flush_status);
    /* the error handler: from progress, once */
    progress_until(ag, [&] { return ag.ep_errors != 0; });
    EXPECT_EQ(1, ag.ep_errors);
    printf("[ INFO     ] requests failed %.3f s after the kill (%s)\n",
           elapsed, ucs_status_string(rndv_status));

    /* the buffer is the application's again */
    seed_fill(rndv_buf.ptr(), 2, MAX_SIZE);
    EXPECT_TRUE(seed_holds(rndv_buf.ptr(), 2, MAX_SIZE));

    EXPECT_EQ(128 + SIGKILL, m_peer->wait());
    m_peer.reset();
    for (auto &rkey : m_rkey) {
        if (rkey != nullptr) {
            ucp_rkey_destroy(rkey);
            rkey = nullptr;
        }
    }
    ag.close_ep();
    EXPECT_EQ(UCS_OK, ag.wait(ag.worker_flush()));
    /* the dead target's copies still in flight land first (the module
     * completes them through worker progress; on a loaded machine the
     * emulator's copies of 64 MiB take seconds) */
    auto t1 = std::chrono::steady_clock::now();
    progress_until(ag, [&] {
        uct_cuda_ipc_ns_cache_get_stats(&after);
        return after.regions == before.regions;
    });
    printf("[ INFO     ] the dead target's mapping went %.3f s after the "
           "worker flush\n", std::chrono::duration<double>(
                   std::chrono::steady_clock::now() - t1).count());

    /* a dead peer whose last reference went on UCX's async thread keeps
     * its entry (and pidfd) until the next use of the cache by an
     * application thread (docs/architecture.md, "Peer failure"): one
     * lookup of another peer */
    {
        uct_cuda_ipc_ns_nsid_identity_t other = {};
        uct_cuda_ipc_ns_cache_peer_t *peer;
        other.pid = 1;
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_cache_peer_get(&other, &peer));
        uct_cuda_ipc_ns_cache_peer_put(peer);
    }

    /* the invalidated rendezvous registration closed its exported fd; the
     * dead target's mapping and peer entry are gone */
    EXPECT_EQ(fds_before, count_module_fds())
            << "before: " << fds_list << "\nafter: " << list_non_socket_fds();
    uct_cuda_ipc_ns_cache_get_stats(&after);
    EXPECT_EQ(before.regions, after.regions);
    EXPECT_EQ(before.bytes, after.bytes);
    ucp_mem_unmap(ag.context, memh);
}


INSTANTIATE_TEST_SUITE_P(namespaces, ucp_nixl,
                         ::testing::Values(SAME_NS, OTHER_PID_NS,
                                           OTHER_PID_AND_NET_NS),
                         [](const ::testing::TestParamInfo<nixl_ns> &info) {
                             return std::string(
                                     (info.param == SAME_NS) ? "same_ns_legacy" :
                                     (info.param == OTHER_PID_NS) ?
                                     "other_pid_ns" : "other_pid_and_net_ns");
                         });



/* The same on memory as PyTorch's expandable segments hand it to NIXL: both
 * VMM buffers separate allocations of the granularity mapped back to back
 * (32 of 2 MiB), registered whole; a burst's ops of 16 MiB cross chunk
 * boundaries (docs/framework-memory.md) */
class ucp_nixl_chunks : public ucp_nixl {
};


TEST_P(ucp_nixl_chunks, put_get_bursts_flush_notify) {
    bursts(true);
}


INSTANTIATE_TEST_SUITE_P(namespaces, ucp_nixl_chunks,
                         ::testing::Values(OTHER_PID_NS, OTHER_PID_AND_NET_NS),
                         [](const ::testing::TestParamInfo<nixl_ns> &info) {
                             return std::string(
                                     (info.param == OTHER_PID_NS) ?
                                     "other_pid_ns" : "other_pid_and_net_ns");
                         });


/* The same bursts on legacy memory in both processes, across PID
 * namespaces: the target's broker copies them (its VMM buffer still
 * mapped here); UCX_CUDA_IPC_NS_OWNER_COPY=y on both sides */
class ucp_nixl_owner_copy : public ucp_nixl {
protected:
    void SetUp() override
    {
        m_owner_copy.reset(new test::scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY",
                                                "y"));
        /* the owner's lane (or none), not our own open of its legacy
         * memory: both sides read it */
        m_direct.reset(new test::scoped_env("UCX_CUDA_IPC_NS_LEGACY_DIRECT",
                                            "n"));
        ucp_nixl::SetUp();
    }

    void TearDown() override
    {
        ucp_nixl::TearDown();
        m_direct.reset();
        m_owner_copy.reset();
    }

    bool owner_copy() const override { return true; }

    std::unique_ptr<test::scoped_env> m_owner_copy;
    std::unique_ptr<test::scoped_env> m_direct;
};


TEST_P(ucp_nixl_owner_copy, put_get_bursts_flush_notify) {
    bursts(false);
}


/* The same bursts on legacy memory in both processes, across PID
 * namespaces, the target pid 1 of its own and we not: we open its legacy
 * handle ourselves (UCX_CUDA_IPC_NS_LEGACY_DIRECT=auto), every op goes
 * through our mapping cache and its broker copies nothing; its copies are
 * on (UCX_CUDA_IPC_NS_OWNER_COPY=y), there to fall back to */
class ucp_nixl_legacy_direct : public ucp_nixl {
protected:
    void SetUp() override
    {
        m_owner_copy.reset(new test::scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY",
                                                "y"));
        m_direct.reset(new test::scoped_env("UCX_CUDA_IPC_NS_LEGACY_DIRECT",
                                            "auto"));
        ucp_nixl::SetUp();
    }

    void TearDown() override
    {
        ucp_nixl::TearDown();
        m_direct.reset();
        m_owner_copy.reset();
    }

    bool legacy_direct() const override { return true; }

    std::unique_ptr<test::scoped_env> m_owner_copy;
    std::unique_ptr<test::scoped_env> m_direct;
};


TEST_P(ucp_nixl_legacy_direct, put_get_bursts_flush_notify) {
    bursts(false);
}


INSTANTIATE_TEST_SUITE_P(namespaces, ucp_nixl_legacy_direct,
                         ::testing::Values(OTHER_PID_NS, OTHER_PID_AND_NET_NS),
                         [](const ::testing::TestParamInfo<nixl_ns> &info) {
                             return std::string(
                                     (info.param == OTHER_PID_NS) ?
                                     "other_pid_ns" : "other_pid_and_net_ns");
                         });


INSTANTIATE_TEST_SUITE_P(namespaces, ucp_nixl_owner_copy,
                         ::testing::Values(OTHER_PID_NS, OTHER_PID_AND_NET_NS),
                         [](const ::testing::TestParamInfo<nixl_ns> &info) {
                             return std::string(
                                     (info.param == OTHER_PID_NS) ?
                                     "other_pid_ns" : "other_pid_and_net_ns");
                         });

} // namespace
