/*
 * The importer's side of GET_CHUNK_FDS (docs/framework-memory.md, "First
 * use"): the fds of several chunks come in one message, and that message is
 * hostile until checked. A fake broker in this process (the key names us as
 * owner, so the owner check passes) answers with the right reply or a
 * hostile one: too few or too many fds, more than a message may carry, a
 * count above the maximum, a reply longer than the largest, other chunks or
 * allocation ids than asked, a refusal with fds. Each is refused with a
 * status, and no fd the fake broker sent stays in this process.
 */
#include "fdx/fdx_peers.h"

extern "C" {
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_nsid.h"
}

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <functional>
#include <thread>
#include <vector>


namespace {

using namespace fdx_peers;

const uint64_t GRAN       = 2ull << 20;
const uint64_t REG_ID     = 0x4321;
const uint32_t NUM_CHUNKS = 64;

/* What the fake broker answers to a GET_CHUNK_FDS request: the reply bytes,
 * and how many fds of its own to attach */
struct answer {
    std::vector<uint8_t> reply;
    unsigned             num_fds;
};

typedef std::function<answer(const uct_cuda_ipc_ns_broker_proto_req_t &req)> answer_t;


class test_chunk_fds : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_lfd = listen_as_chunk_owner(REG_ID, &m_key);
        ASSERT_GE(m_lfd, 0);
        m_key.handle.posix.num_chunks = NUM_CHUNKS;
        m_key.length                  = NUM_CHUNKS * GRAN;
        for (uint32_t i = 0; i < NUM_CHUNKS; ++i) {
            m_layout.push_back({i * GRAN, GRAN, 100 + i});
        }
    }

    void TearDown() override
    {
        if (m_lfd >= 0) {
            shutdown(m_lfd, SHUT_RDWR);
            close(m_lfd);
        }
    }

    /* Serve one request with @a respond, then ask for chunks @a first..
     * first+count-1; the fds the importer returns are checked and closed */
    ucs_status_t fetch(uint32_t first, uint32_t count, answer_t respond)
    {
        uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
        std::vector<int> fds(UCT_CUDA_IPC_NS_BROKER_FDS_MAX, -1);
        int fds0                         = test::count_open_fds();
        int lfd                          = m_lfd;
        int owner_pidfd                  = -1;

        std::thread broker([lfd, respond]() {
            uint8_t buf[UCT_CUDA_IPC_NS_BROKER_REQ_MAX + 1];
            uct_cuda_ipc_ns_broker_proto_req_t req;
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd < 0) {
                return;
            }
            ssize_t len = recv(cfd, buf, sizeof(buf), 0);
            EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_STATUS_OK,
                      uct_cuda_ipc_ns_broker_proto_unpack_request(
                              buf, (len > 0) ? len : 0, &req));
            EXPECT_EQ(UCT_CUDA_IPC_NS_BROKER_OP_GET_CHUNK_FDS, req.op);
            EXPECT_EQ(REG_ID, req.alloc_id);
            answer a = respond(req);
            /* fds of its own memory: any open file will do here */
            std::vector<int> fds;
            for (unsigned i = 0; i < a.num_fds; ++i) {
                fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
            }
            EXPECT_TRUE(test::send_with_fds(cfd, a.reply.data(),
                                            a.reply.size(), fds));
            for (int fd : fds) {
                close(fd);
            }
            close(cfd);
        });

        ucs_status_t status = uct_cuda_ipc_ns_fdx_chunk_fds(&cfg, &m_key,
                                                            m_layout.data(),
                                                            first, count,
                                                            fds.data(),
                                                            &owner_pidfd);
        broker.join();
        if (status == UCS_OK) {
            for (uint32_t i = 0; i < count; ++i) {
                EXPECT_GE(fds[i], 0);
                if (fds[i] >= 0) {
                    EXPECT_TRUE(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
                    close(fds[i]);
                }
            }
            if (owner_pidfd >= 0) {
                close(owner_pidfd);
            }
        }
        EXPECT_EQ(fds0, test::count_open_fds()) << "fd leak";
        return status;
    }

    /* The reply of an honest broker to @a req: the chunks asked, with the
     * layout's allocation ids */
    answer honest(const uct_cuda_ipc_ns_broker_proto_req_t &req) const
    {
        std::vector<uint64_t> ids;
        answer a;

        for (uint32_t i = 0; i < req.count; ++i) {
            ids.push_back(m_layout[req.index + i].alloc_id);
        }
        a.reply.resize(UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX);
        a.reply.resize(uct_cuda_ipc_ns_broker_proto_pack_fds_reply(
                a.reply.data(), req.alloc_id, req.index, req.count,
                ids.data()));
        a.num_fds = req.count;
        return a;
    }

    int                                  m_lfd = -1;
    uct_cuda_ipc_ns_rkey_info_t          m_key;
    std::vector<uct_cuda_ipc_ns_broker_proto_chunk_t> m_layout;
};


/* 16 chunks in one message; the request says which */
TEST_F(test_chunk_fds, batch_of_an_honest_owner) {
    uint32_t first = 0, count = 0;

    EXPECT_EQ(UCS_OK, fetch(40, UCT_CUDA_IPC_NS_BROKER_FDS_MAX,
                            [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        first = req.index;
        count = req.count;
        return honest(req);
    }));
    EXPECT_EQ(40u, first);
    EXPECT_EQ((uint32_t)UCT_CUDA_IPC_NS_BROKER_FDS_MAX, count);
    EXPECT_EQ(UCS_OK, fetch(63, 1, [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        return honest(req);
    }));
}


/* The number of fds must be the count asked: one missing, one extra, none */
TEST_F(test_chunk_fds, other_number_of_fds_refused) {
    for (int delta : {-1, +1, -4}) {
        EXPECT_EQ(UCS_ERR_IO_ERROR,
                  fetch(0, 4, [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
            answer a = honest(req);
            a.num_fds += delta;
            return a;
        })) << "fds " << 4 + delta;
    }
}


/* More fds than a message may carry (the receiver's limit), up to what
 * fills the control buffer and its padding, and beyond it: all closed */
TEST_F(test_chunk_fds, more_fds_than_a_message_carries_refused) {
    for (unsigned num_fds : {(unsigned)UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1,
                             (unsigned)UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 2,
                             (unsigned)UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 3,
                             40u, 253u}) {
        EXPECT_EQ(UCS_ERR_IO_ERROR,
                  fetch(0, UCT_CUDA_IPC_NS_BROKER_FDS_MAX,
                        [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
            answer a  = honest(req);
            a.num_fds = num_fds;
            return a;
        })) << num_fds << " fds";
    }
}


/* A count above the maximum (with the largest number of fds a message may
 * carry), or one above the maximum with its bytes, which no reply of the
 * protocol is that long */
TEST_F(test_chunk_fds, count_above_the_maximum_refused) {
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(0, UCT_CUDA_IPC_NS_BROKER_FDS_MAX,
                                      [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        answer a    = honest(req);
        a.reply[20] = UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1;
        return a;
    }));
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(0, UCT_CUDA_IPC_NS_BROKER_FDS_MAX,
                                      [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        answer a = honest(req);
        a.reply.resize(a.reply.size() + 8);
        a.reply[20] = UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1;
        return a;
    }));
}


/* A reply longer than the largest one (MSG_TRUNC), with its fds */
TEST_F(test_chunk_fds, truncated_reply_refused) {
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(0, 2,
                                      [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        answer a = honest(req);
        a.reply.resize(UCT_CUDA_IPC_NS_BROKER_FDS_REPLY_MAX + 64);
        return a;
    }));
}


/* Other chunks, another registration, or an allocation id that is not the
 * layout's (the owner's pool replaced the chunk) */
TEST_F(test_chunk_fds, other_chunks_refused) {
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(8, 4,
                                      [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        uct_cuda_ipc_ns_broker_proto_req_t other = req;
        other.index = req.index + 1;
        return honest(other);
    })) << "other first chunk";
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(8, 4,
                                      [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        uct_cuda_ipc_ns_broker_proto_req_t other = req;
        other.count = req.count - 1;
        return honest(other);
    })) << "fewer chunks, as many fds";
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(8, 4,
                                      [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        uct_cuda_ipc_ns_broker_proto_req_t other = req;
        other.alloc_id = REG_ID + 1;
        return honest(other);
    })) << "other registration";
    EXPECT_EQ(UCS_ERR_IO_ERROR, fetch(8, 4,
                                      [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        answer a = honest(req);
        a.reply[24 + 2 * 8] ^= 1; /* the third chunk's allocation id */
        return a;
    })) << "other allocation id";
}


/* A refusal is the broker's word: its status, and its fds closed */
TEST_F(test_chunk_fds, refusal_with_fds_closed) {
    EXPECT_EQ(UCS_ERR_NO_ELEM, fetch(0, 3,
                                     [&](const uct_cuda_ipc_ns_broker_proto_req_t &req) {
        answer a;
        a.reply.resize(UCT_CUDA_IPC_NS_BROKER_REPLY_SIZE);
        uct_cuda_ipc_ns_broker_proto_pack_reply(
                a.reply.data(), UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY, REG_ID);
        a.num_fds = 3;
        return a;
    }));
}


/* The importer asks for no more than a message carries, nor past the key */
TEST_F(test_chunk_fds, bad_requests_not_sent) {
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
    int fds[UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1];
    const struct {
        uint32_t first, count;
    } cases[] = {
        {0, 0}, {0, UCT_CUDA_IPC_NS_BROKER_FDS_MAX + 1}, {NUM_CHUNKS, 1},
        {NUM_CHUNKS - 2, 3}, {UINT32_MAX, 2}
    };

    for (const auto &c : cases) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_cuda_ipc_ns_fdx_chunk_fds(&cfg, &m_key, m_layout.data(),
                                                c.first, c.count, fds, NULL))
                << "chunks " << c.first << "..+" << c.count;
    }
}

} // namespace
