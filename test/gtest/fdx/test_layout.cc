/*
 * The importer's side of a registration of several allocations
 * (docs/framework-memory.md): the layout is asked of the owner's broker page
 * by page and believed only when it tiles the key's range. A fake broker in
 * this process (the key names us as owner, so the owner check passes)
 * answers with hostile layouts: each is refused with an error, leaks no fd.
 */
#include "fdx/fdx_peers.h"

extern "C" {
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_scm.h"
#include <ucs/debug/memtrack_int.h>
}

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <functional>
#include <thread>
#include <vector>


namespace {

using namespace fdx_peers;

const uint64_t GRAN   = 2ull << 20;
const uint64_t REG_ID = 0x1234;

typedef std::vector<uct_cuda_ipc_ns_broker_proto_chunk_t> layout_t;

/* What the fake broker answers to a LAYOUT request from chunk @a first:
 * the reply bytes, and an fd to attach (-1: none) */
typedef std::function<std::vector<uint8_t>(uint32_t first, int *fd)> answer_t;


class test_layout : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_lfd = listen_as_chunk_owner(REG_ID, &m_key);
        ASSERT_GE(m_lfd, 0);
    }

    void TearDown() override
    {
        if (m_lfd >= 0) {
            shutdown(m_lfd, SHUT_RDWR);
            close(m_lfd);
        }
    }

    /* Serve @a pages LAYOUT requests with @a answer, then ask for the
     * layout of a key of @a num_chunks chunks and @a length bytes */
    ucs_status_t fetch(uint32_t num_chunks, uint64_t length, int pages,
                       answer_t answer, layout_t *out = nullptr)
    {
        uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
        uct_cuda_ipc_ns_broker_proto_chunk_t *chunks  = nullptr;
        int fds0                                      = test::count_open_fds();
        int lfd                                       = m_lfd;

        m_key.handle.posix.num_chunks = num_chunks;
        m_key.length                  = length;
        std::thread broker([lfd, pages, answer]() {
            for (int i = 0; i < pages; ++i) {
                uint8_t buf[UCT_CUDA_IPC_NS_BROKER_CHUNK_REQ_SIZE + 1];
                uct_cuda_ipc_ns_broker_proto_req_t req;
                int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (cfd < 0) {
                    return;
                }
                ssize_t len = recv(cfd, buf, sizeof(buf), 0);
                EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                          uct_cuda_ipc_ns_broker_proto_unpack_request(
                                  buf, (len > 0) ? len : 0, &req));
                EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_OP_LAYOUT, req.op);
                EXPECT_EQ(REG_ID, req.alloc_id);
                int fd                    = -1;
                std::vector<uint8_t> reply = answer(req.index, &fd);
                EXPECT_TRUE(test::send_with_fds(
                        cfd, reply.data(), reply.size(),
                        (fd >= 0) ? std::vector<int>{fd} : std::vector<int>{}));
                close(cfd);
            }
        });

        ucs_status_t status = uct_cuda_ipc_ns_fdx_layout(&cfg, &m_key,
                                                         &chunks);
        broker.join();
        if (status == UCS_OK) {
            if (out != nullptr) {
                out->assign(chunks, chunks + num_chunks);
            }
            ucs_free(chunks);
        }
        EXPECT_EQ(fds0, test::count_open_fds()) << "fd leak";
        return status;
    }

    /* The pages of @a layout as an honest broker answers them */
    static answer_t honest(const layout_t &layout, uint32_t total)
    {
        return [layout, total](uint32_t first, int *fd) {
            std::vector<uint8_t> reply(UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX);
            uint32_t count = std::min<uint32_t>(
                    layout.size() - first, UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX);
            reply.resize(uct_cuda_ipc_ns_broker_proto_pack_layout(
                    reply.data(), REG_ID, total, first, count,
                    layout.data() + first));
            return reply;
        };
    }

    static layout_t tiles(uint32_t n)
    {
        layout_t layout;
        for (uint32_t i = 0; i < n; ++i) {
            layout.push_back({i * GRAN, GRAN, 100 + i});
        }
        return layout;
    }

    int                         m_lfd = -1;
    uct_cuda_ipc_ns_rkey_info_t m_key;
};


/* 300 chunks come in three pages and read back as the owner sent them */
TEST_F(test_layout, pages_of_an_honest_owner) {
    layout_t layout = tiles(300), got;

    ASSERT_EQ(UCS_OK, fetch(300, 300 * GRAN, 3, honest(layout, 300), &got));
    ASSERT_EQ(layout.size(), got.size());
    for (size_t i = 0; i < layout.size(); ++i) {
        EXPECT_EQ(layout[i].offset, got[i].offset);
        EXPECT_EQ(layout[i].size, got[i].size);
        EXPECT_EQ(layout[i].alloc_id, got[i].alloc_id);
    }
}


TEST_F(test_layout, overlapping_chunks_refused) {
    layout_t layout = tiles(4);

    layout[2].offset -= GRAN / 2;
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(4, 4 * GRAN, 1, honest(layout, 4)));
}


TEST_F(test_layout, chunk_past_the_range_refused) {
    layout_t layout = tiles(4);

    layout[3].size *= 2;
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(4, 4 * GRAN, 1, honest(layout, 4)));
}


/* another number of chunks than the key's, or another page than asked */
TEST_F(test_layout, other_count_or_page_refused) {
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(4, 4 * GRAN, 1, honest(tiles(5), 5)));
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(4, 4 * GRAN, 1,
                                      [](uint32_t first, int *fd) {
        layout_t layout = tiles(4);
        std::vector<uint8_t> reply(UCT_CUDA_IPC_NS_BROKER_LAYOUT_REPLY_MAX);
        reply.resize(uct_cuda_ipc_ns_broker_proto_pack_layout(
                reply.data(), REG_ID, 4, first + 1, 3, layout.data() + 1));
        return reply;
    }));
}


/* a layout with an fd attached: the fd is not kept */
TEST_F(test_layout, fd_with_layout_refused) {
    layout_t layout  = tiles(4);
    answer_t with_fd = [layout](uint32_t first, int *fd) {
        *fd = 0;
        return honest(layout, 4)(first, fd);
    };

    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(4, 4 * GRAN, 1, with_fd));
}


TEST_F(test_layout, refusal_is_no_elem) {
    EXPECT_EQ(UCS_ERR_NO_ELEM, fetch(4, 4 * GRAN, 1,
                                     [](uint32_t first, int *fd) {
        std::vector<uint8_t> reply(UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE);
        uct_cuda_ipc_ns_broker_proto_pack_reply(
                reply.data(), UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY, REG_ID);
        return reply;
    }));
}

} // namespace
