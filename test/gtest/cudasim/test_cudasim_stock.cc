/*
 * cudasim tests: the driver entries UCX's own CUDA modules (libuct_cuda,
 * libucm_cuda of a UCX built with CUDA) import beyond the module's driver
 * table or look up: cuCtxGetId, cuDevicePrimaryCtxGetState, cuDeviceTotalMem,
 * cuMemAllocManaged, cuMemRangeGetAttribute, cuPointerSetAttribute
 * (cuCtxSetFlags/cuCtxGetFlags and what SYNC_MEMOPS does:
 * test_cudasim_sync_memops in test_cudasim_stream.cc). Each
 * is reached through cuGetProcAddress, as the module's table reaches the
 * others, so the same checks run on a real driver; what the emulator
 * answers where a GPU may differ (managed memory) skips there.
 */
#include "cudasim_test.h"

#include <dlfcn.h>
#include <thread>
#include <vector>

using namespace cudasim_test;


namespace {

/* entry @a name of the driver the tests use, as of CUDA 12.0 */
template <typename T> T *entry(const char *name)
{
    typedef __typeof__(cuGetProcAddress) get_proc_t;
    get_proc_t *get_proc = (get_proc_t*)driver_sym("cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult status;
    void *func = nullptr;

    if ((get_proc == nullptr) ||
        (get_proc(name, &func, 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                  &status) != CUDA_SUCCESS)) {
        return nullptr;
    }
    return (T*)func;
}

CUdeviceptr dptr(const test::cuda_legacy_buffer &buf)
{
    return (CUdeviceptr)buf.ptr();
}

typedef __typeof__(cuCtxGetId) ctx_get_id_t;
typedef __typeof__(cuDevicePrimaryCtxGetState) primary_state_t;
typedef __typeof__(cuDeviceTotalMem) total_mem_t;
typedef __typeof__(cuMemAllocManaged) alloc_managed_t;
typedef __typeof__(cuMemRangeGetAttribute) range_attr_t;
typedef __typeof__(cuPointerSetAttribute) ptr_set_attr_t;

} // namespace


class test_cudasim_stock : public base {
};


/* In a fresh process (no one else retains the primary context): inactive
 * until retained, active while retained; a context released to 0 is
 * destroyed, and the next retain makes one with another id (cuda.h: "The
 * Id is unique for the life of the program") */
TEST_PEER_ROLE(cudasim_primary_ctx_lifecycle)
{
    typedef __typeof__(cuInit) init_t;
    typedef __typeof__(cuDevicePrimaryCtxRetain) retain_t;
    typedef __typeof__(cuDevicePrimaryCtxRelease) release_t;
    void *dl = dlopen(driver_path(), RTLD_NOW | RTLD_LOCAL);
    /* active before, active retained, active released; results of GetId
     * of the released context; ids of the first and second context */
    long long r[7];
    unsigned long long id1 = 0, id2 = 0, id3 = 0;
    CUcontext ctx1, ctx2;
    unsigned flags = 1;
    int active = -1;

    if (dl == nullptr) {
        return 1;
    }
    init_t *init              = (init_t*)dlsym(dl, "cuInit");
    retain_t *retain          = (retain_t*)dlsym(dl, "cuDevicePrimaryCtxRetain");
    release_t *release        = (release_t*)dlsym(dl,
                                                  "cuDevicePrimaryCtxRelease_v2");
    primary_state_t *state    = (primary_state_t*)dlsym(
            dl, "cuDevicePrimaryCtxGetState");
    ctx_get_id_t *get_id      = (ctx_get_id_t*)dlsym(dl, "cuCtxGetId");
    if (!init || !retain || !release || !state || !get_id ||
        (init(0) != CUDA_SUCCESS)) {
        return 2;
    }
    r[0] = (state(0, &flags, &active) == CUDA_SUCCESS) ? active : -1;
    if ((retain(&ctx1, 0) != CUDA_SUCCESS) ||
        (get_id(ctx1, &id1) != CUDA_SUCCESS)) {
        return 3;
    }
    r[1] = (state(0, &flags, &active) == CUDA_SUCCESS) ? active : -1;
    r[6] = flags;
    if (release(0) != CUDA_SUCCESS) {
        return 4;
    }
    r[2] = (state(0, &flags, &active) == CUDA_SUCCESS) ? active : -1;
    r[3] = get_id(ctx1, &id3);
    if ((retain(&ctx2, 0) != CUDA_SUCCESS) ||
        (get_id(ctx2, &id2) != CUDA_SUCCESS)) {
        return 5;
    }
    r[4] = (long long)id1;
    r[5] = (long long)id2;
    return chan.send(r, sizeof(r)) ? 0 : 6;
}

TEST_F(test_cudasim_stock, primary_context_state_and_id)
{
    long long r[7];
    test::peer peer("cudasim_primary_ctx_lifecycle");

    ASSERT_TRUE(peer.chan().recv_obj(r));
    EXPECT_EQ(0, r[0]) << "active before the first retain";
    EXPECT_EQ(1, r[1]) << "active while retained";
    EXPECT_EQ(0, r[6]) << "flags of a primary context never set";
    EXPECT_EQ(0, r[2]) << "active after the last release";
    EXPECT_EQ(CUDA_ERROR_CONTEXT_IS_DESTROYED, r[3])
            << "cuCtxGetId of a destroyed context";
    EXPECT_NE(r[4], r[5]) << "the new context has the old one's id";
    EXPECT_EQ(0, peer.wait());
}


TEST_F(test_cudasim_stock, context_id_of_the_current_context)
{
    ctx_get_id_t *get_id = entry<ctx_get_id_t>("cuCtxGetId");
    primary_state_t *state =
            entry<primary_state_t>("cuDevicePrimaryCtxGetState");
    unsigned long long id = 0, cur_id = 0;
    unsigned flags;
    CUcontext cur;
    int active;

    ASSERT_NE(nullptr, get_id);
    ASSERT_NE(nullptr, state);
    CU_OK(cuCtxGetCurrent, &cur);
    ASSERT_EQ(CUDA_SUCCESS, get_id(cur, &id));
    ASSERT_EQ(CUDA_SUCCESS, get_id(nullptr, &cur_id)) << "NULL: the current";
    EXPECT_EQ(id, cur_id);
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, get_id(cur, nullptr));
    std::thread([&] {
        /* a new thread has no current context */
        EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, get_id(nullptr, &cur_id));
    }).join();

    ASSERT_EQ(CUDA_SUCCESS, state(0, &flags, &active));
    EXPECT_EQ(1, active) << "the fixture retains device 0's";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, state(0, nullptr, &active));
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, state(0, &flags, nullptr));
    EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, state(1000, &flags, &active));
}


TEST_F(test_cudasim_stock, total_memory)
{
    total_mem_t *total = entry<total_mem_t>("cuDeviceTotalMem");
    CUdeviceptr ptr;
    size_t bytes = 0;

    ASSERT_NE(nullptr, total);
    EXPECT_EQ((void*)total, driver_sym("cuDeviceTotalMem_v2"));
    ASSERT_EQ(CUDA_SUCCESS, total(&bytes, 0));
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, total(nullptr, 0));
    EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, total(&bytes, 1000));
    if (!is_emulator()) {
        EXPECT_GT(bytes, 0u);
        return;
    }
    /* the emulator's device memory is CUDASIM_DEVICE_MEM: all of it and
     * no more can be allocated */
    ASSERT_GT(bytes, 0u);
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc, &ptr, bytes + 1);
}


/* the emulated device has no managed memory, and says so consistently:
 * the attributes answer 0 and cuMemAllocManaged CUDA_ERROR_NOT_SUPPORTED;
 * no range is managed memory, so cuMemRangeGetAttribute refuses them all */
TEST_F(test_cudasim_stock, no_managed_memory)
{
    alloc_managed_t *alloc = entry<alloc_managed_t>("cuMemAllocManaged");
    range_attr_t *range_attr = entry<range_attr_t>("cuMemRangeGetAttribute");
    test::cuda_legacy_buffer buf(4096);
    CUdeviceptr ptr = 0;
    int managed = -1, concurrent = -1, loc;

    ASSERT_NE(nullptr, alloc);
    ASSERT_NE(nullptr, range_attr);
    CU_OK(cuDeviceGetAttribute, &managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
          0);
    CU_OK(cuDeviceGetAttribute, &concurrent,
          CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0);
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, alloc(&ptr, 4096, 0)) << "flags";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
              alloc(&ptr, 4096, CU_MEM_ATTACH_SINGLE)) << "flags";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, alloc(nullptr, 4096,
                                              CU_MEM_ATTACH_GLOBAL));
    if (managed) {
        ASSERT_FALSE(is_emulator()) << "the emulator has no managed memory";
        ASSERT_EQ(CUDA_SUCCESS, alloc(&ptr, 4096, CU_MEM_ATTACH_GLOBAL));
        CU_OK(cuMemFree, ptr);
        GTEST_SKIP() << "this GPU has managed memory";
    }
    EXPECT_EQ(0, concurrent);
    EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED,
              alloc(&ptr, 4096, CU_MEM_ATTACH_GLOBAL));
    EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, alloc(&ptr, 4096, CU_MEM_ATTACH_HOST));
    std::thread([&] {
        EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT,
                  alloc(&ptr, 4096, CU_MEM_ATTACH_GLOBAL)) << "no context";
    }).join();

    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
              range_attr(&loc, sizeof(loc),
                         CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, dptr(buf),
                         4096)) << "not managed memory";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
              range_attr(&loc, 2, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                         dptr(buf), 4096)) << "dataSize must be 4";
}


/* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: 0 until set, set and unset by
 * cuPointerSetAttribute, the only attribute it sets */
TEST_F(test_cudasim_stock, sync_memops_attribute)
{
    ptr_set_attr_t *set_attr = entry<ptr_set_attr_t>("cuPointerSetAttribute");
    test::cuda_legacy_buffer buf(4096), other(4096);
    unsigned one = 1, zero = 0, value = 7;
    std::vector<char> host(64);

    ASSERT_NE(nullptr, set_attr);
    CU_OK(cuPointerGetAttribute, &value, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
          dptr(buf));
    EXPECT_EQ(0u, value) << "not set yet";
    ASSERT_EQ(CUDA_SUCCESS,
              set_attr(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr(buf)));
    CU_OK(cuPointerGetAttribute, &value, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
          dptr(buf) + 100);
    EXPECT_EQ(1u, value);
    CU_OK(cuPointerGetAttribute, &value, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
          dptr(other));
    EXPECT_EQ(0u, value) << "set on another allocation";
    ASSERT_EQ(CUDA_SUCCESS,
              set_attr(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr(buf)));
    CU_OK(cuPointerGetAttribute, &value, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
          dptr(buf));
    EXPECT_EQ(0u, value) << "unset";

    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
              set_attr(&one, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dptr(buf)))
            << "not an attribute that can be set";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
              set_attr(nullptr, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr(buf)));
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
              set_attr(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                       (CUdeviceptr)host.data())) << "not CUDA memory";
}
