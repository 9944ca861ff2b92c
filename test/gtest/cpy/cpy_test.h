/*
 * cuda_cpy_ns tests: fixtures. The copy MD and transport are reached through
 * the UCT API; the driver through the module's driver table, so the tests
 * run the same on the emulator and on a real GPU.
 */
#ifndef TEST_CPY_CPY_TEST_H
#define TEST_CPY_CPY_TEST_H

#include "common/cuda_alloc.h"
#include "common/uct_util.h"

#include <gtest/gtest.h>
#include <cstdint>
#include <vector>


namespace cpy_test {

typedef std::vector<uint8_t> bytes_t;

/* A pattern of @a size bytes that differs per @a seed */
bytes_t pattern(size_t size, unsigned seed);

/* Copy of @a size bytes of device memory at @a ptr */
bytes_t device_bytes(const void *ptr, size_t size);

/* Write @a bytes to device memory at @a ptr */
void device_write(void *ptr, const bytes_t &bytes);

/* The allocation a CUDA pointer lies in: base and size, or 0 and 0 */
void allocation_range(const void *ptr, CUdeviceptr *base, size_t *size);

/* A pointer attribute of type T (gtest failure if the driver refuses) */
template <typename T>
T pointer_attribute(const void *ptr, CUpointer_attribute attribute)
{
    T value = T();
    EXPECT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuPointerGetAttribute(
                            &value, attribute, (CUdeviceptr)ptr));
    return value;
}

/* Whether the allocation at @a ptr can be exported as a POSIX fd */
bool posix_fd_exportable(const void *ptr);


/* An open cuda_cpy_ns MD; skipped without driver or device */
class md : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    /* (re)open the MD, with UCX_CUDA_CPY_NS_MEM_ALLOC=mem_alloc if given */
    void open_md(const char *mem_alloc = nullptr);
    void close_md();

    /* allocate CUDA memory through the MD, as UCP does (uct_mem_alloc) */
    ucs_status_t alloc(size_t length, ucs_memory_type_t mem_type,
                       uct_allocated_memory_t *mem);

    uct_component_h m_component = nullptr;
    uct_md_h        m_md        = nullptr;
};


/* The MD with an interface of cu_cpy_ns and an endpoint to itself */
class iface : public md {
protected:
    void SetUp() override;
    void TearDown() override;

    bytes_t device_address() const;
    bytes_t iface_address() const;

    ucs_async_context_t *m_async  = nullptr;
    uct_worker_h         m_worker = nullptr;
    uct_iface_h          m_iface  = nullptr;
    uct_ep_h             m_ep     = nullptr;
};

} // namespace cpy_test

#endif
