/*
 * The first put or get of a peer's allocation has one deadline for the
 * whole path (docs/security.md): it opens one connection to the owner's
 * broker, which both imports the fd and gives the peer's liveness watch.
 * Against a broker that accepts and never answers, the op fails after
 * UCX_CUDA_IPC_NS_SOCK_TIMEOUT, having connected once (a watch connection
 * of its own used to come first, with a deadline of its own).
 */
#include "fixture.h"
#include "fdx/fake_broker.h"

extern "C" {
#include "cuda_ipc_ns_rkey.h"
}

#include <sys/socket.h>
#include <chrono>
#include <cstdio>
#include <cstring>


namespace test {
namespace {

class first_use : public datapath_pair {
};


TEST_F(first_use, one_connection_and_one_deadline)
{
    const double timeout = 0.5;
    peer_options opts;
    opts.new_pid_ns = true;
    start({{"FD_EXCHANGE", "broker"}, {"SOCK_TIMEOUT", "0.5s"}}, {}, opts);
    remote r = export_buffer(BUF_VMM, 1 << 20, 3);

    /* the silent broker listens at a fresh abstract name */
    peer silent("trust_fake_broker");
    fake_broker_cfg cfg       = {};
    fake_broker_report report = {};
    int len = snprintf(cfg.addr + 1, sizeof(cfg.addr) - 1,
                       "cuda_ipc_ns_first_use-%d", (int)getpid());
    cfg.addr_len = len + 1;
    cfg.silent   = 1;
    ASSERT_TRUE(silent.chan().send_obj(cfg));
    ASSERT_TRUE(silent.chan().recv_obj(report));
    ASSERT_EQ(0, report.status);

    /* the agent's key, as if the silent process owned the allocation */
    uct_cuda_ipc_ns_rkey_info_t info;
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(r.buf.rkey.data(),
                                                 r.buf.rkey.size(), &info));
    info.pid             = report.id.pid;
    info.pid_ns          = report.id.pid_ns;
    info.start_time      = report.id.start_time;
    info.broker_addr_len = cfg.addr_len;
    memcpy(info.broker_addr, cfg.addr, cfg.addr_len);
    bytes_t packed(r.buf.rkey.size());
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_pack(&info, packed.data()));
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(), packed.data(),
                                      &rkey));
    m_rkeys.push_back(rkey);

    int local = m_node->alloc(BUF_VMM, 1 << 20);
    auto t0   = std::chrono::steady_clock::now();
    ucs_status_t status = m_node->copy(m_ep, false, m_node->buf(local).ptr,
                                       4096, r.buf.addr, rkey.rkey);
    double elapsed = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(UCS_ERR_TIMED_OUT, status);
    EXPECT_GE(elapsed, timeout * 0.9) << "the deadline really waited";

    shutdown(silent.chan().fd(), SHUT_WR);
    EXPECT_EQ(1, silent.wait()) << "connections to the broker";
}

} // namespace
} // namespace test
