/*
 * cuda_cpy_ns memory domain: attributes, CUDA allocation (VMM POSIX-fd by
 * default, legacy on request), registration, memory-type detection.
 */
#include "cpy_test.h"
#include "cudasim/cudasim_test.h"

#include <cstdlib>
#include <cstring>

extern "C" {
#include <uct/base/uct_component.h>
#include <uct/base/uct_md.h>
}


namespace {

using cpy_test::bytes_t;
using cpy_test::pointer_attribute;


bool driver_knows(const void *ptr)
{
    CUdeviceptr base;
    size_t size;
    return uct_cuda_ipc_ns_drv.cuMemGetAddressRange(&base, &size,
                                                  (CUdeviceptr)ptr) ==
           CUDA_SUCCESS;
}


class cpy_md_test : public cpy_test::md {
protected:
    /* allocate, check the bytes and the allocation's range, free */
    void check_alloc(size_t length, uct_allocated_memory_t *mem)
    {
        ASSERT_EQ(UCS_OK, alloc(length, UCS_MEMORY_TYPE_CUDA, mem));
        EXPECT_EQ(m_md, mem->md);
        EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, mem->mem_type);
        EXPECT_GE(mem->length, length);
        EXPECT_EQ((unsigned)CU_MEMORYTYPE_DEVICE,
                  pointer_attribute<unsigned>(mem->address,
                                              CU_POINTER_ATTRIBUTE_MEMORY_TYPE));

        CUdeviceptr base;
        size_t size;
        cpy_test::allocation_range(mem->address, &base, &size);
        EXPECT_EQ((CUdeviceptr)mem->address, base);
        EXPECT_EQ(mem->length, size);

        bytes_t data = cpy_test::pattern(mem->length, 1);
        cpy_test::device_write(mem->address, data);
        EXPECT_EQ(data, cpy_test::device_bytes(mem->address, mem->length));
    }

    void free_and_check(uct_allocated_memory_t *mem)
    {
        void *address = mem->address;
        EXPECT_EQ(UCS_OK, uct_mem_free(mem));
        EXPECT_FALSE(driver_knows(address)) << "memory still allocated";
    }
};


TEST_F(cpy_md_test, query) {
    uct_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
    EXPECT_STREQ("cuda_cpy_ns", attr.component_name);
    EXPECT_EQ(UCT_MD_FLAG_REG | UCT_MD_FLAG_ALLOC, attr.cap.flags)
        << "no NEED_RKEY: the transport reaches only its own process";
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA),
              attr.cap.reg_mem_types);
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_CUDA), attr.cap.alloc_mem_types);
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA),
              attr.cap.access_mem_types);
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_CUDA), attr.cap.detect_mem_types);
    EXPECT_EQ(0u, attr.rkey_packed_size);

    uct_mem_h memh;
    std::vector<char> host(64);
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, host.data(), host.size(),
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    uint8_t rkey = 0xee;
    EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, &rkey));
    EXPECT_EQ(0xee, rkey) << "nothing to pack";
    uct_rkey_bundle_t bundle;
    EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, &rkey, &bundle));
    EXPECT_EQ(UCS_OK, uct_rkey_release(m_component, &bundle));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}


/* The default: VMM memory exportable as a POSIX fd, for cu_ipc_ns */
TEST_F(cpy_md_test, alloc_vmm_posix_fd) {
    const size_t length = (1 << 20) + 1;
    uct_allocated_memory_t mem;

    check_alloc(length, &mem);
    test::cuda_vmm_buffer one_byte(1); /* one granule */
    EXPECT_EQ(0u, mem.length % one_byte.size()) << "rounded to the granularity";
    EXPECT_TRUE(cpy_test::posix_fd_exportable(mem.address));
    EXPECT_EQ(0u, pointer_attribute<unsigned>(
                          mem.address,
                          CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE));

    /* the cu_ipc_ns MD exports it */
    uct_component_h ipc = test::find_component("cuda_ipc_ns");
    uct_md_config_t *config;
    uct_md_h ipc_md;
    uct_mem_h memh;
    ASSERT_NE(nullptr, ipc);
    ASSERT_EQ(UCS_OK, uct_md_config_read(ipc, NULL, NULL, &config));
    ASSERT_EQ(UCS_OK, uct_md_open(ipc, "cuda_ipc_ns", config, &ipc_md));
    uct_config_release(config);
    EXPECT_EQ(UCS_OK, uct_md_mem_reg(ipc_md, mem.address, length,
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    uct_md_mem_dereg(ipc_md, memh);
    uct_md_close(ipc_md);

    free_and_check(&mem);
}


TEST_F(cpy_md_test, alloc_legacy) {
    const size_t length = 12345;
    uct_allocated_memory_t mem;

    open_md("legacy");
    check_alloc(length, &mem);
    EXPECT_EQ(length, mem.length) << "cuMemAlloc does not round";
    EXPECT_EQ(1u, pointer_attribute<unsigned>(
                          mem.address,
                          CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE));
    free_and_check(&mem);
}


/* Allocation and free work on a thread without a current context */
TEST_F(cpy_md_test, alloc_without_context) {
    CUcontext ctx;
    ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&ctx));
    ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuCtxSetCurrent(nullptr));

    for (const char *mode : {"vmm", "legacy"}) {
        uct_allocated_memory_t mem;
        open_md(mode);
        EXPECT_EQ(UCS_OK, alloc(4096, UCS_MEMORY_TYPE_CUDA, &mem)) << mode;
        EXPECT_EQ(UCS_OK, uct_mem_free(&mem)) << mode;

        CUcontext current;
        EXPECT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&current));
        EXPECT_EQ(nullptr, current) << mode << ": pushed context not popped";
    }

    ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuCtxSetCurrent(ctx));
}


TEST_F(cpy_md_test, alloc_other_types_refused) {
    uct_allocated_memory_t mem;
    EXPECT_NE(UCS_OK, alloc(4096, UCS_MEMORY_TYPE_CUDA_MANAGED, &mem));
    EXPECT_NE(UCS_OK, alloc(4096, UCS_MEMORY_TYPE_ROCM, &mem));
}


/* A failing driver call fails the allocation and leaves nothing behind */
TEST_F(cpy_md_test, alloc_driver_failure) {
    SKIP_IF_NOT_EMULATOR();
    uct_allocated_memory_t mem;

    for (const char *fault : {"cuMemCreate:1:CUDA_ERROR_OUT_OF_MEMORY",
                              "cuMemAddressReserve:1:CUDA_ERROR_OUT_OF_MEMORY",
                              "cuMemMap:1:CUDA_ERROR_INVALID_VALUE",
                              "cuMemSetAccess:1:CUDA_ERROR_INVALID_VALUE"}) {
        setenv("CUDASIM_FAULTS", fault, 1);
        ASSERT_TRUE(cudasim_test::fault_reload());
        EXPECT_NE(UCS_OK, alloc(4096, UCS_MEMORY_TYPE_CUDA, &mem)) << fault;
    }
    unsetenv("CUDASIM_FAULTS");
    ASSERT_TRUE(cudasim_test::fault_reload());

    /* the failed attempts released what they had made */
    ASSERT_EQ(UCS_OK, alloc(4096, UCS_MEMORY_TYPE_CUDA, &mem));
    free_and_check(&mem);
}


TEST_F(cpy_md_test, reg_host_and_cuda) {
    test::cuda_legacy_buffer legacy(1 << 16);
    test::cuda_vmm_buffer vmm(1 << 16);
    std::vector<char> host(1 << 16);
    uct_mem_h memh;

    for (void *ptr : {(void*)host.data(), legacy.ptr(), vmm.ptr()}) {
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, ptr, 1 << 16,
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        EXPECT_NE(nullptr, memh);
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    }
}


/* Memory the application allocated itself, and ours, versus host memory */
TEST_F(cpy_md_test, detect_memory_type) {
    test::cuda_legacy_buffer legacy(1 << 20);
    test::cuda_vmm_buffer vmm(1 << 20);
    std::vector<char> heap(4096);
    char stack[64];
    uct_allocated_memory_t mem;
    ucs_memory_type_t type;

    ASSERT_EQ(UCS_OK, alloc(4096, UCS_MEMORY_TYPE_CUDA, &mem));
    for (void *ptr : {legacy.ptr(), vmm.ptr(), mem.address}) {
        ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, ptr, 64, &type));
        EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, type) << ptr;
    }
    for (void *ptr : {(void*)heap.data(), (void*)stack}) {
        ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, ptr, 64, &type));
        EXPECT_EQ(UCS_MEMORY_TYPE_HOST, type) << ptr;
    }

    /* UCP's slow path: mem_query with the whole allocation's range */
    uct_md_mem_attr_t attr;
    attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE |
                      UCT_MD_MEM_ATTR_FIELD_SYS_DEV |
                      UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS |
                      UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH;
    ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, (char*)vmm.ptr() + 4096, 100,
                                       &attr));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, attr.mem_type);
    EXPECT_EQ(vmm.ptr(), attr.base_address);
    EXPECT_EQ(vmm.size(), attr.alloc_length);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_md_mem_query(m_md, heap.data(), 10, &attr));

    void *address = mem.address;
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
    ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, address, 64, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_HOST, type) << "freed";
}

} // namespace


/*
 * Coexistence with a UCX built with CUDA (docs/ucx-versions.md): when UCX
 * registers its own CUDA copy component ("cuda_cpy"), cu_cpy_ns steps aside
 * unless UCX_CUDA_CPY_NS_ENABLE=y; UCX_CUDA_CPY_NS_ENABLE=n always does. A
 * stand-in component under the stock name plays UCX's.
 */
class cpy_coexistence_test : public ::testing::Test {
protected:
    static ucs_status_t
    stand_in_resources(uct_component_t *component,
                       uct_md_resource_desc_t **resources_p,
                       unsigned *num_resources_p)
    {
        return uct_md_query_empty_md_resource(resources_p, num_resources_p);
    }

    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver/device";
        }
        /* a C struct with a const name: built in raw storage */
        memset(m_storage, 0, sizeof(m_storage));
        m_stand_in = reinterpret_cast<uct_component_t*>(m_storage);
        strncpy((char*)m_stand_in->name, "cuda_cpy",
                sizeof(m_stand_in->name) - 1);
        m_stand_in->query_md_resources = stand_in_resources;
        m_stand_in->md_config.table    = m_empty_table;
        m_stand_in->md_config.name     = "stand-in CUDA copy";
        m_stand_in->md_config.prefix   = "";
        m_stand_in->md_config.size     = sizeof(uct_md_config_t);
        ucs_list_head_init(&m_stand_in->tl_list);
        m_registered = false;
    }

    void TearDown() override
    {
        unregister_stand_in();
        unsetenv("UCX_CUDA_CPY_NS_ENABLE");
    }

    void register_stand_in()
    {
        uct_component_register(m_stand_in);
        m_registered = true;
    }

    void unregister_stand_in()
    {
        if (m_registered) {
            uct_component_unregister(m_stand_in);
            /* UCX's unregister leaves the component in uct_components_list
             * (a TODO there): take it out, the storage dies with the test */
            ucs_list_del(&m_stand_in->list);
            m_registered = false;
        }
    }

    /* how many memory domains a component lists */
    static unsigned num_mds(const char *component_name)
    {
        uct_component_h component = test::find_component(component_name);
        uct_component_attr_t attr = {};
        unsigned count;

        EXPECT_NE(nullptr, component) << component_name;
        if (component == nullptr) {
            return 0;
        }
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        EXPECT_EQ(UCS_OK, uct_component_query(component, &attr));
        count = attr.md_resource_count;
        return count;
    }

    alignas(uct_component_t) unsigned char m_storage[sizeof(uct_component_t)];
    uct_component_t    *m_stand_in;
    ucs_config_field_t m_empty_table[1] = {};
    bool               m_registered;
};


TEST_F(cpy_coexistence_test, steps_aside_for_ucx_own_cuda_copy) {
    ASSERT_EQ(nullptr, test::find_component("cuda_cpy"))
            << "this UCX has its own CUDA copy: the test needs one without";
    EXPECT_EQ(1u, num_mds("cuda_cpy_ns")) << "alone: offered";

    register_stand_in();
    EXPECT_EQ(0u, num_mds("cuda_cpy_ns")) << "UCX's own present: steps aside";
    EXPECT_EQ(1u, num_mds("cuda_ipc_ns")) << "cu_ipc_ns is not concerned";

    setenv("UCX_CUDA_CPY_NS_ENABLE", "y", 1);
    EXPECT_EQ(1u, num_mds("cuda_cpy_ns")) << "ENABLE=y: offered anyway";

    unregister_stand_in();
    setenv("UCX_CUDA_CPY_NS_ENABLE", "n", 1);
    EXPECT_EQ(0u, num_mds("cuda_cpy_ns")) << "ENABLE=n: never offered";
}
