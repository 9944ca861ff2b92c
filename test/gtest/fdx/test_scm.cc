/*
 * cuda_ipc_ns: one message with a few fds (cuda_ipc_ns_scm.h). The
 * receiver must never keep fds of a message it refuses (docs/security.md).
 */
#include "common/peer.h"

#include <gtest/gtest.h>

extern "C" {
#include "cuda_ipc_ns_scm.h"
}

#include <sys/socket.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <vector>


namespace {

class test_scm : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
                                m_sv));
        m_fds0 = test::count_open_fds();
    }

    void TearDown() override
    {
        close(m_sv[0]);
        if (m_sv[1] >= 0) {
            close(m_sv[1]);
        }
    }

    /* what a hostile peer may send: any number of fds in one message */
    void send_raw(const void *buf, size_t len, const std::vector<int> &fds)
    {
        ASSERT_TRUE(test::send_with_fds(m_sv[1], buf, len, fds));
    }

    ucs_status_t recv_fd(void *buf, size_t max, size_t *len_p, int *fd_p)
    {
        return uct_cuda_ipc_ns_scm_recv_fd(m_sv[0], buf, max, MSG_DONTWAIT,
                                           len_p, fd_p);
    }

    int m_sv[2];
    int m_fds0;
};


TEST_F(test_scm, one_fd_or_none)
{
    char buf[16];
    size_t len;
    int fd = -2;

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_scm_send_fd(m_sv[1], "hello", 5, 1, 0));
    ASSERT_EQ(UCS_OK, recv_fd(buf, sizeof(buf), &len, &fd));
    EXPECT_EQ(5u, len);
    EXPECT_EQ(0, memcmp(buf, "hello", 5));
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_scm_send_fd(m_sv[1], "x", 1, -1, 0));
    ASSERT_EQ(UCS_OK, recv_fd(buf, sizeof(buf), &len, &fd));
    EXPECT_EQ(1u, len);
    EXPECT_EQ(-1, fd);

    EXPECT_EQ(UCS_ERR_TIMED_OUT, recv_fd(buf, sizeof(buf), &len, &fd))
        << "nothing to read";
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(m_fds0, test::count_open_fds());
}


TEST_F(test_scm, refused_messages_leave_no_fd)
{
    char buf[16];
    size_t len;
    int fd;

    /* two fds: more than one */
    send_raw("ab", 2, {0, 1});
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, recv_fd(buf, sizeof(buf), &len, &fd));
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(m_fds0, test::count_open_fds());

    /* eight fds: more than the control buffer holds (MSG_CTRUNC) */
    send_raw("ab", 2, {0, 1, 2, 0, 1, 2, 0, 1});
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, recv_fd(buf, sizeof(buf), &len, &fd));
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(m_fds0, test::count_open_fds());

    /* longer than the buffer, with an fd */
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_scm_send_fd(m_sv[1], "0123456789", 10,
                                                  0, 0));
    EXPECT_EQ(UCS_ERR_MESSAGE_TRUNCATED, recv_fd(buf, 4, &len, &fd));
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(m_fds0, test::count_open_fds());

    /* the peer is gone */
    close(m_sv[1]);
    m_sv[1] = -1;
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, recv_fd(buf, sizeof(buf), &len, &fd));
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET,
              uct_cuda_ipc_ns_scm_send_fd(m_sv[0], "x", 1, -1, MSG_NOSIGNAL));
}

/* Up to 16 fds in one message, in order; more than the receiver takes is
 * refused with every fd closed, the ones in the control buffer's padding
 * too */
TEST_F(test_scm, several_fds_or_refused)
{
    int fds[UCT_CUDA_IPC_NS_SCM_MAX_FDS], got[UCT_CUDA_IPC_NS_SCM_MAX_FDS];
    char buf[16];
    unsigned i, num;
    size_t len;

    for (i = 0; i < UCT_CUDA_IPC_NS_SCM_MAX_FDS; ++i) {
        fds[i] = (i % 2) ? 1 : 2;
    }
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_scm_send_fds(
                              m_sv[1], "abc", 3, fds,
                              UCT_CUDA_IPC_NS_SCM_MAX_FDS, 0));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_scm_recv_fds(
                              m_sv[0], buf, sizeof(buf), MSG_DONTWAIT, &len,
                              got, UCT_CUDA_IPC_NS_SCM_MAX_FDS, &num));
    EXPECT_EQ(3u, len);
    ASSERT_EQ((unsigned)UCT_CUDA_IPC_NS_SCM_MAX_FDS, num);
    for (i = 0; i < num; ++i) {
        EXPECT_TRUE(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
        close(got[i]);
    }
    EXPECT_EQ(m_fds0, test::count_open_fds());

    /* one more than asked for, or many more */
    for (unsigned max : {1u, 4u, 15u, 16u}) {
        for (unsigned extra : {1u, 2u, 3u, 30u}) {
            send_raw("ab", 2, std::vector<int>(max + extra, 0));
            EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                      uct_cuda_ipc_ns_scm_recv_fds(m_sv[0], buf, sizeof(buf),
                                                   MSG_DONTWAIT, &len, got,
                                                   max, &num))
                    << max + extra << " fds for " << max;
            EXPECT_EQ(0u, num);
            EXPECT_EQ(m_fds0, test::count_open_fds())
                    << max + extra << " fds for " << max;
        }
    }

    /* more than a sender may put in one message */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_cuda_ipc_ns_scm_send_fds(m_sv[1], "x", 1, fds,
                                           UCT_CUDA_IPC_NS_SCM_MAX_FDS + 1, 0));
}

} // namespace
