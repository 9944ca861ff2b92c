/*
 * cudasim tests: sharing memory between two processes - a legacy IPC handle
 * and a VMM allocation exported as a POSIX fd (passed with SCM_RIGHTS) -
 * also across a PID namespace boundary.
 */
#include "cudasim_test.h"
#include "common/scoped_env.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstring>
#include <iostream>
#include <vector>

using namespace cudasim_test;

namespace {

struct share_msg {
    CUipcMemHandle legacy;
    CUipcMemHandle freed;       /* handle of an allocation already freed */
    size_t         legacy_size;
    size_t         vmm_size;    /* 0: no fd */
};

struct share_reply {
    int legacy_open;      /* CUresult of cuIpcOpenMemHandle */
    int legacy_reopen;    /* ... of opening the same handle again */
    int legacy_reopen_same; /* it gave the same pointer */
    int legacy_kept;      /* closing it once left the first open mapped */
    int freed_open;       /* ... of opening the freed allocation's handle */
    int legacy_data_ok;
    int vmm_import;       /* CUresult of cuMemImportFromShareableHandle */
    int vmm_import_prop;  /* ... of cuMemGetAllocationPropertiesFromHandle */
    unsigned vmm_import_handle_types; /* the handle types it reported */
    int vmm_data_ok;
    int legacy_attr_ok;
    /* the peer's ordinal of the device holding each mapping, and the UUID
     * of the legacy one's */
    int legacy_ordinal;
    int vmm_ordinal;
    CUuuid legacy_uuid;
};

const unsigned char SEED_LEGACY_EXPORTER = 1;
const unsigned char SEED_LEGACY_PEER     = 2;
const unsigned char SEED_VMM_EXPORTER    = 3;
const unsigned char SEED_VMM_PEER        = 4;

std::vector<unsigned char> pattern(size_t size, unsigned char seed)
{
    std::vector<unsigned char> buf(size);
    for (size_t i = 0; i < size; ++i) {
        buf[i] = (unsigned char)(i * 31 + seed + (i >> 12));
    }
    return buf;
}

bool check(CUdeviceptr ptr, size_t size, unsigned char seed, CUstream stream)
{
    std::vector<unsigned char> got(size, 0);

    if ((uct_cuda_ipc_ns_drv.cuMemcpyDtoHAsync(got.data(), ptr, size, stream) !=
         CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuStreamSynchronize(stream) != CUDA_SUCCESS)) {
        return false;
    }
    return got == pattern(size, seed);
}

bool write(CUdeviceptr ptr, size_t size, unsigned char seed, CUstream stream)
{
    std::vector<unsigned char> buf = pattern(size, seed);

    return (uct_cuda_ipc_ns_drv.cuMemcpyHtoDAsync(ptr, buf.data(), size,
                                                stream) == CUDA_SUCCESS) &&
           (uct_cuda_ipc_ns_drv.cuStreamSynchronize(stream) == CUDA_SUCCESS);
}

CUmemAccessDesc rw_access()
{
    CUmemAccessDesc access = {};
    access.location.type   = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id     = 0;
    access.flags           = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return access;
}

} // namespace


/* The peer: maps what the test shares, checks it, writes its own pattern */
TEST_PEER_ROLE(cudasim_share_peer)
{
    CUmemGenericAllocationHandle vmm_handle;
    CUmemAccessDesc access = rw_access();
    CUdeviceptr legacy = 0, legacy2, freed, vmm = 0;
    share_reply reply;
    share_msg msg;
    CUstream stream;
    int fd = -1;
    char done;

    memset(&reply, 0, sizeof(reply));
    if (!test::cuda_init()) {
        return 10;
    }
    if (!chan.recv_obj(msg, 30000, &fd)) {
        return 11;
    }
    if (uct_cuda_ipc_ns_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) !=
        CUDA_SUCCESS) {
        return 12;
    }

    reply.legacy_open = uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
            &legacy, msg.legacy, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (reply.legacy_open == CUDA_SUCCESS) {
        reply.legacy_reopen = uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
                &legacy2, msg.legacy, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (reply.legacy_reopen == CUDA_SUCCESS) {
            /* cuda.h: the reference count goes up, the same pointer comes
             * back; a close drops one reference */
            reply.legacy_reopen_same = (legacy2 == legacy);
            reply.legacy_kept =
                    (uct_cuda_ipc_ns_drv.cuIpcCloseMemHandle(legacy2) ==
                     CUDA_SUCCESS) &&
                    (uct_cuda_ipc_ns_drv.cuMemGetAddressRange(
                             nullptr, nullptr, legacy) == CUDA_SUCCESS);
        }
        reply.legacy_data_ok =
                check(legacy, msg.legacy_size, SEED_LEGACY_EXPORTER, stream) &&
                write(legacy, msg.legacy_size, SEED_LEGACY_PEER, stream);

        CUdeviceptr start = 0;
        unsigned int mem_type = 0;
        reply.legacy_ordinal = -1;
        if ((uct_cuda_ipc_ns_drv.cuPointerGetAttribute(
                     &reply.legacy_ordinal,
                     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, legacy) !=
             CUDA_SUCCESS) ||
            (uct_cuda_ipc_ns_drv.cuDeviceGetUuid(&reply.legacy_uuid,
                                                 reply.legacy_ordinal) !=
             CUDA_SUCCESS)) {
            reply.legacy_ordinal = -1;
        }
        reply.legacy_attr_ok =
                (uct_cuda_ipc_ns_drv.cuPointerGetAttribute(
                        &mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                        legacy + 8) == CUDA_SUCCESS) &&
                (mem_type == CU_MEMORYTYPE_DEVICE) &&
                (uct_cuda_ipc_ns_drv.cuMemGetAddressRange(
                        &start, nullptr, legacy + 8) == CUDA_SUCCESS) &&
                (start == legacy);
    }
    reply.freed_open = uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
            &freed, msg.freed, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (reply.freed_open == CUDA_SUCCESS) {
        uct_cuda_ipc_ns_drv.cuIpcCloseMemHandle(freed);
    }

    if ((msg.vmm_size > 0) && (fd >= 0)) {
        reply.vmm_import = uct_cuda_ipc_ns_drv.cuMemImportFromShareableHandle(
                &vmm_handle, (void*)(uintptr_t)fd,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(fd);
        if (reply.vmm_import == CUDA_SUCCESS) {
            CUmemAllocationProp imported_prop;

            reply.vmm_import_prop =
                    uct_cuda_ipc_ns_drv.cuMemGetAllocationPropertiesFromHandle(
                            &imported_prop, vmm_handle);
            reply.vmm_import_handle_types =
                    imported_prop.requestedHandleTypes;
        }
        if ((reply.vmm_import == CUDA_SUCCESS) &&
            (uct_cuda_ipc_ns_drv.cuMemAddressReserve(&vmm, msg.vmm_size, 0, 0,
                                                   0) == CUDA_SUCCESS) &&
            (uct_cuda_ipc_ns_drv.cuMemMap(vmm, msg.vmm_size, 0, vmm_handle,
                                        0) == CUDA_SUCCESS) &&
            (uct_cuda_ipc_ns_drv.cuMemRelease(vmm_handle) == CUDA_SUCCESS) &&
            (uct_cuda_ipc_ns_drv.cuMemSetAccess(vmm, msg.vmm_size, &access,
                                              1) == CUDA_SUCCESS)) {
            reply.vmm_data_ok =
                    check(vmm, msg.vmm_size, SEED_VMM_EXPORTER, stream) &&
                    write(vmm, msg.vmm_size, SEED_VMM_PEER, stream);
            reply.vmm_ordinal = -1;
            uct_cuda_ipc_ns_drv.cuPointerGetAttribute(
                    &reply.vmm_ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    vmm);
        }
    }

    if (!chan.send_obj(reply)) {
        return 13;
    }
    /* keep the mappings until the test has checked our writes */
    if (!chan.recv_obj(done)) {
        return 14;
    }
    if (vmm != 0) {
        uct_cuda_ipc_ns_drv.cuMemUnmap(vmm, msg.vmm_size);
        uct_cuda_ipc_ns_drv.cuMemAddressFree(vmm, msg.vmm_size);
    }
    if (reply.legacy_open == CUDA_SUCCESS) {
        if (uct_cuda_ipc_ns_drv.cuIpcCloseMemHandle(legacy) != CUDA_SUCCESS) {
            return 15;
        }
        /* the last reference gone, the emulator unmaps the memory; the
         * driver may keep it mapped (driver 580: it does), and using the
         * address is undefined */
        if (cudasim_test::is_emulator() &&
            (reply.legacy_reopen == CUDA_SUCCESS) &&
            (uct_cuda_ipc_ns_drv.cuMemGetAddressRange(nullptr, nullptr,
                                                      legacy) ==
             CUDA_SUCCESS)) {
            return 16;
        }
    }
    uct_cuda_ipc_ns_drv.cuStreamDestroy(stream);
    return 0;
}


class test_cudasim_ipc : public base {
protected:
    void run(const test::peer_options &opts, share_reply *reply_p,
             bool *skipped_p);
};


void test_cudasim_ipc::run(const test::peer_options &opts,
                           share_reply *reply_p, bool *skipped_p)
{
    const size_t legacy_size = 3 * 100000 + 17;
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = rw_access();
    CUmemGenericAllocationHandle vmm_handle;
    CUdeviceptr legacy, freed, vmm;
    CUstream stream;
    share_msg msg;
    size_t gran;
    int fd = -1;
    char done = 'D';

    *skipped_p = false;
    memset(&msg, 0, sizeof(msg));
    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CU_OK(cuMemGetAllocationGranularity, &gran, &prop,
          CU_MEM_ALLOC_GRANULARITY_MINIMUM);

    CU_OK(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    CU_OK(cuMemAlloc, &legacy, legacy_size);
    ASSERT_TRUE(write(legacy, legacy_size, SEED_LEGACY_EXPORTER, stream));
    CU_OK(cuIpcGetMemHandle, &msg.legacy, legacy);
    msg.legacy_size = legacy_size;

    CU_OK(cuMemAlloc, &freed, 4096);
    CU_OK(cuIpcGetMemHandle, &msg.freed, freed);
    CU_OK(cuMemFree, freed);

    msg.vmm_size = 2 * gran;
    CU_OK(cuMemCreate, &vmm_handle, msg.vmm_size, &prop, 0);
    CU_OK(cuMemAddressReserve, &vmm, msg.vmm_size, 0, 0, 0);
    CU_OK(cuMemMap, vmm, msg.vmm_size, 0, vmm_handle, 0);
    CU_OK(cuMemSetAccess, vmm, msg.vmm_size, &access, 1);
    ASSERT_TRUE(write(vmm, msg.vmm_size, SEED_VMM_EXPORTER, stream));
    CU_OK(cuMemExportToShareableHandle, &fd, vmm_handle,
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);

    {
        test::peer peer("cudasim_share_peer", opts);

        ASSERT_TRUE(peer.chan().send_obj(msg, fd));
        close(fd);
        if (!peer.chan().recv_obj(*reply_p)) {
            int status = peer.wait();
            if (test::peer::setup_failed(status)) {
                *skipped_p = true; /* could not set up the namespace */
                return;
            }
            FAIL() << "peer failed with status " << status;
        }

        if (reply_p->legacy_open == CUDA_SUCCESS) {
            EXPECT_TRUE(check(legacy, legacy_size, SEED_LEGACY_PEER, stream))
                    << "peer's write to the legacy allocation";
        }
        if (reply_p->vmm_data_ok) {
            EXPECT_TRUE(check(vmm, msg.vmm_size, SEED_VMM_PEER, stream))
                    << "peer's write to the VMM allocation";
        }
        ASSERT_TRUE(peer.chan().send_obj(done));
        EXPECT_EQ(0, peer.wait());
    }

    CU_OK(cuMemUnmap, vmm, msg.vmm_size);
    CU_OK(cuMemAddressFree, vmm, msg.vmm_size);
    CU_OK(cuMemRelease, vmm_handle);
    CU_OK(cuMemFree, legacy);
    CU_OK(cuStreamDestroy, stream);
}


TEST_F(test_cudasim_ipc, two_processes)
{
    share_reply reply;
    bool skipped;

    run(test::peer_options(), &reply, &skipped);
    ASSERT_FALSE(skipped);
    EXPECT_EQ(CUDA_SUCCESS, reply.legacy_open)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_open);
    EXPECT_TRUE(reply.legacy_data_ok);
    EXPECT_TRUE(reply.legacy_attr_ok);
    /* opened again in the same context: the same mapping, one more
     * reference (cuda.h), not CUDA_ERROR_ALREADY_MAPPED */
    EXPECT_EQ(CUDA_SUCCESS, reply.legacy_reopen)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_reopen);
    EXPECT_TRUE(reply.legacy_reopen_same);
    EXPECT_TRUE(reply.legacy_kept);
    /* the emulator refuses the handle of a freed allocation; the driver
     * may open it (driver 580 does: cuMemFree keeps the block in its pool),
     * and using it is undefined */
    if (is_emulator()) {
        EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, reply.freed_open);
    }
    EXPECT_EQ(CUDA_SUCCESS, reply.vmm_import)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.vmm_import);
    EXPECT_TRUE(reply.vmm_data_ok);
    /* an imported allocation reports no handle types, on the driver as on
     * the emulator: the importer must not require them */
    EXPECT_EQ(CUDA_SUCCESS, reply.vmm_import_prop);
    EXPECT_EQ(0u, reply.vmm_import_handle_types);
}


TEST_F(test_cudasim_ipc, pid_namespace)
{
    test::peer_options opts;
    share_reply reply;
    bool skipped;

    opts.new_pid_ns = true;
    run(opts, &reply, &skipped);
    if (skipped) {
        GTEST_SKIP() << "cannot create a PID namespace here";
    }
    /* the emulator opens a legacy handle of another PID namespace (the
     * peer is pid 1 there, we are not), as driver 580 on an H200 did
     * (docs/testing.md, "What a GPU showed"); on a GPU the answer is
     * reported (driver_contract.legacy_handle_opens_from_another_pid_ns
     * checks what the module relies on) */
    if (is_emulator()) {
        EXPECT_EQ(CUDA_SUCCESS, reply.legacy_open)
                << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_open);
        EXPECT_TRUE(reply.legacy_data_ok);
        EXPECT_EQ(CUDA_SUCCESS, reply.legacy_reopen);
        EXPECT_TRUE(reply.legacy_reopen_same);
        EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, reply.freed_open);
    } else {
        std::cout << "[ INFO     ] legacy IPC across PID namespaces: "
                  << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_open)
                  << std::endl;
    }
    /* a VMM allocation passed as a file descriptor crosses them */
    EXPECT_EQ(CUDA_SUCCESS, reply.vmm_import)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.vmm_import);
    EXPECT_TRUE(reply.vmm_data_ok);
}


/* CUDASIM_LEGACY_IPC_PIDNS=refuse: the driver older reports describe, which
 * refuses a legacy handle of another PID namespace ("invalid device
 * context"); one of ours still opens */
TEST_F(test_cudasim_ipc, pid_namespace_refusing_driver)
{
    SKIP_IF_NOT_EMULATOR();
    test::scoped_env refuse("CUDASIM_LEGACY_IPC_PIDNS", "refuse");
    test::peer_options opts;
    share_reply reply;
    bool skipped;

    opts.new_pid_ns = true;
    run(opts, &reply, &skipped);
    if (skipped) {
        GTEST_SKIP() << "cannot create a PID namespace here";
    }
    EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, reply.legacy_open)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_open);
    EXPECT_EQ(CUDA_SUCCESS, reply.vmm_import)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.vmm_import);

    run(test::peer_options(), &reply, &skipped);
    ASSERT_FALSE(skipped);
    EXPECT_EQ(CUDA_SUCCESS, reply.legacy_open)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_open);
    EXPECT_TRUE(reply.legacy_data_ok);
}


/*
 * Per-process visible GPUs (CUDASIM_VISIBLE_DEVICES, as CUDA_VISIBLE_DEVICES):
 * the test's memory is on GPU 0 of the machine; a peer on a machine of two
 * GPUs that sees GPU 0 under its ordinal 1 maps it (same UUID, its own
 * ordinal); a peer that sees only GPU 1 cannot: VMM import fails with
 * CUDA_ERROR_NOT_SUPPORTED, as the driver refuses memory of a GPU the
 * process cannot use, and legacy open with CUDA_ERROR_INVALID_VALUE
 * ("invalid argument", what users report when the exporter's GPU is not
 * visible in the importing container, docs/driver-contract.md). In
 * our PID namespace and another one.
 */
class test_cudasim_visible : public test_cudasim_ipc,
                             public ::testing::WithParamInterface<bool> {
protected:
    void run_seeing(const char *visible, share_reply *reply)
    {
        test::scoped_env count("CUDASIM_DEVICE_COUNT", "2");
        test::scoped_env devices("CUDASIM_VISIBLE_DEVICES", visible);
        test::peer_options opts;
        bool skipped;

        opts.new_pid_ns = GetParam();
        run(opts, reply, &skipped);
        if (skipped) {
            GTEST_SKIP() << "cannot create a PID namespace here";
        }
    }
};


TEST_P(test_cudasim_visible, gpu_under_another_ordinal_maps)
{
    SKIP_IF_NOT_EMULATOR();
    share_reply reply;
    CUuuid uuid;

    run_seeing("1,0", &reply);
    if (IsSkipped()) {
        return;
    }
    EXPECT_EQ(CUDA_SUCCESS, reply.vmm_import)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.vmm_import);
    EXPECT_TRUE(reply.vmm_data_ok);
    EXPECT_EQ(1, reply.vmm_ordinal) << "GPU 0 is the peer's ordinal 1";
    ASSERT_EQ(CUDA_SUCCESS, reply.legacy_open)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_open);
    EXPECT_TRUE(reply.legacy_data_ok);
    EXPECT_EQ(1, reply.legacy_ordinal);
    CU_OK(cuDeviceGetUuid, &uuid, 0);
    EXPECT_EQ(0, memcmp(&uuid, &reply.legacy_uuid, sizeof(uuid)))
            << "one GPU, one UUID, whatever its ordinal";
}


TEST_P(test_cudasim_visible, gpu_not_visible_refuses_import)
{
    SKIP_IF_NOT_EMULATOR();
    share_reply reply;

    run_seeing("1", &reply);
    if (IsSkipped()) {
        return;
    }
    EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, reply.vmm_import)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.vmm_import);
    EXPECT_FALSE(reply.vmm_data_ok);
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, reply.legacy_open)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.legacy_open);
}


INSTANTIATE_TEST_SUITE_P(pid_ns, test_cudasim_visible,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ? "other" :
                                                             "same");
                         });


/* Allocates legacy memory, sends its handle, then waits to be killed */
TEST_PEER_ROLE(cudasim_legacy_owner_peer)
{
    CUipcMemHandle handle;
    CUdeviceptr dev;
    char never;

    if (!test::cuda_init() ||
        (uct_cuda_ipc_ns_drv.cuMemAlloc(&dev, 4096) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuIpcGetMemHandle(&handle, dev) !=
         CUDA_SUCCESS) ||
        !chan.send_obj(handle)) {
        return 1;
    }
    (void)chan.recv_obj(never, -1);
    return 2;
}

/*
 * A killed exporter's legacy memory is gone: the driver frees a process's
 * memory when it exits, so its handle no longer opens (the emulator gives
 * CUDA_ERROR_INVALID_VALUE, as for a freed allocation), as soon as it died
 * (a zombie not reaped yet) and after.
 */
TEST_F(test_cudasim_ipc, killed_owner_memory_no_longer_opens)
{
    CUipcMemHandle handle;
    CUdeviceptr dev;
    siginfo_t info = {};

    test::peer peer("cudasim_legacy_owner_peer");
    ASSERT_TRUE(peer.chan().recv_obj(handle));
    CU_OK(cuIpcOpenMemHandle, &dev, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    CU_OK(cuIpcCloseMemHandle, dev);

    ASSERT_EQ(0, kill(peer.pid(), SIGKILL));
    /* dead, not reaped: waitid with WNOWAIT returns once it is a zombie */
    ASSERT_EQ(0, waitid(P_PID, peer.pid(), &info, WEXITED | WNOWAIT));
    CUresult res = uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
            &dev, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    EXPECT_NE(CUDA_SUCCESS, res) << "a dead exporter's memory opened";
    if (is_emulator()) {
        EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, res)
                << uct_cuda_ipc_ns_driver_error_name(res);
    }
    if (res == CUDA_SUCCESS) {
        uct_cuda_ipc_ns_drv.cuIpcCloseMemHandle(dev);
    }

    EXPECT_EQ(128 + SIGKILL, peer.wait());
    res = uct_cuda_ipc_ns_drv.cuIpcOpenMemHandle(
            &dev, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    EXPECT_NE(CUDA_SUCCESS, res) << "a dead exporter's memory opened";
    if (res == CUDA_SUCCESS) {
        uct_cuda_ipc_ns_drv.cuIpcCloseMemHandle(dev);
    }
}
