/*
 * cudasim tests: legacy allocations, address ranges, pointer attributes,
 * VMM create/map/export/import within one process, registered host memory.
 */
#include "cudasim_test.h"
#include "common/scoped_nofile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstring>
#include <thread>
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


/* the importer's length check maps one granule past the end, and takes
 * this failure for "not longer" (ipc/map/cuda_ipc_ns_fd_map.c) */
TEST_F(test_cudasim_mem, vmm_map_past_the_end_not_supported)
{
    const size_t gran = granularity();
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;

    CU_OK(cuMemCreate, &handle, gran, &prop, 0);
    CU_OK(cuMemAddressReserve, &va, 2 * gran, 0, 0, 0);
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemMap, va, 2 * gran, 0, handle, 0);
    CU_OK(cuMemMap, va, gran, 0, handle, 0);
    CU_OK(cuMemUnmap, va, gran);
    CU_OK(cuMemAddressFree, va, 2 * gran);
    CU_OK(cuMemRelease, handle);
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
            << uct_cuda_ipc_ns_driver_error_name(res);
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


/* ---- registered host memory (cuMemHostRegister) ------------------------- */

/* Pages of our own (mmap): a registration pins whole pages, so a buffer
 * that shared one with the heap could collide with another registration.
 * Unregisters (if still registered) and unmaps at the end, so that a
 * failed test leaves no registration behind at an address mmap reuses. */
class host_pages {
public:
    explicit host_pages(size_t size, int prot = PROT_READ | PROT_WRITE,
                        int fd = -1) : m_size(size) {
        m_ptr = (char*)mmap(nullptr, size, prot,
                            (fd < 0) ? (MAP_PRIVATE | MAP_ANONYMOUS) :
                                       MAP_SHARED, fd, 0);
        if (m_ptr == MAP_FAILED) {
            throw std::runtime_error("mmap failed");
        }
    }

    ~host_pages() {
        if (uct_cuda_ipc_ns_drv.cuMemHostUnregister != nullptr) {
            (void)uct_cuda_ipc_ns_drv.cuMemHostUnregister(m_ptr);
        }
        munmap(m_ptr, m_size);
    }

    char *ptr() const { return m_ptr; }
    CUdeviceptr dptr() const { return (CUdeviceptr)m_ptr; }

private:
    char   *m_ptr;
    size_t m_size;
};


/* the memory type the driver reports for ptr, 0 when it does not know it */
static unsigned int memory_type(CUdeviceptr ptr)
{
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    unsigned int type        = 12345;
    void *data               = &type;

    if (TEST_CU_ENTRY(cuPointerGetAttributes)(1, &attr, &data, ptr) !=
        CUDA_SUCCESS) {
        return 12345;
    }
    return type;
}


TEST_F(test_cudasim_mem, host_register_round_trip)
{
    const size_t size = 4 * sysconf(_SC_PAGESIZE);
    host_pages host(size);

    EXPECT_EQ(0u, memory_type(host.dptr()));
    CU_OK(cuMemHostRegister, host.ptr(), size, CU_MEMHOSTREGISTER_PORTABLE);
    EXPECT_EQ((unsigned)CU_MEMORYTYPE_HOST, memory_type(host.dptr()));
    CU_OK(cuMemHostUnregister, host.ptr());
    /* pageable again */
    EXPECT_EQ(0u, memory_type(host.dptr()));
    CU_EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister,
              host.ptr());
    /* and registrable again, with other flags */
    CU_OK(cuMemHostRegister, host.ptr(), size,
          CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    EXPECT_EQ((unsigned)CU_MEMORYTYPE_HOST, memory_type(host.dptr()));
    CU_OK(cuMemHostUnregister, host.ptr());
    EXPECT_EQ(0u, memory_type(host.dptr()));
}


TEST_F(test_cudasim_mem, host_register_pointer_attributes)
{
    const size_t page = sysconf(_SC_PAGESIZE), size = 4 * page;
    const CUdeviceptr inner_off = page + 123;
    host_pages host(size);
    CUdeviceptr inner = host.dptr() + inner_off, dev_ptr = 0;
    unsigned int mem_type = 0;
    void *host_ptr        = nullptr;
    CUcontext ctx = nullptr, cur;

    CU_OK(cuCtxGetCurrent, &cur);
    CU_OK(cuMemHostRegister, host.ptr(), size, CU_MEMHOSTREGISTER_PORTABLE);

    /* one at a time ... */
    CU_OK(cuPointerGetAttribute, &mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
          inner);
    EXPECT_EQ((unsigned)CU_MEMORYTYPE_HOST, mem_type);
    CU_OK(cuPointerGetAttribute, &dev_ptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
          inner);
    EXPECT_EQ(inner, dev_ptr); /* unified addressing */
    CU_OK(cuPointerGetAttribute, &host_ptr, CU_POINTER_ATTRIBUTE_HOST_POINTER,
          inner);
    EXPECT_EQ((void*)inner, host_ptr);
    CU_OK(cuPointerGetAttribute, &ctx, CU_POINTER_ATTRIBUTE_CONTEXT, inner);
    EXPECT_EQ(cur, ctx);

    /* ... and several at once, at the first and the last byte */
    for (CUdeviceptr p : {host.dptr(), host.dptr() + size - 1}) {
        CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                       CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                       CU_POINTER_ATTRIBUTE_CONTEXT};
        unsigned int mt = 0;
        void *hp        = nullptr;
        CUdeviceptr dp  = 0;
        CUcontext c     = nullptr;
        void *data[]    = {&mt, &hp, &dp, &c};

        CU_OK(cuPointerGetAttributes, 4, attrs, data, p);
        EXPECT_EQ((unsigned)CU_MEMORYTYPE_HOST, mt);
        EXPECT_EQ((void*)p, hp);
        EXPECT_EQ(p, dp);
        EXPECT_EQ(cur, c);
    }

    if (is_emulator()) {
        unsigned long long bid = 0;
        unsigned int legacy = 1, mapped = 0;
        CUdeviceptr start   = 0;
        size_t range        = 0;
        int ordinal         = -1;

        CU_OK(cuPointerGetAttribute, &ordinal,
              CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inner);
        EXPECT_EQ(0, ordinal);
        CU_OK(cuPointerGetAttribute, &start,
              CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inner);
        EXPECT_EQ(host.dptr(), start);
        CU_OK(cuPointerGetAttribute, &range, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
              inner);
        EXPECT_EQ(size, range);
        CU_OK(cuPointerGetAttribute, &legacy,
              CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, inner);
        EXPECT_EQ(0u, legacy);
        CU_OK(cuPointerGetAttribute, &mapped, CU_POINTER_ATTRIBUTE_MAPPED,
              inner);
        EXPECT_EQ(1u, mapped);
        CU_OK(cuPointerGetAttribute, &bid, CU_POINTER_ATTRIBUTE_BUFFER_ID,
              inner);
        EXPECT_NE(0u, bid);
        /* registered host memory is still no device allocation */
        CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange, &start, &range,
                  inner);
    }

    CU_OK(cuMemHostUnregister, host.ptr());
    /* unregistered pageable memory answers as before */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttribute, &mem_type,
              CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inner);
    EXPECT_EQ(0u, memory_type(inner));
}


TEST_F(test_cudasim_mem, host_register_twice_already_registered)
{
    const size_t page = sysconf(_SC_PAGESIZE), size = 4 * page;
    host_pages host(size);

    CU_OK(cuMemHostRegister, host.ptr(), 2 * page,
          CU_MEMHOSTREGISTER_PORTABLE);
    /* the same range, a range inside, one that straddles its end */
    CU_EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cuMemHostRegister,
              host.ptr(), 2 * page, CU_MEMHOSTREGISTER_PORTABLE);
    CU_EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cuMemHostRegister,
              host.ptr() + page, page, CU_MEMHOSTREGISTER_PORTABLE);
    CU_EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cuMemHostRegister,
              host.ptr() + page, 2 * page, CU_MEMHOSTREGISTER_PORTABLE);
    if (is_emulator()) {
        host_pages other(2 * page);

        /* the driver pins pages: no byte in common, but a page */
        CU_OK(cuMemHostRegister, other.ptr(), page + 100,
              CU_MEMHOSTREGISTER_PORTABLE);
        CU_EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cuMemHostRegister,
                  other.ptr() + page + 200, 100, CU_MEMHOSTREGISTER_PORTABLE);
        CU_OK(cuMemHostUnregister, other.ptr());
    }
    /* the pages after it are free */
    CU_OK(cuMemHostRegister, host.ptr() + 2 * page, 2 * page,
          CU_MEMHOSTREGISTER_PORTABLE);
    CU_OK(cuMemHostUnregister, host.ptr() + 2 * page);
    CU_OK(cuMemHostUnregister, host.ptr());
    CU_OK(cuMemHostRegister, host.ptr(), size, CU_MEMHOSTREGISTER_PORTABLE);
    CU_OK(cuMemHostUnregister, host.ptr());
}


TEST_F(test_cudasim_mem, host_unregister_not_registered)
{
    const size_t page = sysconf(_SC_PAGESIZE), size = 4 * page;
    host_pages host(size), other(page);

    /* never registered */
    CU_EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister,
              other.ptr());

    CU_OK(cuMemHostRegister, host.ptr(), size, CU_MEMHOSTREGISTER_PORTABLE);
    /* an address inside is not the registered base: an invalid value
     * (driver 580), and nothing happens */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostUnregister, host.ptr() + 1);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostUnregister,
              host.ptr() + page);
    EXPECT_EQ((unsigned)CU_MEMORYTYPE_HOST, memory_type(host.dptr() + page));
    CU_OK(cuMemHostUnregister, host.ptr());
    CU_EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister,
              host.ptr());
}


TEST_F(test_cudasim_mem, host_register_invalid_value)
{
    const size_t page = sysconf(_SC_PAGESIZE), size = 2 * page;
    host_pages host(size);
    int read_only = -1;

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, nullptr, size,
              CU_MEMHOSTREGISTER_PORTABLE);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, host.ptr(), 0,
              CU_MEMHOSTREGISTER_PORTABLE);
    /* flags beyond PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, host.ptr(), size,
              0x10);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, host.ptr(), size,
              CU_MEMHOSTREGISTER_PORTABLE | 0x80000000u);
    EXPECT_EQ(0u, memory_type(host.dptr())) << "a refused range is registered";

    /* READ_ONLY needs the device attribute (cuda.h) */
    CU_OK(cuDeviceGetAttribute, &read_only,
          CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 0);
    if (read_only == 0) {
        CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemHostRegister, host.ptr(),
                  size, CU_MEMHOSTREGISTER_READ_ONLY);
    }

    /* not mapped: a hole in the middle, or nothing at all */
    ASSERT_EQ(0, munmap(host.ptr() + page, page));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, host.ptr(), size,
              CU_MEMHOSTREGISTER_PORTABLE);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, host.ptr() + page,
              page, CU_MEMHOSTREGISTER_PORTABLE);
    EXPECT_EQ(0u, memory_type(host.dptr())) << "a refused range is registered";

    if (is_emulator()) {
        /* pages the driver cannot pin for writing; the error code is the
         * emulator's choice */
        host_pages none(page, PROT_NONE), ro(page, PROT_READ);
        CUdeviceptr dev;

        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, none.ptr(),
                  page, CU_MEMHOSTREGISTER_PORTABLE);
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, ro.ptr(), page,
                  CU_MEMHOSTREGISTER_PORTABLE);
        /* no process memory here is a device's I/O space */
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister,
                  host.ptr(), page, CU_MEMHOSTREGISTER_IOMEMORY);
        /* the emulator's device memory is process memory, not host memory */
        CU_OK(cuMemAlloc, &dev, page);
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister, (void*)dev,
                  page, CU_MEMHOSTREGISTER_PORTABLE);
        CU_OK(cuMemFree, dev);
        EXPECT_EQ(0u, memory_type(none.dptr()));
        EXPECT_EQ(0u, memory_type(ro.dptr()));
        EXPECT_EQ(0u, memory_type(host.dptr()));

#ifdef MADV_POPULATE_WRITE
        /* a page past the end of its file cannot be faulted in (SIGBUS):
         * seen where the kernel can populate (Linux 5.14+) */
        if (madvise(host.ptr(), page, MADV_POPULATE_WRITE) == 0) {
            int fd = memfd_create("cudasim_test_short", MFD_CLOEXEC);

            ASSERT_GE(fd, 0);
            ASSERT_EQ(0, ftruncate(fd, page));
            {
                host_pages shrt(size, PROT_READ | PROT_WRITE, fd);

                CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemHostRegister,
                          shrt.ptr(), size, CU_MEMHOSTREGISTER_PORTABLE);
                EXPECT_EQ(0u, memory_type(shrt.dptr()));
                CU_OK(cuMemHostRegister, shrt.ptr(), page,
                      CU_MEMHOSTREGISTER_PORTABLE);
                CU_OK(cuMemHostUnregister, shrt.ptr());
            }
            close(fd);
        }
#endif
    }
}


TEST_F(test_cudasim_mem, host_register_needs_context)
{
    const size_t size = sysconf(_SC_PAGESIZE);
    host_pages host(size);
    CUcontext ctx;

    CU_OK(cuCtxGetCurrent, &ctx);
    std::thread thr([&] {
        CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemHostRegister, host.ptr(),
                  size, CU_MEMHOSTREGISTER_PORTABLE);
        CU_EXPECT(CUDA_SUCCESS, cuCtxPushCurrent, ctx);
        CU_EXPECT(CUDA_SUCCESS, cuMemHostRegister, host.ptr(), size,
                  CU_MEMHOSTREGISTER_PORTABLE);
        CU_EXPECT(CUDA_SUCCESS, cuCtxSetCurrent, nullptr); /* pops */
    });
    thr.join();
    /* what the thread registered is registered for every thread */
    EXPECT_EQ((unsigned)CU_MEMORYTYPE_HOST, memory_type(host.dptr()));
    /* a portable registration goes without a context too (driver 580) */
    std::thread unreg([&] {
        CU_EXPECT(CUDA_SUCCESS, cuMemHostUnregister, host.ptr());
    });
    unreg.join();
    EXPECT_EQ(0u, memory_type(host.dptr()));
}


/* Copies through a registered memfd mapping, as the module's pinned host
 * ring makes them: the bytes land in the shared file */
TEST_F(test_cudasim_mem, host_register_memfd_async_copies)
{
    const size_t size = 256 * 1024; /* past the non-temporal copy threshold */
    std::vector<unsigned char> pattern(size), back(size), file(size);
    CUdeviceptr dev;
    CUstream stream;
    int fd;

    for (size_t i = 0; i < size; ++i) {
        pattern[i] = (unsigned char)(i * 7 + 3);
    }
    fd = memfd_create("cudasim_test_hostreg", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(0, ftruncate(fd, size));
    {
        host_pages host(size, PROT_READ | PROT_WRITE, fd);

        CU_OK(cuMemHostRegister, host.ptr(), size, CU_MEMHOSTREGISTER_PORTABLE);
        CU_OK(cuMemAlloc, &dev, size);
        CU_OK(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
        memcpy(host.ptr(), pattern.data(), size);

        /* host to device */
        CU_OK(cuMemcpyAsync, dev, host.dptr(), size, stream);
        CU_OK(cuStreamSynchronize, stream);
        CU_OK(cuMemcpyDtoH, back.data(), dev, size);
        EXPECT_TRUE(pattern == back) << "HtoD from registered memory";

        /* device to host: the same bytes come back into zeroed memory */
        memset(host.ptr(), 0, size);
        CU_OK(cuMemcpyAsync, host.dptr(), dev, size, stream);
        CU_OK(cuStreamSynchronize, stream);
        EXPECT_EQ(0, memcmp(pattern.data(), host.ptr(), size))
                << "DtoH to registered memory";
        ASSERT_EQ((ssize_t)size, pread(fd, file.data(), size, 0));
        EXPECT_TRUE(pattern == file) << "DtoH: not in the shared file";

        /* part of it, inside the registered range */
        memset(host.ptr(), 0, size);
        CU_OK(cuMemcpyAsync, host.dptr() + 4096 + 5, dev + 100, 10000, stream);
        CU_OK(cuStreamSynchronize, stream);
        EXPECT_EQ(0, memcmp(pattern.data() + 100, host.ptr() + 4096 + 5,
                            10000));
        EXPECT_EQ(0, host.ptr()[4096 + 4]);
        EXPECT_EQ(0, host.ptr()[4096 + 5 + 10000]);

        CU_OK(cuStreamDestroy, stream);
        CU_OK(cuMemFree, dev);
        CU_OK(cuMemHostUnregister, host.ptr());
    }
    close(fd);
}


TEST_F(test_cudasim_mem, host_get_device_pointer)
{
    typedef __typeof__(cuGetProcAddress) get_proc_t;
    typedef __typeof__(cuMemHostGetDevicePointer) get_dptr_t;
    get_proc_t *get_proc = (get_proc_t*)driver_sym("cuGetProcAddress_v2");
    const size_t page = sysconf(_SC_PAGESIZE), size = 2 * page;
    host_pages mapped(size), unmapped(size);
    CUdriverProcAddressQueryResult status;
    get_dptr_t *get_dptr;
    CUdeviceptr dptr;
    void *func;

    ASSERT_NE(nullptr, get_proc);
    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemHostGetDevicePointer", &func,
                                     CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,
                                     &status));
    get_dptr = (get_dptr_t*)func;

    CU_OK(cuMemHostRegister, mapped.ptr(), size,
          CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    dptr = 0;
    EXPECT_EQ(CUDA_SUCCESS, get_dptr(&dptr, mapped.ptr(), 0));
    EXPECT_EQ(mapped.dptr(), dptr); /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM */
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, get_dptr(&dptr, mapped.ptr(), 1));
    /* not registered */
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, get_dptr(&dptr, unmapped.ptr(), 0));

    if (is_emulator()) {
        dptr = 0;
        EXPECT_EQ(CUDA_SUCCESS, get_dptr(&dptr, mapped.ptr() + page + 3, 0));
        EXPECT_EQ(mapped.dptr() + page + 3, dptr);
        /* cuda.h: DEVICEMAP is needed */
        CU_OK(cuMemHostRegister, unmapped.ptr(), size,
              CU_MEMHOSTREGISTER_PORTABLE);
        EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
                  get_dptr(&dptr, unmapped.ptr(), 0));
        CU_OK(cuMemHostUnregister, unmapped.ptr());
    }
    CU_OK(cuMemHostUnregister, mapped.ptr());
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, get_dptr(&dptr, mapped.ptr(), 0));
}
