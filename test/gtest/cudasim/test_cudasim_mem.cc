/*
 * cudasim tests: legacy allocations, address ranges, pointer attributes,
 * VMM create/map/export/import within one process.
 */
#include "cudasim_test.h"
#include "common/scoped_nofile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstring>
#include <vector>

using namespace cudasim_test;


class test_cudasim_mem : public base {
protected:
    static CUmemAllocationProp vmm_prop(unsigned handle_types) {
        CUmemAllocationProp prop  = {};
        prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id          = 0;
        prop.requestedHandleTypes = (CUmemAllocationHandleType)handle_types;
        return prop;
    }

    static CUmemAccessDesc rw_access() {
        CUmemAccessDesc access = {};
        access.location.type   = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id     = 0;
        access.flags           = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        return access;
    }
};


TEST_F(test_cudasim_mem, legacy_alloc_and_range)
{
    const size_t size = 100000;
    CUdeviceptr ptr, base_addr = 0;
    size_t range = 0;
    std::vector<unsigned char> host(size, 0xaa), back(size);

    CU_OK(cuMemAlloc, &ptr, size);
    ASSERT_NE(0u, ptr);
    CU_OK(cuMemGetAddressRange, &base_addr, &range, ptr + 1234);
    EXPECT_EQ(ptr, base_addr);
    EXPECT_GE(range, size);
    CU_OK(cuMemGetAddressRange, nullptr, &range, ptr);

    CU_OK(cuMemcpyHtoD, ptr, host.data(), size);
    CU_OK(cuMemcpyDtoH, back.data(), ptr, size);
    EXPECT_EQ(host, back);

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree, ptr + 16);
    CU_OK(cuMemFree, ptr);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree, ptr);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemAlloc, &ptr, 0);
}


TEST_F(test_cudasim_mem, address_range_of_host_memory)
{
    SKIP_IF_NOT_EMULATOR();
    std::vector<char> host(4096);
    CUdeviceptr base_addr;
    size_t range;

    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange, &base_addr, &range,
              (CUdeviceptr)host.data());
}


TEST_F(test_cudasim_mem, legacy_pointer_attributes)
{
    const size_t size = 1 << 20;
    unsigned long long buffer_id = 0, buffer_id2 = 0;
    unsigned int mem_type = 0, legacy = 0, managed = 1, mapped = 0;
    CUdeviceptr ptr, ptr2, start = 0;
    CUcontext ctx = nullptr, cur;
    size_t range  = 0;
    int ordinal   = -1;

    CU_OK(cuCtxGetCurrent, &cur);
    CU_OK(cuMemAlloc, &ptr, size);
    CU_OK(cuMemAlloc, &ptr2, size);

    CU_OK(cuPointerGetAttribute, &mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
          ptr + 10);
    EXPECT_EQ((unsigned)CU_MEMORYTYPE_DEVICE, mem_type);
    CU_OK(cuPointerGetAttribute, &ctx, CU_POINTER_ATTRIBUTE_CONTEXT, ptr);
    EXPECT_EQ(cur, ctx);
    CU_OK(cuPointerGetAttribute, &ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
          ptr);
    EXPECT_EQ(0, ordinal);
    CU_OK(cuPointerGetAttribute, &legacy,
          CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr);
    EXPECT_EQ(1u, legacy);
    CU_OK(cuPointerGetAttribute, &managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr);
    EXPECT_EQ(0u, managed);
    CU_OK(cuPointerGetAttribute, &start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
          ptr + 100);
    EXPECT_EQ(ptr, start);
    CU_OK(cuPointerGetAttribute, &range, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
          ptr + 100);
    EXPECT_GE(range, size);
    CU_OK(cuPointerGetAttribute, &mapped, CU_POINTER_ATTRIBUTE_MAPPED, ptr);
    EXPECT_EQ(1u, mapped);

    CU_OK(cuPointerGetAttribute, &buffer_id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
          ptr);
    CU_OK(cuPointerGetAttribute, &buffer_id2, CU_POINTER_ATTRIBUTE_BUFFER_ID,
          ptr2);
    EXPECT_NE(buffer_id, buffer_id2);

    /* several at once */
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_CONTEXT};
    unsigned int mt = 0;
    int ord         = -1;
    unsigned long long bid = 0;
    CUcontext c     = nullptr;
    void *data[]    = {&mt, &ord, &bid, &c};
    CU_OK(cuPointerGetAttributes, 4, attrs, data, ptr2);
    EXPECT_EQ((unsigned)CU_MEMORYTYPE_DEVICE, mt);
    EXPECT_EQ(0, ord);
    EXPECT_EQ(buffer_id2, bid);
    EXPECT_EQ(cur, c);

    CU_OK(cuMemFree, ptr);
    CU_OK(cuMemFree, ptr2);
}


TEST_F(test_cudasim_mem, host_pointer_attributes)
{
    std::vector<char> host(4096);
    unsigned int mem_type = 12345;
    CUcontext ctx         = (CUcontext)0x1;
    int ordinal;

    /* unregistered host memory: an error for a single attribute ... */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttribute, &mem_type,
              CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)host.data());

    /* ... but "default NULL values" from cuPointerGetAttributes */
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_CONTEXT,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[] = {&mem_type, &ctx, &ordinal};
    CU_OK(cuPointerGetAttributes, 3, attrs, data, (CUdeviceptr)host.data());
    EXPECT_EQ(0u, mem_type);
    EXPECT_EQ(nullptr, ctx);
}


TEST_F(test_cudasim_mem, legacy_ipc_same_process)
{
    CUipcMemHandle handle;
    CUdeviceptr ptr, mapped;

    CU_OK(cuMemAlloc, &ptr, 1 << 20);
    CU_OK(cuIpcGetMemHandle, &handle, ptr);
    /* the exporting process cannot open its own handle */
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuIpcOpenMemHandle, &mapped, handle,
              CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    CU_OK(cuMemFree, ptr);
}


TEST_F(test_cudasim_mem, vmm_not_legacy_ipc_capable)
{
    test::cuda_vmm_buffer buf(granularity());
    unsigned int legacy = 1, handle_types = 0;
    CUipcMemHandle handle;
    int ordinal = -1;

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle, &handle,
              (CUdeviceptr)buf.ptr());
    CU_OK(cuPointerGetAttribute, &legacy,
          CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
          (CUdeviceptr)buf.ptr());
    EXPECT_EQ(0u, legacy);
    CU_OK(cuPointerGetAttribute, &handle_types,
          CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, (CUdeviceptr)buf.ptr());
    EXPECT_TRUE(handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CU_OK(cuPointerGetAttribute, &ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
          (CUdeviceptr)buf.ptr());
    EXPECT_EQ(0, ordinal);
}


TEST_F(test_cudasim_mem, legacy_allowed_handle_types)
{
    SKIP_IF_NOT_EMULATOR();
    test::cuda_legacy_buffer buf(4096);
    unsigned int handle_types = 123;

    CU_OK(cuPointerGetAttribute, &handle_types,
          CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, (CUdeviceptr)buf.ptr());
    EXPECT_EQ((unsigned)CU_MEM_HANDLE_TYPE_NONE, handle_types);
}


TEST_F(test_cudasim_mem, vmm_granularity_and_create_errors)
{
    const size_t gran = granularity();
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle handle;
    size_t rec = 0;
    int count  = 0;

    ASSERT_GT(gran, 0u);
    CU_OK(cuMemGetAllocationGranularity, &rec, &prop,
          CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    EXPECT_GE(rec, gran);

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemCreate, &handle, gran + 1, &prop,
              0);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemCreate, &handle, 0, &prop, 0);

    CU_OK(cuDeviceGetCount, &count);
    prop.location.id = count;
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuMemCreate, &handle, gran, &prop, 0);

    /* releasing a handle that is not one is undefined on a GPU (it may
     * crash): asked of the emulator only */
    if (is_emulator()) {
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemRelease,
                  (CUmemGenericAllocationHandle)0xdead000);
    }
}


TEST_F(test_cudasim_mem, vmm_fabric_not_supported)
{
    int fabric = 1;

    CU_OK(cuDeviceGetAttribute, &fabric,
          CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0);
    if (fabric) {
        GTEST_SKIP() << "this device supports fabric handles";
    }
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_FABRIC);
    CUmemGenericAllocationHandle handle;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate, &handle, granularity(),
              &prop, 0);
}


TEST_F(test_cudasim_mem, vmm_map_access_export_import)
{
    const size_t gran = granularity();
    const size_t size = 2 * gran;
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemAccessDesc access   = rw_access();
    CUmemGenericAllocationHandle handle, imported, retained;
    CUmemAllocationProp got_prop;
    CUdeviceptr va1, va2, base_addr;
    unsigned long long id1 = 0, id2 = 0;
    std::vector<unsigned char> host(size), back(size);
    size_t range;
    int fd = -1;

    CU_OK(cuMemCreate, &handle, size, &prop, 0);
    CU_OK(cuMemGetAllocationPropertiesFromHandle, &got_prop, handle);
    EXPECT_EQ(CU_MEM_ALLOCATION_TYPE_PINNED, got_prop.type);
    EXPECT_EQ(0, got_prop.location.id);
    EXPECT_TRUE(got_prop.requestedHandleTypes &
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

    CU_OK(cuMemAddressReserve, &va1, size, 0, 0, 0);
    EXPECT_EQ(0u, va1 % gran);
    CU_OK(cuMemMap, va1, size, 0, handle, 0);
    EXPECT_NE(CUDA_SUCCESS,
              uct_cuda_ipc_ns_drv.cuMemMap(va1, size, 0, handle, 0));
    CU_OK(cuMemSetAccess, va1, size, &access, 1);

    for (size_t i = 0; i < size; ++i) {
        host[i] = (unsigned char)(i * 13);
    }
    CU_OK(cuMemcpyHtoD, va1, host.data(), size);

    CU_OK(cuMemGetAddressRange, &base_addr, &range, va1 + gran + 5);
    EXPECT_EQ(va1, base_addr);
    EXPECT_EQ(size, range);

    /* export: a new fd, owned by the caller */
    CU_OK(cuMemExportToShareableHandle, &fd, handle,
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    ASSERT_GE(fd, 0);
    CU_OK(cuMemImportFromShareableHandle, &imported, (void*)(uintptr_t)fd,
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    /* the import did not take the fd */
    EXPECT_EQ(0, fcntl(fd, F_GETFD) < 0);
    close(fd);

    CU_OK(cuMemAddressReserve, &va2, size, 0, 0, 0);
    CU_OK(cuMemMap, va2, size, 0, imported, 0);
    CU_OK(cuMemRelease, imported); /* the mapping keeps it alive */
    CU_OK(cuMemSetAccess, va2, size, &access, 1);
    CU_OK(cuMemcpyDtoH, back.data(), va2, size);
    EXPECT_EQ(host, back);

    /* same bytes through both mappings */
    CU_OK(cuMemsetD8, va2 + 100, 0x5a, 10);
    CU_OK(cuMemcpyDtoH, back.data(), va1, size);
    EXPECT_EQ(0x5a, back[105]);
    EXPECT_EQ(host[99], back[99]);

    CU_OK(cuPointerGetAttribute, &id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, va1);
    CU_OK(cuPointerGetAttribute, &id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, va2);
    EXPECT_NE(0u, id1);

    /* retain a handle from a mapped address */
    CU_OK(cuMemRetainAllocationHandle, &retained, (void*)(va2 + 17));
    CU_OK(cuMemGetAllocationPropertiesFromHandle, &got_prop, retained);
    CU_OK(cuMemRelease, retained);
    if (is_emulator()) {
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree, va2, size);
    }
    CU_OK(cuMemUnmap, va2, size);
    CU_OK(cuMemAddressFree, va2, size);

    CU_OK(cuMemRelease, handle);
    /* still mapped at va1: the memory stays */
    CU_OK(cuMemcpyDtoH, back.data(), va1, size);
    EXPECT_EQ(0x5a, back[100]);
    CU_OK(cuMemUnmap, va1, size);
    CU_OK(cuMemAddressFree, va1, size);
}


/* pages of [ptr, ptr + size) in memory (mincore), before any access */
static size_t resident_pages(CUdeviceptr ptr, size_t size)
{
    const size_t page = sysconf(_SC_PAGESIZE);
    std::vector<unsigned char> vec((size + page - 1) / page);
    size_t n = 0;

    if (mincore((void*)ptr, size, vec.data()) != 0) {
        return 0;
    }
    for (unsigned char v : vec) {
        n += v & 1;
    }
    return n;
}


/* Memory is resident from its allocation on, as on a GPU: no benchmark or
 * test pays a first-touch cost (page allocation, zeroing) at its first copy */
TEST_F(test_cudasim_mem, memory_committed_at_allocation)
{
    SKIP_IF_NOT_EMULATOR();
    const size_t size = 2 * granularity(), page = sysconf(_SC_PAGESIZE);
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemAccessDesc access   = rw_access();
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va, legacy;
    struct stat st;
    int fd = -1;

    CU_OK(cuMemCreate, &handle, size, &prop, 0);
    CU_OK(cuMemExportToShareableHandle, &fd, handle,
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    ASSERT_EQ(0, fstat(fd, &st));
    close(fd);
    EXPECT_GE((size_t)st.st_blocks * 512, size) << "cuMemCreate: not allocated";
    CU_OK(cuMemAddressReserve, &va, size, 0, 0, 0);
    CU_OK(cuMemMap, va, size, 0, handle, 0);
    CU_OK(cuMemSetAccess, va, size, &access, 1);
    EXPECT_EQ(size / page, resident_pages(va, size));
    CU_OK(cuMemUnmap, va, size);
    CU_OK(cuMemAddressFree, va, size);
    CU_OK(cuMemRelease, handle);

    CU_OK(cuMemAlloc, &legacy, size);
    EXPECT_EQ(size / page, resident_pages(legacy, size)) << "cuMemAlloc";
    CU_OK(cuMemFree, legacy);
}


/* the descriptor the next open() gets; -1 when none is free */
static int lowest_free_fd()
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        close(fd);
    }
    return fd;
}


/*
 * A driver holds no descriptor per allocation (README.md, "Descriptors"):
 * created allocations keep their memfds at 1024 and above while the soft
 * RLIMIT_NOFILE leaves room there, an import keeps none; with no room
 * above 1024, a new allocation's memfd counts against the limit (never
 * more lenient than the driver).
 */
TEST_F(test_cudasim_mem, vmm_descriptors_out_of_the_application_range)
{
    SKIP_IF_NOT_EMULATOR();
    const CUmemAllocationHandleType posix_fd =
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    const size_t gran = granularity(), count = 8;
    const int floor   = 1024;
    CUmemAllocationProp prop = vmm_prop(posix_fd);
    CUmemAccessDesc access   = rw_access();
    std::vector<CUmemGenericAllocationHandle> handles(count);
    CUmemGenericAllocationHandle imported, extra, again;
    std::vector<unsigned char> back(gran);
    struct rlimit lim;
    CUdeviceptr va, va2;
    int fd, unused;

    ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &lim));
    if (lim.rlim_cur <= (rlim_t)floor + count) {
        GTEST_SKIP() << "the soft RLIMIT_NOFILE (" << lim.rlim_cur
                     << ") leaves no room above " << floor;
    }
    const int free0 = lowest_free_fd(), low0 = test::count_open_fds_below(floor);
    ASSERT_GE(free0, 0);

    CU_OK(cuMemAddressReserve, &va, count * gran, 0, 0, 0);
    for (size_t i = 0; i < count; ++i) {
        CU_OK(cuMemCreate, &handles[i], gran, &prop, 0);
        CU_OK(cuMemMap, va + i * gran, gran, 0, handles[i], 0);
    }
    CU_OK(cuMemSetAccess, va, count * gran, &access, 1);
    CU_OK(cuMemsetD8, va, 0x3c, count * gran);
    EXPECT_EQ(free0, lowest_free_fd()) << "an allocation took a low fd";
    EXPECT_EQ(low0, test::count_open_fds_below(floor));

    /* an exported fd is the caller's, a new descriptor as any; the import
     * keeps none of its own and cannot export it again */
    CU_OK(cuMemExportToShareableHandle, &fd, handles[3], posix_fd, 0);
    EXPECT_EQ(free0, fd);
    CU_OK(cuMemImportFromShareableHandle, &imported, (void*)(uintptr_t)fd,
          posix_fd);
    close(fd);
    EXPECT_EQ(low0, test::count_open_fds_below(floor)) << "the import kept a descriptor";
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemExportToShareableHandle, &unused,
              imported, posix_fd, 0);
    CU_OK(cuMemAddressReserve, &va2, gran, 0, 0, 0);
    CU_OK(cuMemMap, va2, gran, 0, imported, 0);
    CU_OK(cuMemRelease, imported); /* the mapping keeps the memory */
    CU_OK(cuMemSetAccess, va2, gran, &access, 1);
    CU_OK(cuMemsetD8, va2 + 10, 0x77, 5);
    CU_OK(cuMemcpyDtoH, back.data(), va + 3 * gran, gran);
    EXPECT_EQ(0x3c, back[9]);
    EXPECT_EQ(0x77, back[10]);
    EXPECT_EQ(0x77, back[14]);
    EXPECT_EQ(0x3c, back[15]);
    CU_OK(cuMemUnmap, va2, gran);
    CU_OK(cuMemAddressFree, va2, gran);

    {
        /* one free descriptor under the limit, none above 1024: a new
         * allocation's memfd takes it, and the next allocation finds none */
        test::scoped_nofile nofile(free0 + 1);
        ASSERT_TRUE(nofile.ok());
        CU_OK(cuMemCreate, &extra, gran, &prop, 0);
        EXPECT_EQ(-1, lowest_free_fd());
        CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemCreate, &again, gran, &prop,
                  0);
        CU_OK(cuMemRelease, extra);
    }
    EXPECT_EQ(free0, lowest_free_fd());

    CU_OK(cuMemUnmap, va, count * gran);
    CU_OK(cuMemAddressFree, va, count * gran);
    for (CUmemGenericAllocationHandle handle : handles) {
        CU_OK(cuMemRelease, handle);
    }
    EXPECT_EQ(low0, test::count_open_fds_below(floor));
}


TEST_F(test_cudasim_mem, vmm_two_maps_contiguous)
{
    const size_t gran = granularity();
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemAccessDesc access   = rw_access();
    CUmemGenericAllocationHandle h1, h2;
    std::vector<unsigned char> host(2 * gran, 0x11), back(2 * gran);
    CUdeviceptr va;

    CU_OK(cuMemCreate, &h1, gran, &prop, 0);
    CU_OK(cuMemCreate, &h2, gran, &prop, 0);
    CU_OK(cuMemAddressReserve, &va, 2 * gran, 0, 0, 0);
    CU_OK(cuMemMap, va, gran, 0, h1, 0);
    CU_OK(cuMemMap, va + gran, gran, 0, h2, 0);
    CU_OK(cuMemSetAccess, va, 2 * gran, &access, 1);
    /* a copy may span both mappings */
    CU_OK(cuMemcpyHtoD, va, host.data(), 2 * gran);
    CU_OK(cuMemcpyDtoH, back.data(), va, 2 * gran);
    EXPECT_EQ(host, back);
    CU_OK(cuMemUnmap, va, 2 * gran);
    CU_OK(cuMemAddressFree, va, 2 * gran);
    CU_OK(cuMemRelease, h1);
    CU_OK(cuMemRelease, h2);
}


TEST_F(test_cudasim_mem, vmm_export_not_requested)
{
    const size_t gran = granularity();
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle handle;
    int fd = -1;

    CU_OK(cuMemCreate, &handle, gran, &prop, 0);
    CUresult res = uct_cuda_ipc_ns_drv.cuMemExportToShareableHandle(
            &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    EXPECT_TRUE((res == CUDA_ERROR_INVALID_VALUE) ||
                (res == CUDA_ERROR_NOT_PERMITTED) ||
                (res == CUDA_ERROR_NOT_SUPPORTED))
            << uct_cuda_ipc_ns_cu_error_name(res);
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemExportToShareableHandle, &fd,
              handle, CU_MEM_HANDLE_TYPE_FABRIC, 0);
    CU_OK(cuMemRelease, handle);
}


TEST_F(test_cudasim_mem, vmm_import_foreign_fd)
{
    CUmemGenericAllocationHandle handle;
    int pipefd[2];

    ASSERT_EQ(0, pipe(pipefd));
    CUresult res = uct_cuda_ipc_ns_drv.cuMemImportFromShareableHandle(
            &handle, (void*)(uintptr_t)pipefd[0],
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    EXPECT_NE(CUDA_SUCCESS, res);
    close(pipefd[0]);
    close(pipefd[1]);

    int fd = open("/dev/null", O_RDONLY);
    ASSERT_GE(fd, 0);
    res = uct_cuda_ipc_ns_drv.cuMemImportFromShareableHandle(
            &handle, (void*)(uintptr_t)fd,
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    EXPECT_NE(CUDA_SUCCESS, res);
    close(fd);
}


TEST_F(test_cudasim_mem, vmm_emulated_access_checks)
{
    SKIP_IF_NOT_EMULATOR();
    const size_t gran = granularity();
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemAccessDesc access   = rw_access();
    CUmemGenericAllocationHandle handle;
    std::vector<unsigned char> host(gran);
    CUdeviceptr va;

    EXPECT_EQ(2u << 20, gran); /* like real GPUs, unless overridden */
    CU_OK(cuMemCreate, &handle, gran, &prop, 0);
    CU_OK(cuMemAddressReserve, &va, 2 * gran, 0, 0, 0);
    /* reserved, not mapped */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD, va, host.data(), 16);
    CU_OK(cuMemMap, va, gran, 0, handle, 0);
    /* mapped, no access yet */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD, va, host.data(), 16);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess, va, 2 * gran, &access,
              1);
    CU_OK(cuMemSetAccess, va, gran, &access, 1);
    CU_OK(cuMemcpyHtoD, va, host.data(), 16);
    /* the copy may still be in flight: done before the unmap */
    CU_OK(cuStreamSynchronize, nullptr);
    /* past the mapping */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD, va + gran - 8,
              host.data(), 16);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemUnmap, va, 2 * gran);
    CU_OK(cuMemUnmap, va, gran);
    CU_OK(cuMemAddressFree, va, 2 * gran);
    CU_OK(cuMemRelease, handle);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemRelease, handle);
}


TEST_F(test_cudasim_mem, emulated_copy_bounds)
{
    SKIP_IF_NOT_EMULATOR();
    std::vector<unsigned char> host(8192);
    CUdeviceptr a, b;

    CU_OK(cuMemAlloc, &a, 4096);
    CU_OK(cuMemAlloc, &b, 4096);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD, a, host.data(), 4097);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH, host.data(), a + 1, 4096);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD, a, b + 4000, 100);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemsetD8, a + 4000, 0, 100);
    /* a DtoD needs device memory on both sides */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD, a,
              (CUdeviceptr)host.data(), 16);
    CU_OK(cuMemcpyDtoD, a, b, 4096);
    CU_OK(cuMemFree, a);
    CU_OK(cuMemFree, b);
}
