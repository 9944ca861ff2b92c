/*
 * Memory domain: invalidation (mem_dereg with UCT_MD_MEM_DEREG_FLAG_INVALIDATE),
 * what UCP's peer error-handling mode relies on (docs/security.md,
 * "Invalidation"): the completion is called exactly once before mem_dereg
 * returns, and from then on nobody newly obtains the memory through the
 * registration: its broker refuses the token, the pidfd path finds no fd.
 */
#include "common/cuda_alloc.h"
#include "common/peer.h"
#include "common/uct_util.h"

extern "C" {
#include <uct/api/uct.h>
#include <uct/api/v2/uct_v2.h>
#include <ucs/type/status.h>
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_map.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_rkey.h"
}

#include <gtest/gtest.h>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <sys/socket.h>
#include <unistd.h>


namespace {

typedef std::vector<uint8_t> bytes_t;


/* a completion that counts its calls */
struct counted_comp {
    uct_completion_t comp;
    int              calls;
};


void counted_comp_cb(uct_completion_t *comp)
{
    counted_comp *cc = (counted_comp*)((char*)comp -
                                       offsetof(counted_comp, comp));
    ++cc->calls;
}


void counted_comp_init(counted_comp *cc, int count)
{
    cc->comp.func   = counted_comp_cb;
    cc->comp.count  = count;
    cc->comp.status = UCS_OK;
    cc->calls       = 0;
}


uct_cuda_ipc_ns_broker_proto_fdx_config_t fdx_config(uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {};
    cfg.mode        = mode;
    cfg.sock_dir    = NULL;
    cfg.timeout     = 5.0;
    cfg.allowed_uid = -1;
    return cfg;
}


/* open fds of this process that are not sockets */
int count_non_socket_fds()
{
    int count = 0;

    for (const auto &fd : test::open_fd_targets()) {
        count += (fd.second.compare(0, 7, "socket:") != 0);
    }
    return count;
}


/* what an importer does with @a key (uct_cuda_ipc_ns_map()):
 * obtain the fd (pidfd_getfd or the owner's broker, per @a mode), import it
 * with the driver and map it for device 0; unmaps; returns the status */
ucs_status_t map_status(uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode,
                        const uct_cuda_ipc_ns_rkey_info_t &key)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(mode);
    uct_cuda_ipc_ns_map_t mapping;
    ucs_status_t status;

    status = uct_cuda_ipc_ns_map(&cfg, &key, 0, &mapping, NULL);
    if (status == UCS_OK) {
        uct_cuda_ipc_ns_map_unmap(&mapping);
    }
    /* when this process owns the key, its broker thread closes its end of
     * the connection after our reply: wait, so that fd counts are exact */
    uct_cuda_ipc_ns_broker_wait_idle();
    return status;
}


/* Peer (another PID namespace): imports each key it receives through the
 * owner's broker and answers the status */
TEST_PEER_ROLE(md_invalidate_importer)
{
    uct_cuda_ipc_ns_rkey_info_t key;

    if (!test::cuda_init()) {
        return 1;
    }
    while (chan.recv_obj(key)) {
        int32_t status = map_status(UCT_CUDA_IPC_NS_FDX_AUTO, key);
        if (!chan.send_obj(status)) {
            return 1;
        }
    }
    return 0;
}


class md_invalidate : public ::testing::Test {
protected:
    void SetUp() override
    {
        uct_md_config_t *config;

        m_component = test::find_component("cuda_ipc_ns");
        ASSERT_NE(nullptr, m_component) << "component not registered";
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &config));
        ASSERT_EQ(UCS_OK, uct_md_open(m_component, "cuda_ipc_ns", config, &m_md));
        uct_config_release(config);
    }

    void TearDown() override
    {
        if (m_md != nullptr) {
            uct_md_close(m_md);
        }
    }

    uct_mem_h reg(void *address, size_t length)
    {
        uct_mem_h memh = nullptr;
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md, address, length,
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        return memh;
    }

    uct_cuda_ipc_ns_rkey_info_t key_of(uct_mem_h memh)
    {
        uct_md_attr_t attr;
        uct_cuda_ipc_ns_rkey_info_t info;

        EXPECT_EQ(UCS_OK, uct_md_query(m_md, &attr));
        bytes_t key(attr.rkey_packed_size, 0);
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, key.data()));
        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(key.data(), key.size(),
                                                     &info));
        return info;
    }

    ucs_status_t dereg(uct_mem_h memh, unsigned flags, uct_completion_t *comp)
    {
        uct_md_mem_dereg_params_t params;

        params.field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH |
                            UCT_MD_MEM_DEREG_FIELD_FLAGS;
        params.memh       = memh;
        params.flags      = flags;
        params.comp       = comp;
        if (comp != nullptr) {
            params.field_mask |= UCT_MD_MEM_DEREG_FIELD_COMPLETION;
        }
        return uct_md_mem_dereg_v2(m_md, &params);
    }

    uct_component_h m_component = nullptr;
    uct_md_h        m_md        = nullptr;
};


TEST_F(md_invalidate, query_advertises_invalidate) {
    uct_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
    /* UCP selects rendezvous lanes in peer error mode only with it
     * (ucp/wireup/select.c): UCT_MD_FLAG_INVALIDATE in 1.13,
     * UCT_MD_FLAG_INVALIDATE_RMA from 1.15 */
#if UCT_API >= UCT_VERSION(1, 15)
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_INVALIDATE_RMA);
#else
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_INVALIDATE);
#endif
}


/* UCP 1.13.1 passes a completion counting one more than the MDs it
 * invalidates (ucp_request_dt_invalidate), UCP 1.22 one per MD plus one and
 * asserts it dropped back before dereg returned (ucp_memh_dereg) */
TEST_F(md_invalidate, completion_called_once_before_return) {
    test::cuda_vmm_buffer vmm(1 << 21);
    test::cuda_legacy_buffer legacy(1 << 20);
    void *ptrs[] = {vmm.ptr(), legacy.ptr()};

    for (void *ptr : ptrs) {
        counted_comp cc;

        /* the completion's own count: called now */
        counted_comp_init(&cc, 1);
        ASSERT_EQ(UCS_OK, dereg(reg(ptr, 4096), UCT_MD_MEM_DEREG_FLAG_INVALIDATE,
                                &cc.comp));
        EXPECT_EQ(1, cc.calls);
        EXPECT_EQ(0, cc.comp.count);
        EXPECT_EQ(UCS_OK, cc.comp.status);

        /* shared with another MD, as UCP does: decremented once, not called */
        counted_comp_init(&cc, 2);
        ASSERT_EQ(UCS_OK, dereg(reg(ptr, 4096), UCT_MD_MEM_DEREG_FLAG_INVALIDATE,
                                &cc.comp));
        EXPECT_EQ(0, cc.calls);
        EXPECT_EQ(1, cc.comp.count);
    }
}


TEST_F(md_invalidate, needs_a_completion) {
    test::cuda_vmm_buffer vmm(1 << 21);
    int fds_before = test::count_open_fds();
    uct_mem_h memh = reg(vmm.ptr(), 4096);

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              dereg(memh, UCT_MD_MEM_DEREG_FLAG_INVALIDATE, nullptr));
    /* still registered: the broker serves it */
    EXPECT_EQ(UCS_OK, map_status(UCT_CUDA_IPC_NS_FDX_BROKER, key_of(memh)));
    EXPECT_EQ(UCS_OK, dereg(memh, 0, nullptr));
    EXPECT_EQ(fds_before, test::count_open_fds());
}


/* the same process and a peer in another PID namespace obtain the fd before
 * the invalidation, and neither can after it */
TEST_F(md_invalidate, registration_refused_after_invalidation) {
    test::cuda_vmm_buffer vmm(1 << 21);
    test::peer_options opts;
    int32_t peer_status;
    counted_comp cc;

    opts.new_pid_ns = true;
    test::peer importer("md_invalidate_importer", opts);

    int fds_before                  = count_non_socket_fds();
    uct_mem_h memh                  = reg(vmm.ptr(), 4096);
    uct_cuda_ipc_ns_rkey_info_t key = key_of(memh);
    ASSERT_EQ(UCT_CUDA_IPC_NS_HANDLE_POSIX_FD, key.handle_type);

    EXPECT_EQ(UCS_OK, map_status(UCT_CUDA_IPC_NS_FDX_PIDFD, key));
    EXPECT_EQ(UCS_OK, map_status(UCT_CUDA_IPC_NS_FDX_BROKER, key));
    ASSERT_TRUE(importer.chan().send_obj(key));
    ASSERT_TRUE(importer.chan().recv_obj(peer_status, 60000));
    EXPECT_EQ(UCS_OK, peer_status) << "peer in another PID namespace";

    counted_comp_init(&cc, 1);
    ASSERT_EQ(UCS_OK, dereg(memh, UCT_MD_MEM_DEREG_FLAG_INVALIDATE, &cc.comp));
    ASSERT_EQ(1, cc.calls);

    /* the exported fd is closed: pidfd_getfd finds nothing at its number,
     * or whatever file took the number since (here: the importer's own
     * pidfd), which the driver does not import as the key's allocation */
    EXPECT_NE(UCS_OK, map_status(UCT_CUDA_IPC_NS_FDX_PIDFD, key));
    EXPECT_EQ(UCS_ERR_NO_ELEM, map_status(UCT_CUDA_IPC_NS_FDX_BROKER, key))
            << "the broker refuses the token";
    ASSERT_TRUE(importer.chan().send_obj(key));
    ASSERT_TRUE(importer.chan().recv_obj(peer_status, 60000));
    EXPECT_EQ(UCS_ERR_NO_ELEM, peer_status) << "peer in another PID namespace";

    shutdown(importer.chan().fd(), SHUT_RDWR);
    EXPECT_EQ(0, importer.wait());

    /* the exported fd is closed (sockets aside: the broker thread closes
     * its end of a connection after the client returned) */
    EXPECT_EQ(fds_before, count_non_socket_fds());
}


/* without the flag: the completion is neither needed nor touched */
TEST_F(md_invalidate, plain_dereg_unchanged) {
    test::cuda_vmm_buffer vmm(1 << 21);
    int fds_before = test::count_open_fds();
    counted_comp cc;

    uct_mem_h memh = reg(vmm.ptr(), 4096);
    EXPECT_EQ(fds_before + 1, test::count_open_fds()) << "exported fd";
    uct_cuda_ipc_ns_rkey_info_t key = key_of(memh);

    counted_comp_init(&cc, 1);
    ASSERT_EQ(UCS_OK, dereg(memh, 0, &cc.comp));
    EXPECT_EQ(0, cc.calls);
    EXPECT_EQ(1, cc.comp.count);
    EXPECT_EQ(fds_before, test::count_open_fds()) << "fd closed at dereg";
    EXPECT_EQ(UCS_ERR_NO_ELEM, map_status(UCT_CUDA_IPC_NS_FDX_BROKER, key));

    ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, reg(vmm.ptr(), 4096)));
}

} // namespace
