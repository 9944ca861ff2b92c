/*
 * Copies made by the owner (docs/owner-copies.md): legacy cuMemAlloc memory
 * of an owner in another PID namespace, which the driver will not open
 * there, is read and written by COPY requests to the owner's broker, with
 * the importer's own exportable VMM buffer. Bytes are checked on both
 * sides; hostile requests are refused and leave the owner's memory as it
 * was.
 */
#include "common/scoped_env.h"
#include "fdx/fdx_peers.h"
#include "common/cuda_alloc.h"
#include "datapath/uct_node.h"

extern "C" {
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_broker_copy.h"
#include "cuda_ipc_ns_copy_client.h"
#include "cuda_ipc_ns_host_mem.h"
#include "cuda_ipc_ns_nsid.h"
}

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>


namespace {

using namespace fdx_peers;

const uint64_t REG_ID     = 0x5150;
const size_t   OWNER_SIZE = 1 << 20;
const uint32_t OWNER_SEED = 11;

const uint64_t FD_ALLOC_ID = 0x6160;

struct copy_owner_hello {
    int                         status;
    uct_cuda_ipc_ns_rkey_info_t key;    /* owner identity, broker, token */
    uct_cuda_ipc_ns_rkey_info_t fd_key; /* a memfd for fd hand-out */
    CUipcMemHandle              legacy;
};

enum {
    COPY_OWNER_VERIFY = 1,
    COPY_OWNER_RESET,
    COPY_OWNER_HOLD,    /* hold the copy engine (seed: 1) or release it */
    COPY_OWNER_IDLE,    /* once the broker closed every connection: the
                         * number of open fds */
    COPY_OWNER_MAPS,    /* the same, the number of memfd mappings (an
                         * importer buffer's import holds no fd) */
    COPY_OWNER_LAUNCHED, /* the copies the copier launched so far */
    COPY_OWNER_QUIT
};

/* VERIFY: the owner's [offset, offset + length) holds bytes
 * [seed_offset, seed_offset + length) of the pattern of seed */
struct copy_owner_cmd {
    int      op;
    uint64_t offset;
    uint64_t length;
    uint32_t seed;
    uint64_t seed_offset;
};


/* Owner: legacy memory registered with its broker for copies */
TEST_PEER_ROLE(copy_owner)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
    const uct_cuda_ipc_ns_nsid_identity_t *self;
    uct_cuda_ipc_ns_broker_registry_reg_t *reg = nullptr, *fd_reg = nullptr;
    uct_cuda_ipc_ns_broker_t *broker;
    int memfd = make_memfd(5, MEM_SIZE);
    copy_owner_hello hello = {};
    copy_owner_cmd cmd;
    CUcontext ctx;
    const char *addr;

    if (!test::cuda_init()) {
        return 1;
    }
    self = uct_cuda_ipc_ns_nsid_self();
    {
        test::cuda_legacy_buffer mem(OWNER_SIZE);

        test::seed_fill(mem.ptr(), OWNER_SEED, OWNER_SIZE);
        TEST_CU(cuCtxGetCurrent, &ctx);
        TEST_CU(cuIpcGetMemHandle, &hello.legacy, (CUdeviceptr)mem.ptr());
        hello.status = uct_cuda_ipc_ns_broker_get(&cfg, &broker);
        if (hello.status == UCS_OK) {
            hello.status = uct_cuda_ipc_ns_broker_register_range(
                    broker, REG_ID, (uintptr_t)mem.ptr(), OWNER_SIZE, ctx, 0,
                    hello.key.token, &reg);
        }
        if (hello.status == UCS_OK) {
            hello.status = uct_cuda_ipc_ns_broker_register(
                    broker, memfd, FD_ALLOC_ID, hello.fd_key.token, &fd_reg);
        }
        hello.key.handle_type = UCT_CUDA_IPC_NS_HANDLE_LEGACY;
        hello.key.pid         = self->pid;
        hello.key.pid_ns      = self->pid_ns;
        hello.key.start_time  = self->start_time;
        hello.key.base        = (uintptr_t)mem.ptr();
        hello.key.length      = OWNER_SIZE;
        if (hello.status == UCS_OK) {
            addr = uct_cuda_ipc_ns_broker_addr(broker,
                                               &hello.key.broker_addr_len);
            memcpy(hello.key.broker_addr, addr, hello.key.broker_addr_len);
            uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
            memcpy(token, hello.fd_key.token, sizeof(token));
            hello.fd_key = hello.key;
            memcpy(hello.fd_key.token, token, sizeof(token));
            hello.fd_key.handle_type           = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
            hello.fd_key.handle.posix.fd       = memfd;
            hello.fd_key.handle.posix.alloc_id = FD_ALLOC_ID;
            hello.fd_key.length                = MEM_SIZE;
        }
        chan.send_obj(hello);
        if (hello.status != UCS_OK) {
            return 2;
        }

        while (chan.recv_obj(cmd, 120000) && (cmd.op != COPY_OWNER_QUIT)) {
            int ok = 1;
            if (cmd.op == COPY_OWNER_RESET) {
                test::seed_fill(mem.ptr(), OWNER_SEED, OWNER_SIZE);
            } else if (cmd.op == COPY_OWNER_HOLD) {
                ok = test::hold_copies(0, cmd.seed != 0);
            } else if (cmd.op == COPY_OWNER_IDLE) {
                uct_cuda_ipc_ns_broker_wait_idle();
                ok = test::count_open_fds();
            } else if (cmd.op == COPY_OWNER_MAPS) {
                uct_cuda_ipc_ns_broker_wait_idle();
                ok = test::count_memfd_mappings();
            } else if (cmd.op == COPY_OWNER_LAUNCHED) {
                ok = (int)uct_cuda_ipc_ns_broker_copy_launched();
            } else {
                std::vector<uint8_t> want = test::seed_pattern(
                        cmd.seed, cmd.seed_offset + cmd.length);
                std::vector<uint8_t> got(cmd.length);
                test::cuda_read(got.data(),
                                (char*)mem.ptr() + cmd.offset, cmd.length);
                /* an empty vector's data() may be null: no memcmp then */
                ok = (cmd.length == 0) ||
                     !memcmp(got.data(), want.data() + cmd.seed_offset,
                             cmd.length);
            }
            chan.send_obj(ok);
        }

        uct_cuda_ipc_ns_broker_unregister(broker, reg);
        uct_cuda_ipc_ns_broker_unregister(broker, fd_reg);
        uct_cuda_ipc_ns_broker_put(broker);
    }
    close(memfd);
    return 0;
}


class test_owner_copy : public ::testing::Test {
protected:
    void SetUp() override
    {
        CUmemGenericAllocationHandle handle;
        CUdeviceptr base;
        test::peer_options opts;

        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }

        m_buf.reset(new test::cuda_vmm_buffer(2 * OWNER_SIZE));
        TEST_CU(cuMemGetAddressRange, &base, &m_buf_size,
                (CUdeviceptr)m_buf->ptr());
        TEST_CU(cuPointerGetAttribute, &m_buf_id,
                CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)m_buf->ptr());
        TEST_CU(cuMemRetainAllocationHandle, &handle, m_buf->ptr());
        TEST_CU(cuMemExportToShareableHandle, &m_buf_fd, handle,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        TEST_CU(cuMemRelease, handle);

        /* the owner is pid 1 of its own PID namespace */
        opts.new_pid_ns = true;
        m_owner.reset(new test::peer("copy_owner", opts));
        ASSERT_TRUE(m_owner->chan().recv_obj(m_hello));
        ASSERT_EQ(UCS_OK, m_hello.status);
        ASSERT_NE(uct_cuda_ipc_ns_nsid_self()->pid_ns, m_hello.key.pid_ns);

        m_cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_AUTO);
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_open(&m_cfg, &m_hello.key,
                                                           &m_sock));
        /* a broken owner fails the test instead of hanging it */
        struct timeval tv = {30, 0};
        ASSERT_EQ(0, setsockopt(m_sock, SOL_SOCKET, SO_RCVTIMEO, &tv,
                                sizeof(tv)));
    }

    void TearDown() override
    {
        if (m_sock >= 0) {
            close(m_sock);
        }
        if (m_owner) {
            /* a failed test may leave the copy engine held */
            owner_call(COPY_OWNER_HOLD, 0);
            copy_owner_cmd cmd = {COPY_OWNER_QUIT, 0, 0, 0, 0};
            m_owner->chan().send_obj(cmd);
            EXPECT_EQ(0, m_owner->wait());
        }
        if (m_buf_fd >= 0) {
            close(m_buf_fd);
        }
    }

    uct_cuda_ipc_ns_broker_proto_copy_args_t args(uint32_t direction, uint64_t offset,
                                                  uint64_t length, uint64_t buf_offset)
    {
        uct_cuda_ipc_ns_broker_proto_copy_args_t copy = {};
        copy.seq        = ++m_seq;
        copy.offset     = offset;
        copy.length     = length;
        copy.buf_id     = m_buf_id;
        copy.buf_size   = m_buf_size;
        copy.buf_offset = buf_offset;
        copy.direction  = direction;
        return copy;
    }

    /* the same for a host buffer (the pinned host ring) */
    uct_cuda_ipc_ns_broker_proto_copy_args_t host_args(uint64_t id, uint64_t size,
                                                       uint32_t direction, uint64_t offset,
                                                       uint64_t length, uint64_t buf_offset)
    {
        uct_cuda_ipc_ns_broker_proto_copy_args_t copy = args(direction, offset, length,
                                                             buf_offset);
        copy.buf_id   = id;
        copy.buf_size = size;
        copy.flags    = UCT_CUDA_IPC_NS_COPY_BUF_HOST;
        return copy;
    }

    /* one COPY request and its answer; the status of the copy */
    ucs_status_t copy(const uct_cuda_ipc_ns_broker_proto_copy_args_t &req, int fd,
                      const uint8_t *token = nullptr)
    {
        ucs_status_t op_status = UCS_ERR_LAST;
        uint64_t seq           = 0;

        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_send(
                                  m_sock, REG_ID,
                                  token ? token : m_hello.key.token, &req, fd,
                                  0));
        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_recv(m_sock, REG_ID, 0,
                                                           &seq, &op_status));
        EXPECT_EQ(req.seq, seq);
        return op_status;
    }

    bool owner_holds(uint64_t offset, uint64_t length, uint32_t seed,
                     uint64_t seed_offset)
    {
        copy_owner_cmd cmd = {COPY_OWNER_VERIFY, offset, length, seed,
                              seed_offset};
        int ok             = 0;

        EXPECT_TRUE(m_owner->chan().send_obj(cmd));
        EXPECT_TRUE(m_owner->chan().recv_obj(ok));
        return ok;
    }

    int owner_call(int op, uint32_t arg = 0)
    {
        copy_owner_cmd cmd = {op, 0, 0, arg, 0};
        int ok             = 0;

        EXPECT_TRUE(m_owner->chan().send_obj(cmd));
        EXPECT_TRUE(m_owner->chan().recv_obj(ok));
        return ok;
    }

    void owner_reset()
    {
        owner_call(COPY_OWNER_RESET);
    }

    std::unique_ptr<test::cuda_vmm_buffer> m_buf;
    size_t                                 m_buf_size = 0;
    unsigned long long                     m_buf_id   = 0;
    int                                    m_buf_fd   = -1;
    std::unique_ptr<test::peer>            m_owner;
    copy_owner_hello                       m_hello    = {};
    uct_cuda_ipc_ns_broker_proto_fdx_config_t           m_cfg;
    int                                    m_sock     = -1;
    uint64_t                               m_seq      = 0;
};


/* Why the copies exist: a driver that refuses a legacy handle of another
 * PID namespace (CUDASIM_LEGACY_IPC_PIDNS=refuse, as older drivers are
 * reported to); the emulator's default, as driver 580, opens it (the owner
 * is pid 1 of its namespace, we are not) */
TEST_F(test_owner_copy, legacy_handle_does_not_open_from_another_pid_ns) {
    CUdeviceptr dptr;

    if (!test::copy_engine_hold_supported()) {
        /* driver_contract.legacy_handle_opens_from_another_pid_ns prints
         * a GPU's answer */
        GTEST_SKIP() << "checks the emulator's two behaviours";
    }

    {
        test::scoped_env refuse("CUDASIM_LEGACY_IPC_PIDNS", "refuse");
        EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT,
                  uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
                          &dptr, m_hello.legacy,
                          CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    }
    ASSERT_EQ(CUDA_SUCCESS,
              uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
                      &dptr, m_hello.legacy,
                      CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    EXPECT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuIpcCloseMemHandle(dptr));
}


TEST_F(test_owner_copy, get_of_several_sizes_and_offsets) {
    const struct { uint64_t offset, length, buf_offset; } cases[] = {
        {0, 1, 0}, {1, 4097, 3}, {65536, 65536, 12345},
        {OWNER_SIZE - 8, 8, OWNER_SIZE}, {0, OWNER_SIZE, 7}
    };
    std::vector<uint8_t> owner = test::seed_pattern(OWNER_SEED, OWNER_SIZE);

    for (const auto &c : cases) {
        std::vector<uint8_t> got(c.length + 2);
        test::cuda_fill(m_buf->ptr(), 0xee, m_buf_size);
        /* the fd goes with the first request only: the owner keeps the
         * buffer mapped for the connection */
        EXPECT_EQ(UCS_OK, copy(args(UCT_CUDA_IPC_NS_COPY_TO_IMPORTER,
                                    c.offset, c.length, c.buf_offset + 1),
                               (&c == cases) ? m_buf_fd : -1))
                << "offset " << c.offset << " length " << c.length;
        test::cuda_read(got.data(), (char*)m_buf->ptr() + c.buf_offset,
                        got.size());
        EXPECT_EQ(0xee, got.front());
        EXPECT_EQ(0xee, got.back());
        EXPECT_EQ(0, memcmp(got.data() + 1, owner.data() + c.offset,
                            c.length))
                << "offset " << c.offset << " length " << c.length;
    }
    EXPECT_TRUE(owner_holds(0, OWNER_SIZE, OWNER_SEED, 0));
}


TEST_F(test_owner_copy, put_of_several_sizes_and_offsets) {
    const uint32_t seed = 23;
    const struct { uint64_t offset, length, buf_offset; } cases[] = {
        {0, 1, 0}, {5, 4097, 3}, {65536, 65536, 12345},
        {OWNER_SIZE - 8, 8, OWNER_SIZE}, {0, OWNER_SIZE, 7}
    };

    test::seed_fill(m_buf->ptr(), seed, m_buf_size);
    for (const auto &c : cases) {
        owner_reset();
        EXPECT_EQ(UCS_OK, copy(args(UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER,
                                    c.offset, c.length, c.buf_offset),
                               m_buf_fd))
                << "offset " << c.offset << " length " << c.length;
        EXPECT_TRUE(owner_holds(c.offset, c.length, seed, c.buf_offset))
                << "offset " << c.offset << " length " << c.length;
        /* nothing else changed */
        EXPECT_TRUE(owner_holds(0, c.offset, OWNER_SEED, 0));
        EXPECT_TRUE(owner_holds(c.offset + c.length,
                                OWNER_SIZE - c.offset - c.length, OWNER_SEED,
                                c.offset + c.length));
    }
    /* and the importer's buffer was only read */
    EXPECT_TRUE(test::seed_holds(m_buf->ptr(), seed, m_buf_size));
}


TEST_F(test_owner_copy, hostile_requests_refused) {
    uint8_t wrong_token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    const uint32_t put = UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER;

    test::seed_fill(m_buf->ptr(), 31, m_buf_size);
    memcpy(wrong_token, m_hello.key.token, sizeof(wrong_token));
    wrong_token[7] ^= 0x10;
    EXPECT_EQ(UCS_ERR_NO_ELEM, copy(args(put, 0, 64, 0), m_buf_fd,
                                    wrong_token));
    /* past the end of the registration, and an offset that wraps */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              copy(args(put, OWNER_SIZE - 64, 65, 0), m_buf_fd));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              copy(args(put, UINT64_MAX - 7, 16, 0), m_buf_fd));
    /* a buffer the owner never got */
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, copy(args(put, 0, 64, 0), -1));
    /* a buffer said to be larger than the allocation behind the fd */
    uct_cuda_ipc_ns_broker_proto_copy_args_t big = args(put, 0, 64, 0);
    big.buf_size                    = 2 * m_buf_size;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, copy(big, m_buf_fd));
    EXPECT_TRUE(owner_holds(0, OWNER_SIZE, OWNER_SEED, 0));
}


/* The pinned host ring's memory (docs/owner-copies.md, "The pinned host
 * ring"): a sealed memfd the owner maps and registers once; a get writes
 * the range of it asked and nothing else, a put reads it */
TEST_F(test_owner_copy, host_buffer_get_and_put) {
    const size_t size = 2 * OWNER_SIZE, off = 4097, len = OWNER_SIZE - off - 3;
    std::vector<uint8_t> owner = test::seed_pattern(OWNER_SEED, OWNER_SIZE);
    std::vector<uint8_t> ours  = test::seed_pattern(77, size);
    uct_cuda_ipc_ns_host_mem_t mem;

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_host_mem_create(size, &mem));
    uint8_t *host = (uint8_t*)mem.ptr;
    memset(host, 0xee, size);
    EXPECT_EQ(UCS_OK, copy(host_args(mem.id, size,
                                     UCT_CUDA_IPC_NS_COPY_TO_IMPORTER, off, len,
                                     5),
                           mem.fd));
    EXPECT_EQ(0xee, host[4]);
    EXPECT_EQ(0, memcmp(host + 5, owner.data() + off, len));
    EXPECT_EQ(0xee, host[5 + len]);

    /* the owner holds it now: no fd */
    memcpy(host, ours.data(), size);
    owner_reset();
    EXPECT_EQ(UCS_OK, copy(host_args(mem.id, size,
                                     UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER, 100,
                                     OWNER_SIZE - 100, 200),
                           -1));
    EXPECT_TRUE(owner_holds(100, OWNER_SIZE - 100, 77, 200));
    EXPECT_TRUE(owner_holds(0, 100, OWNER_SEED, 0));
    EXPECT_EQ(0, memcmp(host, ours.data(), size)) << "only read";
    uct_cuda_ipc_ns_host_mem_free(&mem);
}


/* A host buffer is hostile until checked: one the importer could shrink
 * under the owner's copy (a SIGBUS there), one whose pages the owner would
 * allocate, one smaller than it is said to be, or no memory at all is
 * refused, the owner's memory untouched, and
 * the owner goes on serving */
TEST_F(test_owner_copy, hostile_host_buffers_refused) {
    const uint32_t put = UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER;
    const size_t size  = OWNER_SIZE;
    uct_cuda_ipc_ns_host_mem_t mem;
    int pipe_fds[2];

    int unsealed = memfd_create("cuda_ipc_ns_unsealed", MFD_CLOEXEC);
    ASSERT_GE(unsealed, 0);
    ASSERT_EQ(0, ftruncate(unsealed, size));
    ASSERT_EQ(0, fallocate(unsealed, 0, 0, size)); /* only the seal lacks */
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              copy(host_args(1, size, put, 0, 64, 0), unsealed));
    close(unsealed);

    /* sealed, but sparse: pinning it would allocate its pages at the
     * owner */
    int sparse = memfd_create("cuda_ipc_ns_sparse",
                              MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT_GE(sparse, 0);
    ASSERT_EQ(0, ftruncate(sparse, size));
    ASSERT_EQ(0, fcntl(sparse, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              copy(host_args(3, size, put, 0, 64, 0), sparse));
    close(sparse);

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_host_mem_create(size, &mem));
    memset(mem.ptr, 0x5a, size);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              copy(host_args(mem.id, 2 * size, put, 0, 64, size + 64),
                   mem.fd)) << "larger than the memfd";

    ASSERT_EQ(0, pipe(pipe_fds));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              copy(host_args(2, size, put, 0, 64, 0), pipe_fds[0]));
    close(pipe_fds[0]);
    close(pipe_fds[1]);

    EXPECT_TRUE(owner_holds(0, OWNER_SIZE, OWNER_SEED, 0));
    EXPECT_EQ(UCS_OK, copy(host_args(mem.id, size,
                                     UCT_CUDA_IPC_NS_COPY_TO_IMPORTER, 0, 64,
                                     0),
                           mem.fd)) << "the owner goes on serving";
    uct_cuda_ipc_ns_host_mem_free(&mem);
}


/* The buffer's own range is checked before a copy is made: the session
 * ends */
TEST_F(test_owner_copy, buffer_overrun_refused) {
    uct_cuda_ipc_ns_broker_proto_copy_args_t over =
            args(UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER, 0, 4096,
                 m_buf_size - 4095);

    /* the session is the copier's after a first request */
    EXPECT_EQ(UCS_OK, copy(args(UCT_CUDA_IPC_NS_COPY_TO_IMPORTER, 0, 1, 0),
                           m_buf_fd));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, copy(over, m_buf_fd));
    EXPECT_TRUE(owner_holds(0, OWNER_SIZE, OWNER_SEED, 0));
}


/* A copy is answered once it is done, and while it runs the broker still
 * hands out fds: the owner's copy engine is held, the answer does not come,
 * an fd import from the same broker succeeds; released, the answer comes
 * with the bytes in place */
TEST_F(test_owner_copy, answered_when_done_while_fd_hand_out_goes_on) {
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_BROKER);
    std::vector<uint8_t> owner = test::seed_pattern(OWNER_SEED, OWNER_SIZE);
    std::vector<uint8_t> got(4096);
    uct_cuda_ipc_ns_broker_proto_copy_args_t req;
    ucs_status_t op_status;
    uint64_t seq;
    int fd = -1;

    if (!test::copy_engine_hold_supported()) {
        GTEST_SKIP() << "needs the emulator's copy engine hold";
    }

    test::cuda_fill(m_buf->ptr(), 0, m_buf_size);
    ASSERT_TRUE(owner_call(COPY_OWNER_HOLD, 1));
    req = args(UCT_CUDA_IPC_NS_COPY_TO_IMPORTER, 8192, got.size(), 0);
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_send(
                              m_sock, REG_ID, m_hello.key.token, &req,
                              m_buf_fd, 0));

    /* a refused request after it is answered at once: the copier took the
     * held copy first (one session is read in order) and holds nothing
     * that refusals need */
    uct_cuda_ipc_ns_broker_proto_copy_args_t wrong = args(UCT_CUDA_IPC_NS_COPY_TO_IMPORTER,
                                                          0, 64, 0);
    uint8_t wrong_token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    memcpy(wrong_token, m_hello.key.token, sizeof(wrong_token));
    wrong_token[0] ^= 1;
    EXPECT_EQ(UCS_ERR_NO_ELEM, copy(wrong, -1, wrong_token));

    /* the broker's fd hand-out is served meanwhile */
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_fdx_import(&cfg, &m_hello.fd_key, &fd,
                                                 nullptr));
    EXPECT_TRUE(check_bytes(fd, 5, MEM_SIZE));
    if (fd >= 0) {
        close(fd);
    }

    /* the copy cannot have run: no answer yet */
    EXPECT_EQ(UCS_ERR_TIMED_OUT,
              uct_cuda_ipc_ns_copy_client_recv(m_sock, REG_ID, MSG_DONTWAIT,
                                               &seq, &op_status));

    ASSERT_TRUE(owner_call(COPY_OWNER_HOLD, 0));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_recv(m_sock, REG_ID, 0,
                                                       &seq, &op_status));
    EXPECT_EQ(req.seq, seq);
    EXPECT_EQ(UCS_OK, op_status);
    test::cuda_read(got.data(), m_buf->ptr(), got.size());
    EXPECT_EQ(0, memcmp(got.data(), owner.data() + 8192, got.size()));
}


/* An importer that goes away while its copy runs: the owner finishes the
 * copy, then closes the session and unmaps the importer's buffer; nothing
 * is left open */
TEST_F(test_owner_copy, importer_gone_mid_copy_leaves_nothing_behind) {
    uct_cuda_ipc_ns_broker_proto_copy_args_t req;
    int fds, maps;

    if (!test::copy_engine_hold_supported()) {
        GTEST_SKIP() << "needs the emulator's copy engine hold";
    }

    /* a first session starts the copier and its stream, and ends */
    ASSERT_EQ(UCS_OK, copy(args(UCT_CUDA_IPC_NS_COPY_TO_IMPORTER, 0, 1, 0),
                           m_buf_fd));
    close(m_sock);
    m_sock = -1;
    fds    = owner_call(COPY_OWNER_IDLE);
    ASSERT_GT(fds, 0);
    maps   = owner_call(COPY_OWNER_MAPS);
    ASSERT_GE(maps, 0);

    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_open(&m_cfg, &m_hello.key,
                                                       &m_sock));
    /* answered: the copier has the session and the buffer mapped */
    ASSERT_EQ(UCS_OK, copy(args(UCT_CUDA_IPC_NS_COPY_TO_IMPORTER, 0, 1, 0),
                           m_buf_fd));
    ASSERT_TRUE(owner_call(COPY_OWNER_HOLD, 1));
    req = args(UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER, 0, OWNER_SIZE, 0);
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_send(
                              m_sock, REG_ID, m_hello.key.token, &req, -1, 0));
    /* gone with a copy queued or held */
    close(m_sock);
    m_sock = -1;
    ASSERT_TRUE(owner_call(COPY_OWNER_HOLD, 0));
    EXPECT_EQ(fds, owner_call(COPY_OWNER_IDLE));
    EXPECT_EQ(maps, owner_call(COPY_OWNER_MAPS)) << "an importer buffer "
                                                    "stayed mapped";
}


/* A bounded queue per client, and fair service: with the owner's copy
 * engine held, a client that sent more than UCT_CUDA_IPC_NS_COPY_QUEUE_MAX
 * requests has that many launched, the rest left in its socket, and a
 * second client is served all the same: its request launched, and the
 * next one, refused, answered at once. Once released, every request is
 * answered once */
TEST_F(test_owner_copy, bounded_queue_and_fair_service) {
    const uint32_t get = UCT_CUDA_IPC_NS_COPY_TO_IMPORTER;
    const int max      = UCT_CUDA_IPC_NS_COPY_QUEUE_MAX;
    std::vector<uint64_t> seqs;
    uint8_t wrong_token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    ucs_status_t op_status;
    uint64_t seq;
    int other = -1;

    if (!test::copy_engine_hold_supported()) {
        GTEST_SKIP() << "needs the emulator's copy engine hold";
    }
    /* the owner maps our buffer: the requests below need no fd */
    ASSERT_EQ(UCS_OK, copy(args(get, 0, 1, 0), m_buf_fd));
    int before = owner_call(COPY_OWNER_LAUNCHED);
    ASSERT_TRUE(owner_call(COPY_OWNER_HOLD, 1));

    for (int i = 0; i < max + 4; ++i) {
        uct_cuda_ipc_ns_broker_proto_copy_args_t req = args(get, i * 4096, 4096, i * 4096);
        seqs.push_back(req.seq);
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_send(
                                  m_sock, REG_ID, m_hello.key.token, &req, -1,
                                  0));
    }
    int guard = test::hang_guard_ms(60000);
    uint64_t deadline = test::now_ms() + guard;
    while ((owner_call(COPY_OWNER_LAUNCHED) < before + max) &&
           (test::now_ms() < deadline)) {
    }
    ASSERT_EQ(before + max, owner_call(COPY_OWNER_LAUNCHED))
            << "the first client's copies up to the bound";

    /* a second client: one copy (held), then a forged token (refused) */
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_open(&m_cfg, &m_hello.key,
                                                       &other));
    struct timeval tv = {30, 0};
    ASSERT_EQ(0, setsockopt(other, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
    memcpy(wrong_token, m_hello.key.token, sizeof(wrong_token));
    wrong_token[3] ^= 0x40;
    uct_cuda_ipc_ns_broker_proto_copy_args_t held = args(get, 0, 4096, 0);
    uct_cuda_ipc_ns_broker_proto_copy_args_t bad  = args(get, 0, 4096, 0);
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_send(
                              other, REG_ID, m_hello.key.token, &held,
                              m_buf_fd, 0));
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_send(
                              other, REG_ID, wrong_token, &bad, -1, 0));
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_recv(other, REG_ID, 0, &seq,
                                                       &op_status));
    EXPECT_EQ(bad.seq, seq);
    EXPECT_EQ(UCS_ERR_NO_ELEM, op_status);
    EXPECT_EQ(before + max + 1, owner_call(COPY_OWNER_LAUNCHED))
            << "the first client's requests beyond the bound stay unread; "
            << "the second client's copy is launched";

    ASSERT_TRUE(owner_call(COPY_OWNER_HOLD, 0));
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_recv(other, REG_ID, 0, &seq,
                                                       &op_status));
    EXPECT_EQ(held.seq, seq);
    EXPECT_EQ(UCS_OK, op_status);
    close(other);
    std::vector<uint64_t> answered;
    for (size_t i = 0; i < seqs.size(); ++i) {
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_copy_client_recv(
                                  m_sock, REG_ID, 0, &seq, &op_status));
        answered.push_back(seq);
        EXPECT_EQ(UCS_OK, op_status);
    }
    std::sort(answered.begin(), answered.end());
    EXPECT_EQ(seqs, answered) << "every request answered once";
    EXPECT_EQ(before + max + 5, owner_call(COPY_OWNER_LAUNCHED));
}


/* The importer believes only the key's owner: a key naming another PID
 * namespace gets no session */
TEST_F(test_owner_copy, importer_checks_the_owner) {
    uct_cuda_ipc_ns_rkey_info_t key = m_hello.key;
    int sock                        = -1;

    key.pid_ns += 1;
    EXPECT_EQ(UCS_ERR_REJECTED,
              uct_cuda_ipc_ns_copy_client_open(&m_cfg, &key, &sock));
    EXPECT_EQ(-1, sock);
}

} // namespace
