/*
 * Test helpers: the CUDA driver (through the module's driver table, so the
 * same tests run on the emulator and on a real GPU) and allocations.
 */
#ifndef TEST_COMMON_CUDA_ALLOC_H
#define TEST_COMMON_CUDA_ALLOC_H

extern "C" {
#include "cuda_ipc_ns_driver.h"
}

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>
#include <cstdint>


namespace test {

/* An entry of the driver table, or a runtime_error naming it when the
 * driver lacks it (OPTIONAL entries stay NULL: cuda_ipc_ns_driver.h) */
template <typename F> F *cu_entry(F *func, const char *name)
{
    if (func == nullptr) {
        throw std::runtime_error(std::string(name) + ": the CUDA driver "
                                 "lacks this optional entry point");
    }
    return func;
}

#define TEST_CU_ENTRY(_func) \
    test::cu_entry(uct_cuda_ipc_ns_drv._func, #_func)

/* a driver call that must succeed, through the driver table: throws with
 * the call and the CUresult name */
#define TEST_CU(_func, ...) \
    do { \
        CUresult _res = TEST_CU_ENTRY(_func)(__VA_ARGS__); \
        if (_res != CUDA_SUCCESS) { \
            throw std::runtime_error(std::string(#_func " failed: ") + \
                                     uct_cuda_ipc_ns_driver_error_name(_res)); \
        } \
    } while (0)

/* Load the driver named by UCX_CUDA_IPC_NS_DRIVER, make device 0's primary
 * context current on this thread; false when there is no driver/device */
bool cuda_init();

/* Memory from cuMemAlloc in @a device's primary context: legacy-IPC
 * capable */
class cuda_legacy_buffer {
public:
    explicit cuda_legacy_buffer(size_t size, int device = 0);
    ~cuda_legacy_buffer();
    void *ptr() const { return (void*)m_ptr; }
    size_t size() const { return m_size; }
private:
    CUdeviceptr m_ptr;
    size_t      m_size;
    CUcontext   m_ctx;
};

/* Memory from cuMemCreate + map on @a device (which gets access), exportable
 * as POSIX fd when asked, at address @a hint when that range is free */
class cuda_vmm_buffer {
public:
    cuda_vmm_buffer(size_t size, bool posix_fd = true, CUdeviceptr hint = 0,
                    int device = 0);
    ~cuda_vmm_buffer();
    void *ptr() const { return (void*)m_ptr; }
    size_t size() const { return m_size; }
private:
    CUdeviceptr                  m_ptr;
    size_t                       m_size;
    CUmemGenericAllocationHandle m_handle;
};

/* Memory of a stream-ordered pool on @a device: with @a shareable, of a pool
 * created with the POSIX-fd handle type (cuMemPoolCreate,
 * cuMemAllocFromPoolAsync: what cudaMallocAsync does with a pool of its
 * own); else of the device's default pool (cuMemAllocAsync, which exports
 * nothing) */
class cuda_pool_buffer {
public:
    explicit cuda_pool_buffer(size_t size, int device = 0,
                              bool shareable = true);
    ~cuda_pool_buffer();
    void *ptr() const { return (void*)m_ptr; }
    size_t size() const { return m_size; }
    CUmemoryPool pool() const { return m_pool; }
private:
    CUdeviceptr  m_ptr;
    size_t       m_size;
    CUmemoryPool m_pool;
    bool         m_own_pool; /* created here, destroyed with the buffer */
};

/* A range of separate cuMemCreate allocations (POSIX fd handle type) of the
 * minimal granularity each, mapped back to back from the start of a larger
 * reservation (two chunks of it stay unmapped), as PyTorch's expandable
 * segments map them (docs/framework-memory.md) */
class cuda_vmm_chunks {
public:
    cuda_vmm_chunks(size_t num_chunks, int device = 0);
    ~cuda_vmm_chunks();
    void *ptr() const { return (void*)m_ptr; }
    size_t size() const { return m_chunk * m_handles.size(); }
    size_t chunk_size() const { return m_chunk; }
    /* unmap chunk @a index and map a new allocation at its address, as a
     * pool that shrank and grew again */
    void replace(size_t index);
    /* the reserved range: RANGE_* of every chunk (cuda.h) */
    size_t reserved() const { return m_chunk * (m_handles.size() + 2); }
private:
    void map_chunk(size_t index);

    CUdeviceptr                               m_ptr;
    size_t                                    m_chunk;
    int                                       m_device;
    std::vector<CUmemGenericAllocationHandle> m_handles;
};

/* The properties of a pinned VMM allocation on @a device with the POSIX-fd
 * handle type */
CUmemAllocationProp cuda_vmm_prop(int device = 0);

/* The minimal granularity of POSIX-fd VMM allocations on @a device */
size_t cuda_vmm_granularity(int device = 0);

/* @a size bytes of VMM memory on @a device: one allocation
 * (cuda_vmm_buffer), or chunks of the granularity mapped back to back
 * (cuda_vmm_chunks; @a size a multiple of it) */
class cuda_vmm_memory {
public:
    cuda_vmm_memory(size_t size, bool chunked, int device = 0);
    ~cuda_vmm_memory();
    cuda_vmm_memory(const cuda_vmm_memory&) = delete;
    cuda_vmm_memory &operator=(const cuda_vmm_memory&) = delete;
    void *ptr() const;
    size_t size() const { return m_size; }
private:
    size_t           m_size;
    cuda_vmm_chunks *m_chunks;
    cuda_vmm_buffer *m_one;
};

/* Device memory written (cuda_fill, cuda_write) or read (cuda_read) through
 * the driver in the current context; each returns once the data is in place:
 * cuMemsetD8 and a pageable cuMemcpyHtoD return before their copy lands (the
 * driver's "API synchronization behavior"), so the helpers synchronize the
 * default stream after them, and other streams (the transport's are
 * non-blocking) and other processes see the data. */
void cuda_fill(void *dst, unsigned char value, size_t size);
void cuda_read(void *host_dst, const void *dev_src, size_t size);
void cuda_write(void *dev_dst, const void *host_src, size_t size);

/* The test pattern of @a seed: what seed_fill() writes and seed_holds() checks */
std::vector<uint8_t> seed_pattern(uint32_t seed, size_t size);

/* Write the pattern of @a seed to device memory */
void seed_fill(void *dev, uint32_t seed, size_t size);

/* Whether device memory holds the pattern of @a seed */
bool seed_holds(const void *dev, uint32_t seed, size_t size);

} // namespace test

#endif
