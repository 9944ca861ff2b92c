/*
 * cudasim tests: initialization, errors, cuGetProcAddress, devices,
 * contexts, fault injection.
 */
#include "cudasim_test.h"
#include "common/scoped_env.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstring>
#include <thread>
#include <vector>

using namespace cudasim_test;

#define STR2(_x) #_x
#define STR(_x)  STR2(_x)


class test_cudasim_core : public base {
};


TEST_F(test_cudasim_core, error_names)
{
    const char *str = nullptr;

    CU_OK(cuGetErrorName, CUDA_SUCCESS, &str);
    EXPECT_STREQ("CUDA_SUCCESS", str);
    CU_OK(cuGetErrorName, CUDA_ERROR_INVALID_CONTEXT, &str);
    EXPECT_STREQ("CUDA_ERROR_INVALID_CONTEXT", str);
    CU_OK(cuGetErrorName, CUDA_ERROR_ALREADY_MAPPED, &str);
    EXPECT_STREQ("CUDA_ERROR_ALREADY_MAPPED", str);
    CU_OK(cuGetErrorString, CUDA_ERROR_OUT_OF_MEMORY, &str);
    EXPECT_STREQ("out of memory", str);

    /* every CUresult the emulator returns has a name and a string */
    for (CUresult res : {CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
                         CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NO_DEVICE,
                         CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_CONTEXT,
                         CUDA_ERROR_MAP_FAILED, CUDA_ERROR_ALREADY_MAPPED,
                         CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_FOUND,
                         CUDA_ERROR_NOT_READY, CUDA_ERROR_ILLEGAL_ADDRESS,
                         CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_PERMITTED,
                         CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                         CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                         CUDA_ERROR_UNKNOWN}) {
        str = nullptr;
        CU_OK(cuGetErrorName, res, &str);
        EXPECT_NE(nullptr, str);
        str = nullptr;
        CU_OK(cuGetErrorString, res, &str);
        EXPECT_NE(nullptr, str);
    }

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetErrorName, (CUresult)123456, &str);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetErrorString, (CUresult)123456,
              &str);
}


TEST_F(test_cudasim_core, init_and_version)
{
    int version = 0;

    CU_OK(cuInit, 0); /* again: fine */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuInit, 1);
    CU_OK(cuDriverGetVersion, &version);
    EXPECT_GE(version, 12000);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion, nullptr);
}


TEST_F(test_cudasim_core, get_proc_address)
{
    typedef __typeof__(cuGetProcAddress) get_proc_t;
    get_proc_t *get_proc = (get_proc_t*)driver_sym("cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult status;
    void *func;

    ASSERT_NE(nullptr, get_proc);

    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemAlloc", &func, CUDA_VERSION,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(CU_GET_PROC_ADDRESS_SUCCESS, status);
    EXPECT_EQ(driver_sym(STR(cuMemAlloc)), func);

    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuIpcOpenMemHandle", &func, CUDA_VERSION,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(driver_sym("cuIpcOpenMemHandle_v2"), func);

    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuDeviceGetUuid", &func, CUDA_VERSION,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(driver_sym("cuDeviceGetUuid_v2"), func);

    /* one base name, two signatures: CUDA 13.0's cuCtxGetDevice_v2 takes a
     * context too. The driver table asks for the version its prototypes
     * are (12000), and gets the one-argument function */
    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuCtxGetDevice", &func, 13000,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(driver_sym("cuCtxGetDevice_v2"), func);
    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuCtxGetDevice", &func, 12000,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(driver_sym("cuCtxGetDevice"), func);
    EXPECT_EQ(func, (void*)uct_cuda_ipc_ns_drv.cuCtxGetDevice);

    /* an older version gets the older ABI */
    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuDeviceGetUuid", &func, 11000,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_NE(driver_sym("cuDeviceGetUuid_v2"), func);
    EXPECT_NE(nullptr, func);

    EXPECT_EQ(CUDA_ERROR_NOT_FOUND,
              get_proc("cuNoSuchFunction", &func, CUDA_VERSION,
                       CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, status);

    EXPECT_EQ(CUDA_ERROR_NOT_FOUND,
              get_proc("cuMemCreate", &func, 10000,
                       CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, status);
}


/* cuMemHostRegister: the v1 ABI from CUDA 4.0, cuMemHostRegister_v2 from 6.5 */
TEST_F(test_cudasim_core, get_proc_address_host_register)
{
    typedef __typeof__(cuGetProcAddress) get_proc_t;
    typedef __typeof__(cuMemHostRegister) host_register_t;
    get_proc_t *get_proc = (get_proc_t*)driver_sym("cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult status;
    void *func;

    ASSERT_NE(nullptr, get_proc);

    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemHostRegister", &func, CUDA_VERSION,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(driver_sym("cuMemHostRegister_v2"), func);
    EXPECT_EQ((void*)uct_cuda_ipc_ns_drv.cuMemHostRegister, func);
    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemHostRegister", &func, 6050,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(driver_sym("cuMemHostRegister_v2"), func);
    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemHostRegister", &func, 6040,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_NE(driver_sym("cuMemHostRegister_v2"), func);
    EXPECT_NE(nullptr, func);
    EXPECT_EQ(CUDA_ERROR_NOT_FOUND,
              get_proc("cuMemHostRegister", &func, 3020,
                       CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, status);

    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemHostUnregister", &func, 4000,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT_EQ(driver_sym(STR(cuMemHostUnregister)), func);
    ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemHostGetDevicePointer", &func,
                                     CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,
                                     &status));
    EXPECT_EQ(driver_sym(STR(cuMemHostGetDevicePointer)), func);

    if (is_emulator()) {
        const size_t page = sysconf(_SC_PAGESIZE);
        host_register_t *v1;
        void *p;

        /* the v1 ABI registers whole pages only (CUDA 4.0's rule) */
        ASSERT_EQ(CUDA_SUCCESS, get_proc("cuMemHostRegister", &func, 4000,
                                         CU_GET_PROC_ADDRESS_DEFAULT,
                                         &status));
        v1 = (host_register_t*)func;
        p  = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, p);
        EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
                  v1((char*)p + 8, page, CU_MEMHOSTREGISTER_PORTABLE));
        EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
                  v1(p, page + 8, CU_MEMHOSTREGISTER_PORTABLE));
        EXPECT_EQ(CUDA_SUCCESS, v1(p, 2 * page, CU_MEMHOSTREGISTER_PORTABLE));
        CU_EXPECT(CUDA_SUCCESS, cuMemHostUnregister, p);
        munmap(p, 2 * page);
    }
}


TEST_F(test_cudasim_core, devices)
{
    int count = 0, value = -1;
    char name[256], bus_id[32];
    CUuuid uuid1, uuid2;
    CUdevice dev;

    CU_OK(cuDeviceGetCount, &count);
    ASSERT_GE(count, 1);
    CU_OK(cuDeviceGet, &dev, 0);
    EXPECT_EQ(0, dev);
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet, &dev, count);
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet, &dev, -1);

    CU_OK(cuDeviceGetName, name, sizeof(name), 0);
    EXPECT_GT(strlen(name), 0u);
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName, name, sizeof(name),
              count);

    CU_OK(cuDeviceGetUuid, &uuid1, 0);
    CU_OK(cuDeviceGetUuid, &uuid2, 0);
    EXPECT_EQ(0, memcmp(&uuid1, &uuid2, sizeof(uuid1)));
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetUuid, &uuid1, count);

    CU_OK(cuDeviceGetAttribute, &value, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
          0);
    EXPECT_EQ(1, value);
    CU_OK(cuDeviceGetAttribute, &value,
          CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
    EXPECT_GE(value, 1);
    CU_OK(cuDeviceGetAttribute, &value, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
          0);
    EXPECT_GE(value, 1);
    CU_OK(cuDeviceGetAttribute, &value, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute, &value,
              CU_DEVICE_ATTRIBUTE_MAX, 0);
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetAttribute, &value,
              CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, count);

    CU_OK(cuDeviceGetPCIBusId, bus_id, sizeof(bus_id), 0);
    EXPECT_EQ(12u, strlen(bus_id)) << bus_id; /* dddd:bb:dd.f */
}


TEST_F(test_cudasim_core, emulated_device_attributes)
{
    SKIP_IF_NOT_EMULATOR();
    char name[256];
    int value, can = -1;

    CU_OK(cuDeviceGetName, name, sizeof(name), 0);
    EXPECT_STREQ("CUDA Sim Device", name);
    CU_OK(cuDeviceCanAccessPeer, &can, 0, 0);
    EXPECT_EQ(0, can);
    CU_OK(cuDeviceGetAttribute, &value,
          CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
    EXPECT_EQ(1, value);
    CU_OK(cuDeviceGetAttribute, &value,
          CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0);
    EXPECT_EQ(1, value);
    CU_OK(cuDeviceGetAttribute, &value,
          CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0);
    EXPECT_EQ(0, value);
    CU_OK(cuDeviceGetAttribute, &value, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED,
          0);
    EXPECT_EQ(1, value);
    /* a valid attribute the emulator has no value for */
    CU_OK(cuDeviceGetAttribute, &value,
          CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, 0);
}


TEST_F(test_cudasim_core, contexts)
{
    CUcontext ctx1, ctx2, cur, popped;
    CUdevice dev;

    CU_OK(cuDevicePrimaryCtxRetain, &ctx1, 0);
    CU_OK(cuDevicePrimaryCtxRetain, &ctx2, 0);
    EXPECT_EQ(ctx1, ctx2); /* one primary context per device */

    CU_OK(cuCtxGetCurrent, &cur);
    EXPECT_EQ(ctx1, cur);
    CU_OK(cuCtxGetDevice, &dev);
    EXPECT_EQ(0, dev);

    CU_OK(cuCtxPushCurrent, ctx1);
    CU_OK(cuCtxPopCurrent, &popped);
    EXPECT_EQ(ctx1, popped);
    CU_OK(cuCtxGetCurrent, &cur);
    EXPECT_EQ(ctx1, cur);

    CU_OK(cuDevicePrimaryCtxRelease, 0);
    CU_OK(cuDevicePrimaryCtxRelease, 0);
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain, &ctx2, -1);
}


TEST_F(test_cudasim_core, no_context_on_new_thread)
{
    CUcontext ctx;

    CU_OK(cuCtxGetCurrent, &ctx);
    std::thread thr([ctx] {
        CUdeviceptr ptr;
        CUcontext cur = (CUcontext)1, popped;
        CUstream stream;
        CUevent event;
        CUdevice dev;

        CU_EXPECT(CUDA_SUCCESS, cuCtxGetCurrent, &cur);
        EXPECT_EQ(nullptr, cur);
        CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetDevice, &dev);
        CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc, &ptr, 4096);
        CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate, &stream, 0);
        CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuEventCreate, &event, 0);
        CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent, &popped);

        /* SetCurrent(NULL) on an empty stack is a no-op */
        CU_EXPECT(CUDA_SUCCESS, cuCtxSetCurrent, nullptr);
        CU_EXPECT(CUDA_SUCCESS, cuCtxPushCurrent, ctx);
        CU_EXPECT(CUDA_SUCCESS, cuMemAlloc, &ptr, 4096);
        CU_EXPECT(CUDA_SUCCESS, cuMemFree, ptr);
        CU_EXPECT(CUDA_SUCCESS, cuCtxSetCurrent, nullptr); /* pops */
        CU_EXPECT(CUDA_SUCCESS, cuCtxGetCurrent, &cur);
        EXPECT_EQ(nullptr, cur);
    });
    thr.join();
}


/* ---- before cuInit, in a fresh process ---------------------------------- */

/*
 * CUDA in a fork()ed child without exec is undefined on a GPU (NVIDIA's CUDA
 * C++ guidelines, rule 1.6; the driver answers "initialization error"): the
 * emulator refuses every call there with CUDA_ERROR_NOT_INITIALIZED, cuInit
 * too, so that neither the module nor a test relies on it. The parent's
 * CUDA is unaffected.
 */
TEST_F(test_cudasim_core, refused_in_a_fork_child)
{
    SKIP_IF_NOT_EMULATOR();
    CUresult results[4] = {};
    CUdeviceptr dev;
    CUcontext ctx;
    int pfd[2], count;

    CU_OK(cuMemAlloc, &dev, 4096);
    ASSERT_EQ(0, pipe(pfd));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        CUdeviceptr child_dev;
        results[0] = uct_cuda_ipc_ns_drv.cuInit(0);
        results[1] = uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&ctx);
        results[2] = uct_cuda_ipc_ns_drv.cuMemAlloc(&child_dev, 4096);
        results[3] = uct_cuda_ipc_ns_drv.cuMemsetD8(dev, 1, 4096);
        _exit((write(pfd[1], results, sizeof(results)) == sizeof(results)) ?
              0 : 1);
    }
    close(pfd[1]);
    ssize_t n = read(pfd[0], results, sizeof(results));
    close(pfd[0]);
    int status;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    ASSERT_EQ((ssize_t)sizeof(results), n);
    for (CUresult res : results) {
        EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, res)
                << uct_cuda_ipc_ns_driver_error_name(res);
    }

    CU_OK(cuDeviceGetCount, &count);
    CU_OK(cuMemsetD8, dev, 2, 4096);
    CU_OK(cuStreamSynchronize, nullptr);
    CU_OK(cuMemFree, dev);
}


TEST_PEER_ROLE(cudasim_before_init)
{
    typedef __typeof__(cuInit) init_t;
    typedef __typeof__(cuDeviceGetCount) count_t;
    typedef __typeof__(cuMemAlloc) alloc_t;
    typedef __typeof__(cuDriverGetVersion) version_t;
    void *dl = dlopen(driver_path(), RTLD_NOW | RTLD_LOCAL);
    int results[6], count = 0, version = 0;
    CUdeviceptr ptr;

    if (dl == nullptr) {
        return 1;
    }
    init_t *init       = (init_t*)dlsym(dl, STR(cuInit));
    count_t *get_count = (count_t*)dlsym(dl, STR(cuDeviceGetCount));
    alloc_t *alloc     = (alloc_t*)dlsym(dl, STR(cuMemAlloc));
    version_t *get_ver = (version_t*)dlsym(dl, STR(cuDriverGetVersion));
    if (!init || !get_count || !alloc || !get_ver) {
        return 2;
    }

    results[0] = get_count(&count);
    results[1] = alloc(&ptr, 4096);
    results[2] = get_ver(&version); /* works before cuInit */
    results[3] = init(1);
    results[4] = init(0);
    results[5] = get_count(&count);
    return chan.send(results, sizeof(results)) ? 0 : 3;
}

TEST_F(test_cudasim_core, before_init)
{
    int results[6];
    test::peer peer("cudasim_before_init");

    ASSERT_TRUE(peer.chan().recv_obj(results));
    EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, results[0]);
    EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, results[1]);
    EXPECT_EQ(CUDA_SUCCESS, results[2]);
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, results[3]);
    EXPECT_EQ(CUDA_SUCCESS, results[4]);
    EXPECT_EQ(CUDA_SUCCESS, results[5]);
    EXPECT_EQ(0, peer.wait());
}


/* ---- environment knobs, in a fresh process ------------------------------ */

TEST_PEER_ROLE(cudasim_env_probe)
{
    typedef __typeof__(cuInit) init_t;
    typedef __typeof__(cuDeviceGetCount) count_t;
    typedef __typeof__(cuDeviceGetUuid) uuid_t_;
    struct {
        int    init_res;
        int    count;
        CUuuid uuid;
    } reply = {};
    void *dl = dlopen(driver_path(), RTLD_NOW | RTLD_LOCAL);

    if (dl == nullptr) {
        return 1;
    }
    init_t *init       = (init_t*)dlsym(dl, STR(cuInit));
    count_t *get_count = (count_t*)dlsym(dl, STR(cuDeviceGetCount));
    uuid_t_ *get_uuid  = (uuid_t_*)dlsym(dl, STR(cuDeviceGetUuid));
    if (!init || !get_count || !get_uuid) {
        return 2;
    }
    reply.init_res = init(0);
    if (reply.init_res == CUDA_SUCCESS) {
        get_count(&reply.count);
        get_uuid(&reply.uuid, 0);
    }
    return chan.send_obj(reply) ? 0 : 3;
}

struct env_probe_reply {
    int    init_res;
    int    count;
    CUuuid uuid;
};

static env_probe_reply env_probe(const char *var, const char *value)
{
    env_probe_reply reply = {};
    std::string saved;
    const char *old = getenv(var);

    if (old != nullptr) {
        saved = old;
    }
    if (value != nullptr) {
        setenv(var, value, 1);
    }
    {
        test::peer peer("cudasim_env_probe");
        if (old != nullptr) {
            setenv(var, saved.c_str(), 1);
        } else {
            unsetenv(var);
        }
        EXPECT_TRUE(peer.chan().recv_obj(reply));
        EXPECT_EQ(0, peer.wait());
    }
    return reply;
}

TEST_F(test_cudasim_core, uuid_same_in_every_process)
{
    CUuuid uuid;
    env_probe_reply reply = env_probe("CUDASIM_UNUSED_VAR", nullptr);

    CU_OK(cuDeviceGetUuid, &uuid, 0);
    ASSERT_EQ(CUDA_SUCCESS, reply.init_res);
    EXPECT_EQ(0, memcmp(&uuid, &reply.uuid, sizeof(uuid)));
}

TEST_F(test_cudasim_core, env_device_count)
{
    SKIP_IF_NOT_EMULATOR();
    env_probe_reply reply;

    reply = env_probe("CUDASIM_DEVICE_COUNT", "0");
    EXPECT_EQ(CUDA_ERROR_NO_DEVICE, reply.init_res);

    reply = env_probe("CUDASIM_DEVICE_COUNT", "3");
    EXPECT_EQ(CUDA_SUCCESS, reply.init_res);
    EXPECT_EQ(3, reply.count);
}

/* CUDASIM_VISIBLE_DEVICES, read as the driver reads CUDA_VISIBLE_DEVICES:
 * ordinal i is the i-th GPU listed, whose UUID is the GPU's; the list ends
 * at the first entry that names no GPU or one listed already */
TEST_F(test_cudasim_core, env_visible_devices)
{
    SKIP_IF_NOT_EMULATOR();
    test::scoped_env count("CUDASIM_DEVICE_COUNT", "3");
    env_probe_reply reply;
    CUuuid uuid;

    CU_OK(cuDeviceGetUuid, &uuid, 0); /* GPU 0 of the machine */

    reply = env_probe("CUDASIM_VISIBLE_DEVICES", "0");
    ASSERT_EQ(CUDA_SUCCESS, reply.init_res);
    EXPECT_EQ(1, reply.count);
    EXPECT_EQ(0, memcmp(&uuid, &reply.uuid, sizeof(uuid)));

    reply = env_probe("CUDASIM_VISIBLE_DEVICES", "2,0");
    ASSERT_EQ(CUDA_SUCCESS, reply.init_res);
    EXPECT_EQ(2, reply.count);
    EXPECT_NE(0, memcmp(&uuid, &reply.uuid, sizeof(uuid)))
            << "ordinal 0 is GPU 2";

    reply = env_probe("CUDASIM_VISIBLE_DEVICES", "1,7,0");
    ASSERT_EQ(CUDA_SUCCESS, reply.init_res);
    EXPECT_EQ(1, reply.count) << "the list ends at GPU 7, which is not there";

    reply = env_probe("CUDASIM_VISIBLE_DEVICES", "1,1");
    EXPECT_EQ(1, reply.count) << "GPU 1 listed twice";

    reply = env_probe("CUDASIM_VISIBLE_DEVICES", "");
    EXPECT_EQ(CUDA_ERROR_NO_DEVICE, reply.init_res);

    reply = env_probe("CUDASIM_VISIBLE_DEVICES", "3");
    EXPECT_EQ(CUDA_ERROR_NO_DEVICE, reply.init_res);
}

TEST_F(test_cudasim_core, env_uuid_seed)
{
    SKIP_IF_NOT_EMULATOR();
    CUuuid uuid;
    env_probe_reply reply = env_probe("CUDASIM_UUID_SEED", "12345");

    CU_OK(cuDeviceGetUuid, &uuid, 0);
    ASSERT_EQ(CUDA_SUCCESS, reply.init_res);
    EXPECT_NE(0, memcmp(&uuid, &reply.uuid, sizeof(uuid)));
}

TEST_F(test_cudasim_core, device_memory_limit)
{
    SKIP_IF_NOT_EMULATOR();
    CUdeviceptr ptr;

    /* default limit: 4 GiB per device */
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc, &ptr, 5ull << 30);
    CU_OK(cuMemAlloc, &ptr, 1 << 20);
    CU_OK(cuMemFree, ptr);
}


/* ---- fault injection ---------------------------------------------------- */

class test_cudasim_faults : public base {
protected:
    void SetUp() override {
        base::SetUp();
        if (IsSkipped()) {
            return;
        }
        SKIP_IF_NOT_EMULATOR();
    }

    void TearDown() override {
        unsetenv("CUDASIM_FAULTS");
        fault_reload();
    }

    void set_faults(const char *spec) {
        setenv("CUDASIM_FAULTS", spec, 1);
        ASSERT_TRUE(fault_reload());
    }
};


TEST_F(test_cudasim_faults, nth_call)
{
    CUdeviceptr ptr[4];

    set_faults("cuMemAlloc:3:CUDA_ERROR_OUT_OF_MEMORY");
    CU_OK(cuMemAlloc, &ptr[0], 4096);
    CU_OK(cuMemAlloc, &ptr[1], 4096);
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc, &ptr[2], 4096);
    CU_OK(cuMemAlloc, &ptr[3], 4096);
    CU_OK(cuMemFree, ptr[0]);
    CU_OK(cuMemFree, ptr[1]);
    CU_OK(cuMemFree, ptr[3]);
}


TEST_F(test_cudasim_faults, every_call_and_by_number)
{
    CUipcMemHandle handle = {};
    CUdeviceptr ptr;
    int count;

    set_faults("cuIpcOpenMemHandle:*:CUDA_ERROR_INVALID_CONTEXT,"
               "cuDeviceGetCount:2:801");
    for (int i = 0; i < 5; ++i) {
        CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuIpcOpenMemHandle, &ptr, handle,
                  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    }
    CU_OK(cuDeviceGetCount, &count);
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuDeviceGetCount, &count);
    CU_OK(cuDeviceGetCount, &count);

    /* reload resets the counters */
    ASSERT_TRUE(fault_reload());
    CU_OK(cuDeviceGetCount, &count);
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuDeviceGetCount, &count);
}


TEST_F(test_cudasim_faults, stream_functions)
{
    CUstream stream;

    set_faults("cuStreamSynchronize:*:CUDA_ERROR_ILLEGAL_ADDRESS,"
               "cuStreamCreate:1:CUDA_ERROR_OUT_OF_MEMORY");
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuStreamCreate, &stream, 0);
    CU_OK(cuStreamCreate, &stream, 0);
    CU_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize, stream);
    CU_OK(cuStreamDestroy, stream);
}


TEST_F(test_cudasim_faults, bad_spec)
{
    setenv("CUDASIM_FAULTS", "cuMemAlloc:zero:CUDA_ERROR_NOPE", 1);
    EXPECT_FALSE(fault_reload());
}
