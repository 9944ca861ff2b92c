/*
 * UCP with the module: worker creation (memory-type endpoint over
 * cu_cpy_ns), memory-type detection of the application's own CUDA memory
 * with UCX_MEMTYPE_CACHE unset, CUDA allocation through ucp_mem_map, and tag
 * messages between CUDA buffers in one process and across two.
 */
#include "cpy_test.h"
#include "common/peer.h"
#include "common/uct_util.h"
#include "common/ucp_side.h"

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

using test::ucp_side;
using test::UCP_TIMEOUT_MS;


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
        if (!test::cu_cpy_ns_absent_reason().empty()) {
            GTEST_SKIP() << test::cu_cpy_ns_absent_reason();
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
    ssize_t len = peer.chan().recv(peer_addr, sizeof(peer_addr), UCP_TIMEOUT_MS);
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
              peer.chan().recv(types, sizeof(types), UCP_TIMEOUT_MS));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, types[0]) << "allocated by UCP";
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, types[1])
        << "the application's own cuMemAlloc: unknown to the cache";
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, types[2]) << "host";
    EXPECT_EQ(0, peer.wait());
}

} // namespace
