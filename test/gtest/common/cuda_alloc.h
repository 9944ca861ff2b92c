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


namespace test {

/* Load the driver named by UCX_CUDA_IPC_NS_DRIVER, make device 0's primary
 * context current on this thread; false when there is no driver/device */
bool cuda_init();

/* Memory from cuMemAlloc: legacy-IPC capable */
class cuda_legacy_buffer {
public:
    explicit cuda_legacy_buffer(size_t size);
    ~cuda_legacy_buffer();
    void *ptr() const { return (void*)m_ptr; }
    size_t size() const { return m_size; }
private:
    CUdeviceptr m_ptr;
    size_t      m_size;
};

/* Memory from cuMemCreate + map, exportable as POSIX fd when asked */
class cuda_vmm_buffer {
public:
    cuda_vmm_buffer(size_t size, bool posix_fd = true);
    ~cuda_vmm_buffer();
    void *ptr() const { return (void*)m_ptr; }
    size_t size() const { return m_size; }
private:
    CUdeviceptr                  m_ptr;
    size_t                       m_size;
    CUmemGenericAllocationHandle m_handle;
};

void cuda_fill(void *dst, unsigned char value, size_t size);
void cuda_read(void *host_dst, const void *dev_src, size_t size);
void cuda_write(void *dev_dst, const void *host_src, size_t size);

} // namespace test

#endif
