/*
 * UCP with the module: worker creation (memory-type endpoint over
 * cu_cpy_ns), memory-type detection of the application's own CUDA memory
 * with UCX_MEMTYPE_CACHE unset, CUDA allocation through ucp_mem_map, and tag
 * messages between CUDA buffers in one process and across two.
 */
#include "cpy_test.h"
#include "common/peer.h"

extern "C" {
#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>
}

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>


namespace {

using cpy_test::bytes_t;

const int TIMEOUT_MS = 30000;


/* A UCP context and worker; UCX_TLS=tls and UCX_PROTO_ENABLE=proto when
 * given */
class ucp_side {
public:
    explicit ucp_side(const char *tls = nullptr, const char *proto = nullptr)
    {
        ucp_params_t params = {};
        ucp_worker_params_t worker_params = {};
        ucp_config_t *config;

        init_status = ucp_config_read(NULL, NULL, &config);
        if (init_status != UCS_OK) {
            return;
        }
        if (tls != nullptr) {
            ucp_config_modify(config, "TLS", tls);
        }
        if (proto != nullptr) {
            ucp_config_modify(config, "PROTO_ENABLE", proto);
        }
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features   = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
        init_status       = ucp_init(&params, config, &context);
        ucp_config_release(config);
        if (init_status != UCS_OK) {
            return;
        }
        worker_status = ucp_worker_create(context, &worker_params, &worker);
    }

    ~ucp_side()
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

    bool ok() const { return (init_status == UCS_OK) && (worker_status == UCS_OK); }

    bytes_t address() const
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

    ucs_status_t connect(const bytes_t &remote)
    {
        ucp_ep_params_t params = {};
        params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        params.address    = (const ucp_address_t*)remote.data();
        return ucp_ep_create(worker, &params, &ep);
    }

    void close_ep()
    {
        ucp_request_param_t param = {};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
        wait(ucp_ep_close_nbx(ep, &param), nullptr);
        ep = nullptr;
    }

    /* memory type UCP detects for @a ptr (ucp_mem_map without a type) */
    ucs_memory_type_t detect(void *ptr, size_t length)
    {
        ucp_mem_map_params_t params = {};
        ucp_mem_attr_t attr;
        ucp_mem_h memh;

        params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                            UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        params.address    = ptr;
        params.length     = length;
        if (ucp_mem_map(context, &params, &memh) != UCS_OK) {
            return UCS_MEMORY_TYPE_LAST;
        }
        attr.field_mask = UCP_MEM_ATTR_FIELD_MEM_TYPE;
        ucp_mem_query(memh, &attr);
        ucp_mem_unmap(context, memh);
        return attr.mem_type;
    }

    /* progress until @a req completes (also the worker of @a other) */
    ucs_status_t wait(ucs_status_ptr_t req, ucp_side *other)
    {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(TIMEOUT_MS);
        ucs_status_t status;

        if (UCS_PTR_IS_ERR(req) || (req == nullptr)) {
            return UCS_PTR_STATUS(req);
        }
        do {
            ucp_worker_progress(worker);
            if (other != nullptr) {
                ucp_worker_progress(other->worker);
            }
            status = ucp_request_check_status(req);
        } while ((status == UCS_INPROGRESS) &&
                 (std::chrono::steady_clock::now() < deadline));
        if (status == UCS_INPROGRESS) {
            ucp_request_cancel(worker, req); /* the test fails anyway */
            ucp_request_free(req);
            return UCS_ERR_TIMED_OUT;
        }
        ucp_request_free(req);
        return status;
    }

    ucs_status_ptr_t send(const void *buf, size_t size, ucp_tag_t tag)
    {
        ucp_request_param_t param = {};
        return ucp_tag_send_nbx(ep, buf, size, tag, &param);
    }

    ucs_status_ptr_t recv(void *buf, size_t size, ucp_tag_t tag)
    {
        ucp_request_param_t param = {};
        return ucp_tag_recv_nbx(worker, buf, size, tag, (ucp_tag_t)-1, &param);
    }

    /* receive one message of @a len bytes on @a chan, progressing */
    bool chan_recv(const test::channel &chan, void *buf, size_t len)
    {
        for (int ms = 0; ms < TIMEOUT_MS; ++ms) {
            ucp_worker_progress(worker);
            ssize_t ret = chan.recv(buf, len, 1);
            if (ret >= 0) {
                return (size_t)ret == len;
            }
        }
        return false;
    }

    ucs_status_t  init_status   = UCS_ERR_LAST;
    ucs_status_t  worker_status = UCS_ERR_LAST;
    ucp_context_h context       = nullptr;
    ucp_worker_h  worker        = nullptr;
    ucp_ep_h      ep            = nullptr;
};


/* Cleared on purpose: the tests check what happens when it is unset */
bool memtype_cache_configured()
{
    return getenv("UCX_MEMTYPE_CACHE") != nullptr;
}


class cpy_ucp_test : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        if (memtype_cache_configured()) {
            GTEST_SKIP() << "UCX_MEMTYPE_CACHE is set: the tests check the "
                            "default";
        }
    }

    /* tag message of @a size bytes from @a src to @a dst, both sides of
     * @a a and @a b in this process */
    void tag_roundtrip(ucp_side &a, ucp_side &b, void *src, void *dst,
                       size_t size, bool src_cuda, bool dst_cuda)
    {
        bytes_t data = cpy_test::pattern(size, (unsigned)size);
        if (src_cuda) {
            cpy_test::device_write(src, data);
        } else {
            memcpy(src, data.data(), size);
        }

        ucs_status_ptr_t rreq = b.recv(dst, size, size);
        ASSERT_EQ(UCS_OK, a.wait(a.send(src, size, size), &b)) << size;
        ASSERT_EQ(UCS_OK, b.wait(rreq, &a)) << size;
        bytes_t got = dst_cuda ? cpy_test::device_bytes(dst, size) :
                      bytes_t((uint8_t*)dst, (uint8_t*)dst + size);
        EXPECT_EQ(data, got) << size << " bytes, " << (src_cuda ? "cuda" : "host")
                             << " -> " << (dst_cuda ? "cuda" : "host");
    }
};


TEST_F(cpy_ucp_test, worker_has_cuda_memory_type_endpoint) {
    ucp_side side;
    ASSERT_EQ(UCS_OK, side.init_status);
    ASSERT_EQ(UCS_OK, side.worker_status);

    char *info    = nullptr;
    size_t length = 0;
    FILE *stream  = open_memstream(&info, &length);
    ucp_worker_print_info(side.worker, stream);
    fclose(stream);
    std::string text(info, length);
    free(info);

    size_t ep_pos = text.find("UCP endpoint for NVIDIA GPU memory");
    ASSERT_NE(std::string::npos, ep_pos) << text;
    EXPECT_NE(std::string::npos, text.find("cu_cpy_ns/cuda_cpy", ep_pos)) << text;
}


/* The application's own cuMemAlloc / cuMemCreate memory is CUDA, host
 * memory is host, with nothing configured */
TEST_F(cpy_ucp_test, detects_application_memory) {
    test::cuda_legacy_buffer legacy(1 << 20);
    test::cuda_vmm_buffer vmm(1 << 20);
    std::vector<char> heap(1 << 20);
    char stack[256];
    ucp_side side;
    ASSERT_TRUE(side.ok());

    EXPECT_EQ(UCS_NO, ucs_global_opts.enable_memtype_cache)
        << "the copy MD turns the unfilled memtype cache off";
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, side.detect(legacy.ptr(), 4096));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, side.detect((char*)legacy.ptr() + 8192, 10));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, side.detect(vmm.ptr(), vmm.size()));
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, side.detect(heap.data(), heap.size()));
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, side.detect(stack, sizeof(stack)));
}


/* ucp_mem_map(ALLOCATE, CUDA): VMM memory cu_ipc_ns can export as an fd */
TEST_F(cpy_ucp_test, mem_map_allocates_exportable_cuda_memory) {
    ucp_side side;
    ASSERT_TRUE(side.ok());

    ucp_mem_map_params_t params = {};
    ucp_mem_attr_t attr;
    ucp_mem_h memh;
    params.field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                         UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                         UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                         UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.length      = 3 << 20;
    params.flags       = UCP_MEM_MAP_ALLOCATE;
    params.memory_type = UCS_MEMORY_TYPE_CUDA;
    ASSERT_EQ(UCS_OK, ucp_mem_map(side.context, &params, &memh));

    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH |
                      UCP_MEM_ATTR_FIELD_MEM_TYPE;
    ASSERT_EQ(UCS_OK, ucp_mem_query(memh, &attr));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, attr.mem_type);
    EXPECT_GE(attr.length, params.length);

    EXPECT_TRUE(cpy_test::posix_fd_exportable(attr.address));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, side.detect(attr.address, 100));

    bytes_t data = cpy_test::pattern(attr.length, 11);
    cpy_test::device_write(attr.address, data);
    EXPECT_EQ(data, cpy_test::device_bytes(attr.address, attr.length));
    EXPECT_EQ(UCS_OK, ucp_mem_unmap(side.context, memh));
}


/* Two workers of one process: eager messages pack and unpack CUDA buffers
 * through the memory-type endpoint, large ones go rendezvous */
TEST_F(cpy_ucp_test, tag_messages_between_cuda_buffers) {
    const size_t max = 3 << 20;
    test::cuda_vmm_buffer send_dev(max), recv_dev(max);
    std::vector<char> send_host(max), recv_host(max);
    ucp_side a, b;
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(UCS_OK, a.connect(b.address()));

    for (size_t size : {(size_t)8, (size_t)5000, (size_t)300000, max}) {
        tag_roundtrip(a, b, send_dev.ptr(), recv_dev.ptr(), size, true, true);
        tag_roundtrip(a, b, send_host.data(), recv_dev.ptr(), size, false, true);
        tag_roundtrip(a, b, send_dev.ptr(), recv_host.data(), size, true, false);
    }
}


/* Peer: receives tag messages into CUDA memory and reports whether each
 * one holds the expected bytes. UCX_TLS comes from the environment. */
TEST_PEER_ROLE(cpy_tag_recv)
{
    uint64_t size;
    bytes_t address;

    if (!test::cuda_init()) {
        return 1;
    }
    ucp_side side;
    address = side.ok() ? side.address() : bytes_t();
    if (!side.ok() || !chan.send(address.data(), address.size())) {
        return 2;
    }

    while (side.chan_recv(chan, &size, sizeof(size)) && (size != 0)) {
        test::cuda_legacy_buffer buffer(size);
        int32_t result = side.wait(side.recv(buffer.ptr(), size, size), nullptr);
        if ((result == UCS_OK) &&
            (cpy_test::device_bytes(buffer.ptr(), size) !=
             cpy_test::pattern(size, (unsigned)size))) {
            result = UCS_ERR_MESSAGE_TRUNCATED; /* stands for "wrong bytes" */
        }
        if (!chan.send_obj(result)) {
            return 3;
        }
    }
    return 0;
}


/* Another process over shared memory or TCP: the CUDA data crosses through
 * host buffers that UCP fills and drains with the memory-type endpoint
 * (eager, and the rendezvous pipeline), with protocols v1 and v2 */
class cpy_ucp_peer_test :
        public cpy_ucp_test,
        public ::testing::WithParamInterface<std::tuple<const char*,
                                                        const char*>> {
};


TEST_P(cpy_ucp_peer_test, tag_messages_to_cuda_buffers) {
    const char *tls   = std::get<0>(GetParam());
    const char *proto = std::get<1>(GetParam());
    const size_t max  = 4 << 20;
    test::cuda_vmm_buffer send_dev(max);
    char peer_addr[4096];

    setenv("UCX_TLS", tls, 1);
    setenv("UCX_PROTO_ENABLE", proto, 1);
    test::peer peer("cpy_tag_recv");
    unsetenv("UCX_TLS");
    unsetenv("UCX_PROTO_ENABLE");

    ucp_side side(tls, proto);
    ASSERT_TRUE(side.ok());
    ssize_t len = peer.chan().recv(peer_addr, sizeof(peer_addr), TIMEOUT_MS);
    ASSERT_GT(len, 0);
    ASSERT_EQ(UCS_OK, side.connect(bytes_t(peer_addr, peer_addr + len)));

    for (uint64_t size : {(uint64_t)8, (uint64_t)8192, (uint64_t)100000,
                          (uint64_t)max}) {
        cpy_test::device_write(send_dev.ptr(), cpy_test::pattern(size, size));
        ASSERT_TRUE(peer.chan().send_obj(size));
        EXPECT_EQ(UCS_OK, side.wait(side.send(send_dev.ptr(), size, size),
                                    nullptr)) << size;
        int32_t result = UCS_ERR_LAST;
        ASSERT_TRUE(side.chan_recv(peer.chan(), &result, sizeof(result)));
        EXPECT_EQ(UCS_OK, result) << tls << ": " << size << " bytes";
    }

    side.close_ep();
    uint64_t done = 0;
    peer.chan().send_obj(done);
    EXPECT_EQ(0, peer.wait());
}

INSTANTIATE_TEST_SUITE_P(tls, cpy_ucp_peer_test,
                         ::testing::Combine(
                                 ::testing::Values("sm,cu_cpy_ns",
                                                   "tcp,cu_cpy_ns"),
                                 ::testing::Values("n", "y")));


/* Peer: with UCX_MEMTYPE_CACHE=y in its environment, reports how UCP
 * classifies UCP-allocated CUDA memory, the application's own CUDA memory
 * and host memory */
TEST_PEER_ROLE(cpy_cache_on)
{
    std::vector<char> host(4096);
    int32_t types[3];

    if (!test::cuda_init()) {
        return 1;
    }
    test::cuda_legacy_buffer own(1 << 20);
    ucp_side side;
    if (!side.ok()) {
        return 2;
    }

    ucp_mem_map_params_t params = {};
    ucp_mem_attr_t attr;
    ucp_mem_h memh;
    params.field_mask  = UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                         UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                         UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.length      = 1 << 20;
    params.flags       = UCP_MEM_MAP_ALLOCATE;
    params.memory_type = UCS_MEMORY_TYPE_CUDA;
    attr.field_mask    = UCP_MEM_ATTR_FIELD_ADDRESS;
    if ((ucp_mem_map(side.context, &params, &memh) != UCS_OK) ||
        (ucp_mem_query(memh, &attr) != UCS_OK)) {
        return 3;
    }

    types[0] = side.detect((char*)attr.address + 4096, 100);
    types[1] = side.detect(own.ptr(), 100);
    types[2] = side.detect(host.data(), host.size());
    ucp_mem_unmap(side.context, memh);
    return chan.send(types, sizeof(types)) ? 0 : 4;
}


/* UCX_MEMTYPE_CACHE set by the user is kept: the cache knows memory that
 * UCP allocated through the copy MD, and nothing else (docs/ucp.md) */
TEST_F(cpy_ucp_test, memtype_cache_kept_when_configured) {
    int32_t types[3];

    setenv("UCX_MEMTYPE_CACHE", "y", 1);
    test::peer peer("cpy_cache_on");
    unsetenv("UCX_MEMTYPE_CACHE");

    ASSERT_EQ((ssize_t)sizeof(types),
              peer.chan().recv(types, sizeof(types), TIMEOUT_MS));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, types[0]) << "allocated by UCP";
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, types[1])
        << "the application's own cuMemAlloc: unknown to the cache";
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, types[2]) << "host";
    EXPECT_EQ(0, peer.wait());
}

} // namespace
