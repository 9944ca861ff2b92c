/*
 * cu_cpy_ns transport: attributes, loopback-only reachability, synchronous
 * short and zero-copy put/get between host and device memory.
 */
#include "cpy_test.h"
#include "cudasim/cudasim_test.h"

extern "C" {
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_nsid.h"
}

#include <climits>
#include <cstdlib>
#include <thread>
#include <unistd.h>


namespace {

using cpy_test::bytes_t;


class cpy_iface_test : public cpy_test::iface {
protected:
    int reachable(const uct_cuda_ipc_ns_addr_device_t &dev,
                  const uct_cuda_ipc_ns_addr_iface_t &ifa)
    {
        return test::iface_is_reachable(m_iface, dev, ifa);
    }

    void own_addresses(uct_cuda_ipc_ns_addr_device_t *dev,
                       uct_cuda_ipc_ns_addr_iface_t *ifa)
    {
        bytes_t dev_buf = device_address(), ifa_buf = iface_address();
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_device_parse(
                          dev_buf.data(), dev_buf.size(), dev));
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_iface_parse(
                          ifa_buf.data(), ifa_buf.size(), ifa));
    }

    /* put @a data at @a dev with put_short, read it back with get_short */
    void put_get_short(void *dev, const bytes_t &data)
    {
        ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, data.data(), data.size(),
                                           (uint64_t)dev, UCT_INVALID_RKEY));
        EXPECT_EQ(data, cpy_test::device_bytes(dev, data.size()));

        bytes_t back(data.size());
        ASSERT_EQ(UCS_OK, uct_ep_get_short(m_ep, back.data(), back.size(),
                                           (uint64_t)dev, UCT_INVALID_RKEY));
        EXPECT_EQ(data, back);
    }

    static uct_iov_t iov(void *buffer, size_t length, unsigned count = 1,
                         size_t stride = 0)
    {
        uct_iov_t iov = {};
        iov.buffer = buffer;
        iov.length = length;
        iov.memh   = UCT_MEM_HANDLE_NULL;
        iov.count  = count;
        iov.stride = stride;
        return iov;
    }
};


TEST_F(cpy_iface_test, attributes) {
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    EXPECT_EQ(UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_SHORT |
              UCT_IFACE_FLAG_GET_SHORT | UCT_IFACE_FLAG_PUT_ZCOPY |
              UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PENDING,
              attr.cap.flags);
    EXPECT_EQ((size_t)UINT_MAX, attr.cap.put.max_short);
    EXPECT_EQ((size_t)UINT_MAX, attr.cap.get.max_short);
    EXPECT_EQ(SIZE_MAX, attr.cap.put.max_zcopy);
    EXPECT_EQ((size_t)UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE, attr.device_addr_len);
    EXPECT_EQ((size_t)UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE, attr.iface_addr_len);
    EXPECT_EQ(0u, uct_iface_progress(m_iface));
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, nullptr)) << "nothing in flight";
}


TEST_F(cpy_iface_test, reachable_from_own_process_only) {
    uct_cuda_ipc_ns_addr_device_t own_dev, dev;
    uct_cuda_ipc_ns_addr_iface_t own_ifa, ifa;

    own_addresses(&own_dev, &own_ifa);
    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->system_id, own_dev.system_id);
    EXPECT_EQ((uint32_t)getpid(), own_ifa.pid);
    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->pid_ns, own_ifa.pid_ns);

    EXPECT_TRUE(reachable(own_dev, own_ifa)) << "same process";

    dev = own_dev; ifa = own_ifa; ifa.pid += 1;
    EXPECT_FALSE(reachable(dev, ifa)) << "other process";

    dev = own_dev; ifa = own_ifa; ifa.pid_ns += 1;
    EXPECT_FALSE(reachable(dev, ifa)) << "same pid, other PID namespace";

    dev = own_dev; ifa = own_ifa; dev.system_id ^= 1;
    EXPECT_FALSE(reachable(dev, ifa)) << "other system";

    EXPECT_FALSE(uct_iface_is_reachable(m_iface, nullptr, nullptr));

    /* and no endpoint to another process */
    bytes_t ifa_buf(UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);
    ifa = own_ifa; ifa.pid += 1;
    uct_cuda_ipc_ns_addr_iface_pack(&ifa, ifa_buf.data());
    uct_ep_params_t params = {};
    uct_ep_h ep;
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = m_iface;
    params.iface_addr = (const uct_iface_addr_t*)ifa_buf.data();
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_ep_create(&params, &ep));
}


TEST_F(cpy_iface_test, short_host_to_device_and_back) {
    test::cuda_legacy_buffer legacy(4 << 20);
    test::cuda_vmm_buffer vmm(4 << 20);

    /* no length limit: UCP packs and unpacks whole messages this way */
    for (size_t size : {(size_t)1, (size_t)8, (size_t)4096,
                        (size_t)(3 << 20) + 3}) {
        for (void *dev : {legacy.ptr(), vmm.ptr()}) {
            put_get_short((char*)dev + 5, cpy_test::pattern(size, size));
        }
    }
}


TEST_F(cpy_iface_test, zcopy_all_directions) {
    test::cuda_vmm_buffer dev_a(1 << 20);
    test::cuda_legacy_buffer dev_b(1 << 20);
    const size_t size = 100000;
    bytes_t data      = cpy_test::pattern(size, 3);
    bytes_t back(size);

    uct_iov_t host_iov = iov(data.data(), size);
    ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(m_ep, &host_iov, 1, (uint64_t)dev_a.ptr(),
                                       UCT_INVALID_RKEY, nullptr));
    EXPECT_EQ(data, cpy_test::device_bytes(dev_a.ptr(), size)) << "HtoD";

    uct_iov_t dev_iov = iov(dev_b.ptr(), size);
    ASSERT_EQ(UCS_OK, uct_ep_get_zcopy(m_ep, &dev_iov, 1, (uint64_t)dev_a.ptr(),
                                       UCT_INVALID_RKEY, nullptr));
    EXPECT_EQ(data, cpy_test::device_bytes(dev_b.ptr(), size)) << "DtoD";

    uct_iov_t back_iov = iov(back.data(), size);
    ASSERT_EQ(UCS_OK, uct_ep_get_zcopy(m_ep, &back_iov, 1, (uint64_t)dev_b.ptr(),
                                       UCT_INVALID_RKEY, nullptr));
    EXPECT_EQ(data, back) << "DtoH";

    /* a strided iov gathers into the contiguous remote range */
    uct_iov_t strided = iov(data.data(), 10, 3, 100);
    ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(m_ep, &strided, 1, (uint64_t)dev_a.ptr(),
                                       UCT_INVALID_RKEY, nullptr));
    bytes_t got = cpy_test::device_bytes(dev_a.ptr(), 30);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(std::equal(got.begin() + i * 10, got.begin() + i * 10 + 10,
                               data.begin() + i * 100)) << i;
    }
}


/* With a completion, zero-copy reports UCS_INPROGRESS and delivers it from
 * progress, in order; flush waits for the delivery */
TEST_F(cpy_iface_test, zcopy_completion_from_progress) {
    test::cuda_vmm_buffer dev(1 << 20);
    bytes_t data = cpy_test::pattern(4096, 9);
    std::vector<int> order;

    struct comp_t {
        uct_completion_t    super;
        std::vector<int>    *order;
        int                 id;
    } comps[3];
    for (int i = 0; i < 3; ++i) {
        comps[i].super.func   = [](uct_completion_t *self) {
            comp_t *comp = ucs_container_of(self, comp_t, super);
            comp->order->push_back(comp->id);
        };
        comps[i].super.count  = 1;
        comps[i].super.status = UCS_OK;
        comps[i].order        = &order;
        comps[i].id           = i;
    }

    uct_iov_t host_iov = iov(data.data(), data.size());
    EXPECT_EQ(UCS_INPROGRESS,
              uct_ep_put_zcopy(m_ep, &host_iov, 1, (uint64_t)dev.ptr(),
                               UCT_INVALID_RKEY, &comps[0].super));
    EXPECT_EQ(data, cpy_test::device_bytes(dev.ptr(), data.size()))
        << "the data moved before the call returned";
    EXPECT_EQ(UCS_INPROGRESS,
              uct_ep_get_zcopy(m_ep, &host_iov, 1, (uint64_t)dev.ptr(),
                               UCT_INVALID_RKEY, &comps[1].super));
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, nullptr));
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, &comps[2].super));
    EXPECT_TRUE(order.empty());

    EXPECT_EQ(3u, uct_worker_progress(m_worker));
    EXPECT_EQ(std::vector<int>({0, 1, 2}), order);
    EXPECT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, nullptr));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_iface, 0, nullptr));
    EXPECT_EQ(0u, uct_worker_progress(m_worker));
}


/* A thread without a current context: the owning device's primary context
 * is pushed for the copy and popped after it */
TEST_F(cpy_iface_test, copy_without_current_context) {
    test::cuda_vmm_buffer vmm(1 << 20);
    bytes_t data = cpy_test::pattern(4096, 5), back(4096);
    ucs_status_t put_status = UCS_ERR_LAST, get_status = UCS_ERR_LAST;
    CUcontext before = (CUcontext)1, after = (CUcontext)1;

    std::thread thread([&]() {
        uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&before);
        put_status = uct_ep_put_short(m_ep, data.data(), data.size(),
                                      (uint64_t)vmm.ptr(), UCT_INVALID_RKEY);
        get_status = uct_ep_get_short(m_ep, back.data(), back.size(),
                                      (uint64_t)vmm.ptr(), UCT_INVALID_RKEY);
        uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&after);
    });
    thread.join();

    EXPECT_EQ(nullptr, before);
    EXPECT_EQ(UCS_OK, put_status);
    EXPECT_EQ(UCS_OK, get_status);
    EXPECT_EQ(nullptr, after);
    EXPECT_EQ(data, back);
}


TEST_F(cpy_iface_test, driver_failure_is_the_op_status) {
    SKIP_IF_NOT_EMULATOR();
    test::cuda_vmm_buffer vmm(1 << 20);
    bytes_t data = cpy_test::pattern(64, 7);

    setenv("CUDASIM_FAULTS", "cuMemcpy:1:CUDA_ERROR_UNKNOWN", 1);
    ASSERT_TRUE(cudasim_test::fault_reload());
    EXPECT_EQ(UCS_ERR_IO_ERROR,
              uct_ep_put_short(m_ep, data.data(), data.size(),
                               (uint64_t)vmm.ptr(), UCT_INVALID_RKEY));
    unsetenv("CUDASIM_FAULTS");
    ASSERT_TRUE(cudasim_test::fault_reload());

    put_get_short(vmm.ptr(), data);
}

} // namespace
