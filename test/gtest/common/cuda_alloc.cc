/*
 * Test helpers: CUDA driver and allocations (see cuda_alloc.h).
 */
#include "cuda_alloc.h"

#include <gtest/gtest.h>
#include <cstdlib>
#include <stdexcept>
#include <string>



namespace test {

bool cuda_init()
{
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
    CUdevice device;
    CUcontext ctx;
    int count = 0;

    if ((path == nullptr) || (uct_cuda_ipc_ns_driver_load(path) != UCS_OK) ||
        (uct_cuda_ipc_ns_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS) ||
        (count == 0)) {
        return false;
    }

    TEST_CU(cuDeviceGet, &device, 0);
    TEST_CU(cuDevicePrimaryCtxRetain, &ctx, device);
    TEST_CU(cuCtxSetCurrent, ctx);
    return true;
}


cuda_legacy_buffer::cuda_legacy_buffer(size_t size, int device) :
    m_ptr(0), m_size(size), m_ctx(nullptr)
{
    CUcontext popped;
    CUdevice dev;
    CUresult res;

    TEST_CU(cuDeviceGet, &dev, device);
    TEST_CU(cuDevicePrimaryCtxRetain, &m_ctx, dev);
    TEST_CU(cuCtxPushCurrent, m_ctx);
    res = uct_cuda_ipc_ns_drv.cuMemAlloc(&m_ptr, size);
    uct_cuda_ipc_ns_drv.cuCtxPopCurrent(&popped);
    if (res != CUDA_SUCCESS) {
        throw std::runtime_error(std::string("cuMemAlloc failed: ") +
                                 uct_cuda_ipc_ns_driver_error_name(res));
    }
}


cuda_legacy_buffer::~cuda_legacy_buffer()
{
    CUcontext popped;

    /* freed in the context it was allocated in */
    if (uct_cuda_ipc_ns_drv.cuCtxPushCurrent(m_ctx) == CUDA_SUCCESS) {
        uct_cuda_ipc_ns_drv.cuMemFree(m_ptr);
        uct_cuda_ipc_ns_drv.cuCtxPopCurrent(&popped);
    } else {
        uct_cuda_ipc_ns_drv.cuMemFree(m_ptr);
    }
}


cuda_vmm_buffer::cuda_vmm_buffer(size_t size, bool posix_fd, CUdeviceptr hint,
                                 int device) :
    m_ptr(0), m_size(0), m_handle(0)
{
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    size_t granularity;

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = device;
    prop.requestedHandleTypes = posix_fd ?
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR :
                                CU_MEM_HANDLE_TYPE_NONE;
    TEST_CU(cuMemGetAllocationGranularity, &granularity, &prop,
            CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    m_size = ((size + granularity - 1) / granularity) * granularity;

    TEST_CU(cuMemCreate, &m_handle, m_size, &prop, 0);
    TEST_CU(cuMemAddressReserve, &m_ptr, m_size, 0, hint, 0);
    TEST_CU(cuMemMap, m_ptr, m_size, 0, m_handle, 0);
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    TEST_CU(cuMemSetAccess, m_ptr, m_size, &access, 1);
}


cuda_vmm_buffer::~cuda_vmm_buffer()
{
    uct_cuda_ipc_ns_drv.cuMemUnmap(m_ptr, m_size);
    uct_cuda_ipc_ns_drv.cuMemAddressFree(m_ptr, m_size);
    uct_cuda_ipc_ns_drv.cuMemRelease(m_handle);
}


cuda_pool_buffer::cuda_pool_buffer(size_t size, int device, bool shareable) :
    m_ptr(0), m_size(size), m_pool(nullptr), m_own_pool(shareable)
{
    CUmemPoolProps props = {};

    props.allocType     = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes   = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id   = device;
    if (shareable) {
        TEST_CU(cuMemPoolCreate, &m_pool, &props);
    } else {
        TEST_CU(cuDeviceGetDefaultMemPool, &m_pool, device);
    }
    TEST_CU(cuMemAllocFromPoolAsync, &m_ptr, size, m_pool, nullptr);
    TEST_CU(cuStreamSynchronize, nullptr);
}


cuda_pool_buffer::~cuda_pool_buffer()
{
    uct_cuda_ipc_ns_drv.cuMemFreeAsync(m_ptr, nullptr);
    uct_cuda_ipc_ns_drv.cuStreamSynchronize(nullptr);
    if (m_own_pool) {
        uct_cuda_ipc_ns_drv.cuMemPoolDestroy(m_pool);
    }
}


CUmemAllocationProp cuda_vmm_prop(int device)
{
    CUmemAllocationProp prop = {};

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}


size_t cuda_vmm_granularity(int device)
{
    CUmemAllocationProp prop = cuda_vmm_prop(device);
    size_t gran              = 0;

    TEST_CU(cuMemGetAllocationGranularity, &gran, &prop,
            CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    return gran;
}


cuda_vmm_memory::cuda_vmm_memory(size_t size, bool chunked, int device) :
    m_size(size), m_chunks(nullptr), m_one(nullptr)
{
    if (chunked) {
        m_chunks = new cuda_vmm_chunks(size / cuda_vmm_granularity(device),
                                       device);
    } else {
        m_one = new cuda_vmm_buffer(size, true, 0, device);
    }
}


cuda_vmm_memory::~cuda_vmm_memory()
{
    delete m_chunks;
    delete m_one;
}


void *cuda_vmm_memory::ptr() const
{
    return (m_chunks != nullptr) ? m_chunks->ptr() : m_one->ptr();
}


cuda_vmm_chunks::cuda_vmm_chunks(size_t num_chunks, int device) :
    m_ptr(0), m_chunk(0), m_device(device), m_handles(num_chunks, 0)
{
    CUmemAllocationProp prop = cuda_vmm_prop(device);

    TEST_CU(cuMemGetAllocationGranularity, &m_chunk, &prop,
            CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    /* more than is mapped, as a pool reserves: the reservation (RANGE_*
     * of every chunk) is never the mapped extent */
    TEST_CU(cuMemAddressReserve, &m_ptr, reserved(), 0, 0, 0);
    for (size_t i = 0; i < num_chunks; ++i) {
        map_chunk(i);
    }
}


void cuda_vmm_chunks::map_chunk(size_t index)
{
    CUmemAllocationProp prop = cuda_vmm_prop(m_device);
    CUdeviceptr addr         = m_ptr + index * m_chunk;
    CUmemAccessDesc access   = {};

    TEST_CU(cuMemCreate, &m_handles[index], m_chunk, &prop, 0);
    TEST_CU(cuMemMap, addr, m_chunk, 0, m_handles[index], 0);
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    TEST_CU(cuMemSetAccess, addr, m_chunk, &access, 1);
}


void cuda_vmm_chunks::replace(size_t index)
{
    CUdeviceptr addr = m_ptr + index * m_chunk;

    TEST_CU(cuMemUnmap, addr, m_chunk);
    TEST_CU(cuMemRelease, m_handles[index]);
    m_handles[index] = 0;
    map_chunk(index);
}


cuda_vmm_chunks::~cuda_vmm_chunks()
{
    for (size_t i = 0; i < m_handles.size(); ++i) {
        if (m_handles[i] != 0) {
            uct_cuda_ipc_ns_drv.cuMemUnmap(m_ptr + i * m_chunk, m_chunk);
            uct_cuda_ipc_ns_drv.cuMemRelease(m_handles[i]);
        }
    }
    uct_cuda_ipc_ns_drv.cuMemAddressFree(m_ptr, reserved());
}


void cuda_fill(void *dst, unsigned char value, size_t size)
{
    TEST_CU(cuMemsetD8, (CUdeviceptr)dst, value, size);
    TEST_CU(cuStreamSynchronize, nullptr);
}


void cuda_write(void *dev_dst, const void *host_src, size_t size)
{
    TEST_CU(cuMemcpyHtoD, (CUdeviceptr)dev_dst, host_src, size);
    TEST_CU(cuStreamSynchronize, nullptr);
}


void cuda_read(void *host_dst, const void *dev_src, size_t size)
{
    TEST_CU(cuMemcpyDtoH, host_dst, (CUdeviceptr)dev_src, size);
}


std::vector<uint8_t> seed_pattern(uint32_t seed, size_t size)
{
    std::vector<uint8_t> bytes(size);
    for (size_t i = 0; i < size; ++i) {
        bytes[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 12));
    }
    return bytes;
}


void seed_fill(void *dev, uint32_t seed, size_t size)
{
    std::vector<uint8_t> bytes = seed_pattern(seed, size);
    cuda_write(dev, bytes.data(), size);
}


bool seed_holds(const void *dev, uint32_t seed, size_t size)
{
    std::vector<uint8_t> bytes(size);
    cuda_read(bytes.data(), dev, size);
    return bytes == seed_pattern(seed, size);
}


} // namespace test
