/*
 * cuda_cpy_ns tests: fixtures (see cpy_test.h).
 */
#include "cpy_test.h"

#include <cstring>


namespace cpy_test {

bytes_t pattern(size_t size, unsigned seed)
{
    bytes_t bytes(size);
    for (size_t i = 0; i < size; ++i) {
        bytes[i] = (uint8_t)(i * 7 + seed * 13 + (i >> 8));
    }
    return bytes;
}


bytes_t device_bytes(const void *ptr, size_t size)
{
    bytes_t bytes(size);
    test::cuda_read(bytes.data(), ptr, size);
    return bytes;
}


void device_write(void *ptr, const bytes_t &bytes)
{
    test::cuda_write(ptr, bytes.data(), bytes.size());
}


void allocation_range(const void *ptr, CUdeviceptr *base, size_t *size)
{
    *base = 0;
    *size = 0;
    uct_cuda_ipc_ns_drv.cuMemGetAddressRange(base, size, (CUdeviceptr)ptr);
}


bool posix_fd_exportable(const void *ptr)
{
    return pointer_attribute<uint64_t>(
                   ptr, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES) &
           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}


void md::SetUp()
{
    m_component = test::find_component("cuda_cpy_ns");
    ASSERT_NE(nullptr, m_component) << "component not registered";
    if (!test::cuda_init()) {
        GTEST_SKIP() << "no CUDA driver or device";
    }
    open_md();
}


void md::TearDown()
{
    close_md();
}


void md::open_md(const char *mem_alloc)
{
    uct_md_config_t *config;

    close_md();
    ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &config));
    if (mem_alloc != nullptr) {
        ASSERT_EQ(UCS_OK, test::config_modify(config, "MEM_ALLOC", mem_alloc));
    }
    ASSERT_EQ(UCS_OK, uct_md_open(m_component, "cuda_cpy_ns", config, &m_md));
    uct_config_release(config);
}


void md::close_md()
{
    if (m_md != nullptr) {
        uct_md_close(m_md);
        m_md = nullptr;
    }
}


ucs_status_t md::alloc(size_t length, ucs_memory_type_t mem_type,
                       uct_allocated_memory_t *mem)
{
    uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    uct_mem_alloc_params_t params;

    params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS |
                        UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE |
                        UCT_MEM_ALLOC_PARAM_FIELD_MDS |
                        UCT_MEM_ALLOC_PARAM_FIELD_NAME;
    params.flags      = UCT_MD_MEM_ACCESS_ALL;
    params.mem_type   = mem_type;
    params.mds.mds    = &m_md;
    params.mds.count  = 1;
    params.name       = "cpy_test";
    return uct_mem_alloc(length, &method, 1, &params, mem);
}


void iface::SetUp()
{
    uct_ep_params_t params = {};
    bytes_t dev, ifa;

    md::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
        return;
    }
    test::open_iface(m_md, "cu_cpy_ns", "cuda_cpy", &m_async, &m_worker,
                     &m_iface);
    ASSERT_NE(nullptr, m_iface);
    uct_iface_progress_enable(m_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);

    dev = device_address();
    ifa = iface_address();
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = m_iface;
    params.dev_addr   = (const uct_device_addr_t*)dev.data();
    params.iface_addr = (const uct_iface_addr_t*)ifa.data();
    ASSERT_EQ(UCS_OK, uct_ep_create(&params, &m_ep));
}


void iface::TearDown()
{
    if (m_ep != nullptr) {
        uct_ep_destroy(m_ep);
    }
    test::close_iface(m_async, m_worker, m_iface);
    md::TearDown();
}


bytes_t iface::device_address() const
{
    uct_iface_attr_t attr;
    EXPECT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    bytes_t addr(attr.device_addr_len);
    EXPECT_EQ(UCS_OK, uct_iface_get_device_address(
                      m_iface, (uct_device_addr_t*)addr.data()));
    return addr;
}


bytes_t iface::iface_address() const
{
    uct_iface_attr_t attr;
    EXPECT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    bytes_t addr(attr.iface_addr_len);
    EXPECT_EQ(UCS_OK, uct_iface_get_address(m_iface,
                                            (uct_iface_addr_t*)addr.data()));
    return addr;
}

} // namespace cpy_test
