/*
 * The ucx_perftest CUDA allocator. This binary defines and exports the table
 * that ucx_perftest exports (cpy/perftest.dynlist), so the module's
 * constructor fills its CUDA slot here as it does in ucx_perftest; the
 * allocator is then driven the way libperf drives it.
 */
#include "cpy_test.h"
#include "common/peer.h"

extern "C" {
#include <tools/perf/lib/libperf_int.h>
#include "cuda_ipc_ns_rkey.h"
}

#include <cstdlib>
#include <memory>
#include <string>


/* the table of tools/perf/lib/libperf.c, declared by libperf.h */
const ucx_perf_allocator_t *ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_LAST];


namespace {

using cpy_test::bytes_t;


unsigned group_index_1(void *rte_group)
{
    return 1;
}


/* a perftest context as libperf sets it up for a UCT test on m_md */
class cpy_perftest_test : public cpy_test::md {
protected:
    void SetUp() override
    {
        cpy_test::md::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }

        m_allocator = ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_CUDA];
        ASSERT_NE(nullptr, m_allocator) << "CUDA slot not filled";

        m_rte.group_index    = group_index_1;
        m_perf.reset((ucx_perf_context_t*)calloc(1, sizeof(ucx_perf_context_t)));
        m_perf->params.rte   = &m_rte;
        m_perf->uct.md       = m_md;
        ASSERT_EQ(UCS_OK, m_allocator->init(m_perf.get()));
    }

    /* uct_alloc of @a length bytes with UCX_CUDA_CPY_NS_MEM_ALLOC=@a mode */
    ucs_status_t alloc_mode(const char *mode, size_t length,
                            uct_allocated_memory_t *mem)
    {
        ucs_status_t status;

        setenv("UCX_CUDA_CPY_NS_MEM_ALLOC", mode, 1);
        status = m_allocator->uct_alloc(m_perf.get(), length,
                                        UCT_MD_MEM_ACCESS_ALL, mem);
        unsetenv("UCX_CUDA_CPY_NS_MEM_ALLOC");
        return status;
    }

    /* @a length bytes of the pattern of @a seed written to @a mem and read
     * back through the allocator */
    void expect_round_trip(const uct_allocated_memory_t &mem, size_t length,
                           unsigned seed)
    {
        bytes_t data = cpy_test::pattern(length, seed), back(length);

        m_allocator->memcpy(mem.address, UCS_MEMORY_TYPE_CUDA, data.data(),
                            UCS_MEMORY_TYPE_HOST, length);
        m_allocator->memcpy(back.data(), UCS_MEMORY_TYPE_HOST, mem.address,
                            UCS_MEMORY_TYPE_CUDA, length);
        EXPECT_EQ(data, back);
    }

    /* @a address, of memory freed, is host memory again */
    void expect_freed(const void *address)
    {
        ucs_memory_type_t type;

        ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, address, 8, &type));
        EXPECT_EQ(UCS_MEMORY_TYPE_HOST, type) << "freed";
    }

    struct free_delete {
        void operator()(void *ptr) const { free(ptr); }
    };

    const ucx_perf_allocator_t                         *m_allocator = nullptr;
    ucx_perf_rte_t                                     m_rte        = {};
    std::unique_ptr<ucx_perf_context_t, free_delete>   m_perf;
};


TEST_F(cpy_perftest_test, fills_only_the_cuda_slot) {
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, m_allocator->mem_type);
    for (int type = 0; type < UCS_MEMORY_TYPE_LAST; ++type) {
        if (type != UCS_MEMORY_TYPE_CUDA) {
            EXPECT_EQ(nullptr, ucx_perf_mem_type_allocators[type]) << type;
        }
    }
}


/* The device init makes current for rte group index `group`, and the
 * number of devices; in a peer, which has its own device count */
struct init_device_result {
    int32_t status = -1;
    int32_t count  = 0;
    int32_t device = -1;
    int32_t ctx_is_primary = 0; /* the device's primary context is current */
};

unsigned group_index_from_env(void *rte_group)
{
    return (unsigned)atoi(getenv("CPY_PERFTEST_GROUP_INDEX"));
}

} // namespace

TEST_PEER_ROLE(cpy_perftest_init_device)
{
    init_device_result res;
    ucx_perf_rte_t rte = {};
    ucx_perf_context_t perf = {};
    CUcontext ctx = nullptr, primary = nullptr;
    CUdevice device;

    const ucx_perf_allocator_t *allocator =
            ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_CUDA];
    if ((allocator == nullptr) || !test::cuda_init()) {
        chan.send_obj(res);
        return 1;
    }
    /* nothing current: init alone must make the context current */
    uct_cuda_ipc_ns_drv.cuCtxSetCurrent(nullptr);
    rte.group_index  = group_index_from_env;
    perf.params.rte  = &rte;
    res.status       = allocator->init(&perf);
    if ((uct_cuda_ipc_ns_drv.cuDeviceGetCount(&res.count) == CUDA_SUCCESS) &&
        (uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS) &&
        (ctx != nullptr) &&
        (uct_cuda_ipc_ns_drv.cuCtxGetDevice(&device) == CUDA_SUCCESS)) {
        res.device = device;
        if (uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRetain(&primary, device) ==
            CUDA_SUCCESS) {
            res.ctx_is_primary = (primary == ctx);
            uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRelease(device);
        }
    }
    chan.send_obj(res);
    return 0;
}

namespace {

/* Sets an environment variable for the test's peers, restored after */
class scoped_setenv {
public:
    scoped_setenv(const char *name, const std::string &value) : m_name(name)
    {
        const char *old = getenv(name);
        m_had = (old != nullptr);
        m_old = m_had ? old : "";
        setenv(name, value.c_str(), 1);
    }
    ~scoped_setenv()
    {
        if (m_had) {
            setenv(m_name, m_old.c_str(), 1);
        } else {
            unsetenv(m_name);
        }
    }
private:
    const char  *m_name;
    bool        m_had;
    std::string m_old;
};

init_device_result init_in_peer(unsigned group_index)
{
    scoped_setenv group("CPY_PERFTEST_GROUP_INDEX",
                        std::to_string(group_index));
    test::peer runner("cpy_perftest_init_device");
    init_device_result res;
    EXPECT_TRUE(runner.chan().recv_obj(res));
    EXPECT_EQ(0, runner.wait());
    return res;
}


/* init makes the primary context of the rte group's device current, as
 * cudaSetDevice(): group index modulo the device count. Runs in peers with
 * three emulated devices (CUDASIM_DEVICE_COUNT, read at the first cuInit) */
TEST_F(cpy_perftest_test, init_sets_the_group_device) {
    scoped_setenv three("CUDASIM_DEVICE_COUNT", "3");

    init_device_result res = init_in_peer(1);
    ASSERT_EQ(UCS_OK, res.status);
    if (res.count < 3) {
        GTEST_SKIP() << "needs 3 devices (CUDASIM_DEVICE_COUNT of the "
                        "emulator); the driver has " << res.count;
    }
    EXPECT_EQ(1, res.device);
    EXPECT_TRUE(res.ctx_is_primary);

    res = init_in_peer(2);
    ASSERT_EQ(UCS_OK, res.status);
    EXPECT_EQ(2, res.device);
    EXPECT_TRUE(res.ctx_is_primary);

    res = init_in_peer(4);
    ASSERT_EQ(UCS_OK, res.status);
    EXPECT_EQ(1, res.device) << "4 % 3";
    EXPECT_TRUE(res.ctx_is_primary);
}


/* UCT buffers: VMM POSIX-fd memory registered with the tested MD, here the
 * copy MD; then with the cu_ipc_ns MD, which exports it */
TEST_F(cpy_perftest_test, uct_alloc_memcpy_memset_free) {
    const size_t length = 100000;
    uct_allocated_memory_t mem;

    ASSERT_EQ(UCS_OK, m_allocator->uct_alloc(m_perf.get(), length,
                                             UCT_MD_MEM_ACCESS_ALL, &mem));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, mem.mem_type);
    EXPECT_EQ(m_md, mem.md);
    EXPECT_EQ(length, mem.length);

    EXPECT_TRUE(cpy_test::posix_fd_exportable(mem.address));

    EXPECT_EQ(mem.address, m_allocator->memset(mem.address, 0xab, length));
    EXPECT_EQ(bytes_t(length, 0xab), cpy_test::device_bytes(mem.address, length));

    expect_round_trip(mem, length, 17);

    void *address = mem.address;
    m_allocator->uct_free(m_perf.get(), &mem);
    ASSERT_NO_FATAL_FAILURE(expect_freed(address));

    uct_component_h ipc = test::find_component("cuda_ipc_ns");
    uct_md_config_t *config;
    ASSERT_NE(nullptr, ipc);
    ASSERT_EQ(UCS_OK, uct_md_config_read(ipc, NULL, NULL, &config));
    ASSERT_EQ(UCS_OK, uct_md_open(ipc, "cuda_ipc_ns", config, &m_perf->uct.md));
    uct_config_release(config);
    EXPECT_EQ(UCS_OK, m_allocator->uct_alloc(m_perf.get(), length,
                                             UCT_MD_MEM_ACCESS_ALL, &mem));
    m_allocator->uct_free(m_perf.get(), &mem);
    uct_md_close(m_perf->uct.md);
}


TEST_F(cpy_perftest_test, uct_alloc_legacy) {
    uct_allocated_memory_t mem;

    ASSERT_EQ(UCS_OK, alloc_mode("legacy", 4096, &mem));

    EXPECT_EQ(1u, cpy_test::pointer_attribute<unsigned>(
                          mem.address,
                          CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE));
    m_allocator->uct_free(m_perf.get(), &mem);
}

/* pool: memory of the device's stream-ordered pool, as cudaMallocAsync;
 * bytes go in and out, and the free returns it */
TEST_F(cpy_perftest_test, uct_alloc_pool) {
    uct_allocated_memory_t mem;

    ASSERT_EQ(UCS_OK, alloc_mode("pool", 100000, &mem));

    EXPECT_NE(nullptr, cpy_test::pointer_attribute<CUmemoryPool>(
                               mem.address, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE));
    expect_round_trip(mem, 100000, 29);

    void *address = mem.address;
    m_allocator->uct_free(m_perf.get(), &mem);
    ASSERT_NO_FATAL_FAILURE(expect_freed(address));
}

/* chunked: allocations of the granularity mapped back to back, one
 * registration of cu_ipc_ns over all of them (docs/framework-memory.md) */
TEST_F(cpy_perftest_test, uct_alloc_chunked) {
    uct_allocated_memory_t mem;
    size_t gran;

    ASSERT_EQ(UCS_OK, alloc_mode("chunked", 4ul << 20, &mem));

    /* each chunk its own mapping of its own allocation (MAPPING_*,
     * MEMORY_BLOCK_ID); RANGE_* is the reservation they share (cuda.h) */
    gran = cpy_test::pointer_attribute<size_t>(
            mem.address, CU_POINTER_ATTRIBUTE_MAPPING_SIZE);
    ASSERT_LT(gran, (size_t)(4ul << 20)) << "one allocation per chunk";
    void *second = UCS_PTR_BYTE_OFFSET(mem.address, gran);
    EXPECT_EQ((uint64_t)(uintptr_t)second,
              cpy_test::pointer_attribute<uint64_t>(
                      second, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR));
    EXPECT_EQ((uint64_t)(uintptr_t)mem.address,
              cpy_test::pointer_attribute<uint64_t>(
                      second, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR));
    EXPECT_GE(cpy_test::pointer_attribute<size_t>(
                      second, CU_POINTER_ATTRIBUTE_RANGE_SIZE),
              (size_t)(4ul << 20));
    EXPECT_NE(cpy_test::pointer_attribute<unsigned long long>(
                      mem.address, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID),
              cpy_test::pointer_attribute<unsigned long long>(
                      second, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID));
    EXPECT_TRUE(cpy_test::posix_fd_exportable(second));

    /* bytes across the chunks */
    expect_round_trip(mem, 4ul << 20, 23);

    /* cu_ipc_ns registers every chunk in one key */
    uct_component_h ipc = test::find_component("cuda_ipc_ns");
    uct_md_config_t *config;
    uct_md_h ipc_md;
    uct_mem_h memh;
    ASSERT_NE(nullptr, ipc);
    ASSERT_EQ(UCS_OK, uct_md_config_read(ipc, NULL, NULL, &config));
    ASSERT_EQ(UCS_OK, uct_md_open(ipc, "cuda_ipc_ns", config, &ipc_md));
    uct_config_release(config);
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(ipc_md, mem.address, 4ul << 20,
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    uint8_t key[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uct_cuda_ipc_ns_rkey_info_t info;
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(ipc_md, memh, key));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(key, sizeof(key), &info));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_CHUNKS, info.handle_type);
    EXPECT_EQ((4ul << 20) / gran, info.handle.posix.num_chunks);
    EXPECT_EQ((uint64_t)(uintptr_t)mem.address, info.base);
    EXPECT_EQ((uint64_t)(4ul << 20), info.length);
    uct_md_mem_dereg(ipc_md, memh);
    uct_md_close(ipc_md);

    void *address = mem.address;
    m_allocator->uct_free(m_perf.get(), &mem);
    ASSERT_NO_FATAL_FAILURE(expect_freed(address));
    ASSERT_NO_FATAL_FAILURE(expect_freed(second));
}

} // namespace


namespace {

/* what the copy peer saw right after each call returned */
struct copy_done_result {
    int32_t copy_idle   = -1; /* cuStreamQuery(default stream) after memcpy */
    int32_t copy_data   = 0;  /* the data, read beside the default stream */
    int32_t memset_idle = -1; /* cuStreamQuery(default stream) after memset */
    int32_t memset_data = 0;
};

/* device memory read through a non-blocking stream, which does not wait for
 * the default stream */
bool device_holds(CUdeviceptr dev, const bytes_t &expected, CUstream stream)
{
    bytes_t back(expected.size(), (uint8_t)~expected[0]);

    return (uct_cuda_ipc_ns_drv.cuMemcpyDtoHAsync(back.data(), dev,
                                                  back.size(), stream) ==
            CUDA_SUCCESS) &&
           (uct_cuda_ipc_ns_drv.cuStreamSynchronize(stream) == CUDA_SUCCESS) &&
           (back == expected);
}

} // namespace

TEST_PEER_ROLE(cpy_copy_done_peer)
{
    const size_t size = 4096;
    const bytes_t data = cpy_test::pattern(size, 29), set(size, 0x5a);
    const ucx_perf_allocator_t *allocator =
            ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_CUDA];
    copy_done_result res;
    CUdeviceptr dev;
    CUstream stream;

    if ((allocator == nullptr) || !test::cuda_init() ||
        (uct_cuda_ipc_ns_drv.cuMemAlloc(&dev, size) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) !=
         CUDA_SUCCESS)) {
        chan.send_obj(res);
        return 1;
    }
    allocator->memcpy((void*)dev, UCS_MEMORY_TYPE_CUDA, data.data(),
                      UCS_MEMORY_TYPE_HOST, size);
    res.copy_idle = uct_cuda_ipc_ns_drv.cuStreamQuery(nullptr);
    res.copy_data = device_holds(dev, data, stream);
    allocator->memset((void*)dev, 0x5a, size);
    res.memset_idle = uct_cuda_ipc_ns_drv.cuStreamQuery(nullptr);
    res.memset_data = device_holds(dev, set, stream);
    uct_cuda_ipc_ns_drv.cuStreamDestroy(stream);
    uct_cuda_ipc_ns_drv.cuMemFree(dev);
    return chan.send_obj(res) ? 0 : 2;
}

/* A copy or memset through cu_cpy_ns is done when it returns (cuMemcpy to
 * device memory and cuMemsetD8 alone return before the data lands). Each
 * emulated copy of the peer takes 100 ms, so one reported done too early
 * is still on the default stream when the peer looks (no bound on time: a
 * correct copy passes however slow the machine) */
TEST_F(cpy_perftest_test, copy_and_memset_are_done_when_they_return) {
    copy_done_result res;
    {
        scoped_setenv latency("CUDASIM_COPY_LATENCY_US", "100000");
        test::peer peer("cpy_copy_done_peer");
        ASSERT_TRUE(peer.chan().recv_obj(res));
        EXPECT_EQ(0, peer.wait());
    }
    EXPECT_EQ(CUDA_SUCCESS, res.copy_idle)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)res.copy_idle);
    EXPECT_TRUE(res.copy_data);
    EXPECT_EQ(CUDA_SUCCESS, res.memset_idle)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)res.memset_idle);
    EXPECT_TRUE(res.memset_data);
}
