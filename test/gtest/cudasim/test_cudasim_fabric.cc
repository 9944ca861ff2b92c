/*
 * The emulator's fabric handles (test/cudasim/cudasim_fabric.c): the device
 * attribute per GPU, IMEX channels and domains, the memory's lifetime
 * across processes, and emulated nodes. What a GPU shows the same way is
 * checked in test_driver_contract.cc (driver_contract.fabric_*), with the
 * importing peer defined here.
 */
#include "fabric_env.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <cstring>

using namespace cudasim_test;


/* what UCX takes for the node (ucs_get_system_id) */
static void read_boot_id(char *id, size_t max)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    memset(id, 0, max);
    if (f != nullptr) {
        if (fgets(id, (int)max, f) == nullptr) {
            id[0] = '\0';
        }
        fclose(f);
    }
}


/* Imports the fabric handle it is sent, reads the exporter's bytes and
 * writes the next ones; with hide_channels, first as a process without an
 * IMEX channel (an empty directory mounted over the channels') */
TEST_PEER_ROLE(fabric_import_peer)
{
    CUmemAllocationProp prop = fabric_prop();
    fabric_import_reply reply;
    CUmemGenericAllocationHandle handle, created;
    fabric_import_msg msg;
    fabric_mapping mapping;
    bool still;
    char what;

    memset(&reply, 0, sizeof(reply));
    if (!chan.recv_obj(msg)) {
        return 11;
    }
    if (msg.hide_channels && !access(imex_channels_dir().c_str(), F_OK)) {
        std::string dir = imex_channels_dir();
        if (unshare(CLONE_NEWNS) ||
            mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) ||
            mount("tmpfs", dir.c_str(), "tmpfs", 0, "mode=755")) {
            perror("mounting an empty directory over the IMEX channels");
            return 121;
        }
    }
    if (!test::cuda_init()) {
        return 10;
    }
    uct_cuda_ipc_ns_drv.cuDeviceGetUuid(&reply.uuid, 0);
    gethostname(reply.host, sizeof(reply.host) - 1);
    read_boot_id(reply.boot_id, sizeof(reply.boot_id));
    reply.create = CUDA_ERROR_UNKNOWN;
    if (msg.hide_channels) {
        reply.create = uct_cuda_ipc_ns_drv.cuMemCreate(&created, msg.size,
                                                       &prop, 0);
        if (reply.create == CUDA_SUCCESS) {
            uct_cuda_ipc_ns_drv.cuMemRelease(created);
        }
    }
    reply.import = uct_cuda_ipc_ns_drv.cuMemImportFromShareableHandle(
            &handle, &msg.handle, CU_MEM_HANDLE_TYPE_FABRIC);
    reply.map    = CUDA_ERROR_UNKNOWN;
    if (reply.import == CUDA_SUCCESS) {
        reply.map = mapping.map(handle, msg.size);
    }
    if (reply.map == CUDA_SUCCESS) {
        reply.data_ok = mapping.holds(msg.seed);
        reply.wrote   = mapping.fill(msg.seed + 1);
    }
    if (!chan.send_obj(reply)) {
        return 12;
    }
    while (chan.recv_obj(what, 60000) && (what == FABRIC_PEER_RECHECK)) {
        still = (reply.map == CUDA_SUCCESS) && mapping.holds(msg.seed + 1) &&
                mapping.fill(msg.seed + 2);
        if (!chan.send_obj(still)) {
            return 13;
        }
    }
    return 0;
}


class test_cudasim_fabric : public base {
protected:
    void SetUp() override {
        base::SetUp();
        if (IsSkipped()) {
            return;
        }
        SKIP_IF_NOT_EMULATOR();
        m_env.reset(new fabric_env());
        m_size = 2 * granularity();
    }

    void TearDown() override {
        m_env.reset();
    }

    static CUresult import(const CUmemFabricHandle &fh,
                           CUmemGenericAllocationHandle *handle) {
        return uct_cuda_ipc_ns_drv.cuMemImportFromShareableHandle(
                handle, (void*)&fh, CU_MEM_HANDLE_TYPE_FABRIC);
    }

    std::unique_ptr<fabric_env> m_env;
    size_t                      m_size = 0;
};


/* CUDASIM_FABRIC is a mask of the machine's GPUs; a device without it
 * refuses FABRIC at cuMemCreate with CUDA_ERROR_NOT_SUPPORTED (cuda.h,
 * CUDA_ERROR_NOT_SUPPORTED: "not supported on the current system or
 * device") and exports none */
TEST_F(test_cudasim_fabric, attribute_per_gpu)
{
    CUmemAllocationProp prop = fabric_prop();
    CUmemGenericAllocationHandle handle;
    const char *masks[]      = {"0", "2", "0x2", "1", "0x5", "all", "x"};
    const bool expected[]    = {false, false, false, true, true, true, false};

    for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); ++i) {
        test::scoped_env fabric("CUDASIM_FABRIC", masks[i]);
        EXPECT_EQ(expected[i], fabric_attribute(0)) << masks[i];
    }

    test::scoped_env fabric("CUDASIM_FABRIC", "0");
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate, &handle, m_size, &prop, 0);
    prop = fabric_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate, &handle, m_size, &prop, 0);
    EXPECT_EQ(0, count_files(m_env->domain()));
}


/* cuda.h, cuMemCreate: fabric sharing needs "at least one IMEX channel file
 * accessible by the user"; without one cuMemCreate answers
 * CUDA_ERROR_NOT_PERMITTED. With one, the allocation reports FABRIC among
 * its handle types (cuMemGetAllocationPropertiesFromHandle) */
TEST_F(test_cudasim_fabric, create_needs_a_channel)
{
    CUmemAllocationProp prop = fabric_prop(), got;
    CUmemGenericAllocationHandle handle;
    test::scratch_dir empty("cudasim-imex-none");

    {
        test::scoped_env channels("CUDASIM_IMEX_CHANNELS", empty.path());
        CU_EXPECT(CUDA_ERROR_NOT_PERMITTED, cuMemCreate, &handle, m_size,
                  &prop, 0);
        /* a file that is no channel<N> is none */
        int fd = open((empty.path() + "/channelx").c_str(),
                      O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        ASSERT_GE(fd, 0);
        close(fd);
        CU_EXPECT(CUDA_ERROR_NOT_PERMITTED, cuMemCreate, &handle, m_size,
                  &prop, 0);
    }

    CU_OK(cuMemCreate, &handle, m_size, &prop, 0);
    CU_OK(cuMemGetAllocationPropertiesFromHandle, &got, handle);
    EXPECT_EQ((unsigned)CU_MEM_HANDLE_TYPE_FABRIC,
              (unsigned)got.requestedHandleTypes);
    {
        /* nor is it exported without one (cuda.h lists
         * CUDA_ERROR_NOT_PERMITTED) */
        test::scoped_env channels("CUDASIM_IMEX_CHANNELS", empty.path());
        CUmemFabricHandle fh;
        CU_EXPECT(CUDA_ERROR_NOT_PERMITTED, cuMemExportToShareableHandle, &fh,
                  handle, CU_MEM_HANDLE_TYPE_FABRIC, 0);
    }
    EXPECT_EQ(1, count_files(m_env->domain())) << "its memory in the domain";
    CU_OK(cuMemRelease, handle);
    EXPECT_EQ(0, count_files(m_env->domain()));
}


/* cuda.h, cuMemImportFromShareableHandle: an importer without access to the
 * exporter's IMEX channel gets CUDA_ERROR_NOT_PERMITTED; a channel is of its
 * domain, so a process of another domain gets the same. A handle that is
 * not one (bytes of nothing) is CUDA_ERROR_INVALID_VALUE. */
TEST_F(test_cudasim_fabric, import_needs_the_channel_and_the_domain)
{
    test::scratch_dir other_domain("cudasim-imex-other");
    test::scratch_dir other_channel("cudasim-imex-channel1");
    CUmemGenericAllocationHandle handle;
    CUmemFabricHandle fh, junk;
    fabric_mapping mem;

    ASSERT_EQ(CUDA_SUCCESS, mem.create(m_size));
    ASSERT_EQ(CUDA_SUCCESS, mem.export_handle(&fh));
    {
        test::scoped_env domain("CUDASIM_IMEX_DOMAIN", other_domain.path());
        EXPECT_EQ(CUDA_ERROR_NOT_PERMITTED, import(fh, &handle));
    }
    {
        int fd = open((other_channel.path() + "/channel1").c_str(),
                      O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        ASSERT_GE(fd, 0);
        close(fd);
        test::scoped_env channels("CUDASIM_IMEX_CHANNELS",
                                  other_channel.path());
        EXPECT_EQ(CUDA_ERROR_NOT_PERMITTED, import(fh, &handle));
    }
    {
        /* a process whose device has no fabric handles "cannot support the
         * memory" (cuda.h): CUDA_ERROR_NOT_SUPPORTED */
        test::scoped_env fabric("CUDASIM_FABRIC", "0");
        EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, import(fh, &handle));
    }
    memset(&junk, 0x5a, sizeof(junk));
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, import(junk, &handle));

    ASSERT_EQ(CUDA_SUCCESS, import(fh, &handle));
    CU_OK(cuMemRelease, handle);
}


/* The memory lives while any handle holds it, in any process (cuda.h,
 * cuMemExportToShareableHandle: released "once all shareable handles are
 * closed and the allocation is released"): the exporter's release leaves it
 * to an importer, whose mapping keeps the bytes and after which it still
 * imports; the last release frees it, and its handle then imports nothing
 * (CUDA_ERROR_INVALID_VALUE, the emulator's choice) */
TEST_F(test_cudasim_fabric, memory_lives_while_a_handle_holds_it)
{
    CUmemGenericAllocationHandle first, again;
    fabric_mapping owner, later;
    CUmemFabricHandle fh;

    ASSERT_EQ(CUDA_SUCCESS, owner.create(m_size));
    ASSERT_TRUE(owner.fill(50));
    ASSERT_EQ(CUDA_SUCCESS, owner.export_handle(&fh));
    ASSERT_EQ(CUDA_SUCCESS, import(fh, &first));
    owner.unmap();
    EXPECT_EQ(1, count_files(m_env->domain()));

    ASSERT_EQ(CUDA_SUCCESS, import(fh, &again)) << "held by the first import";
    CU_OK(cuMemRelease, first);
    ASSERT_EQ(CUDA_SUCCESS, later.map(again, m_size));
    EXPECT_TRUE(later.holds(50)) << "the owner's bytes";
    later.unmap();

    EXPECT_EQ(0, count_files(m_env->domain())) << "freed with the last handle";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, import(fh, &first));
}


/* An allocation that requested both types exports both ways; its POSIX fd
 * imports as any, and also holds the memory */
TEST_F(test_cudasim_fabric, posix_fd_and_fabric)
{
    CUmemGenericAllocationHandle by_fd;
    fabric_mapping mem, peer;
    CUmemFabricHandle fh;
    int fd = -1;

    ASSERT_EQ(CUDA_SUCCESS,
              mem.create(m_size, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    ASSERT_TRUE(mem.fill(7));
    ASSERT_EQ(CUDA_SUCCESS, mem.export_handle(&fh));
    CU_OK(cuMemExportToShareableHandle, &fd, mem.handle(),
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    CU_OK(cuMemImportFromShareableHandle, &by_fd, (void*)(uintptr_t)fd,
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    mem.unmap();
    ASSERT_EQ(CUDA_SUCCESS, peer.map(by_fd, m_size));
    EXPECT_TRUE(peer.holds(7));
    EXPECT_EQ(1, count_files(m_env->domain())) << "held by the fd's import";
    peer.unmap();
    EXPECT_EQ(0, count_files(m_env->domain()));
}


/*
 * Emulated nodes (peer_options::node: host name, boot id, CUDASIM_NODE): a
 * process of another node, in its own PID and network namespaces, has GPUs
 * of its own (other UUIDs) and imports a
 * handle of this node through the fabric when it is of the same IMEX
 * domain; of another domain it is refused (CUDA_ERROR_NOT_PERMITTED).
 */
TEST_F(test_cudasim_fabric, another_node_of_the_domain_imports)
{
    test::scratch_dir other_domain("cudasim-imex-other");
    fabric_import_msg msg = {};
    fabric_import_reply reply;
    test::peer_options opts;
    fabric_mapping mem;
    CUuuid uuid;
    bool still  = false;
    int status;

    ASSERT_EQ(CUDA_SUCCESS, mem.create(m_size));
    ASSERT_TRUE(mem.fill(21));
    ASSERT_EQ(CUDA_SUCCESS, mem.export_handle(&msg.handle));
    msg.size = m_size;
    msg.seed = 21;
    CU_OK(cuDeviceGetUuid, &uuid, 0);

    opts.new_pid_ns = true;
    opts.new_net_ns = true;
    {
        char host[64] = {}, boot_id[40];

        gethostname(host, sizeof(host) - 1);
        read_boot_id(boot_id, sizeof(boot_id));
        opts.node = "node-b";
        test::peer importer("fabric_import_peer", opts);
        ASSERT_TRUE(importer.chan().send_obj(msg));
        if (!importer.chan().recv_obj(reply)) {
            status = importer.wait();
            if (test::peer::setup_failed(status)) {
                GTEST_SKIP() << "cannot create namespaces here";
            }
            FAIL() << "importer failed with status " << status;
        }
        EXPECT_NE(0, memcmp(&uuid, &reply.uuid, sizeof(uuid)))
                << "another node's GPU";
        EXPECT_STREQ("node-b", reply.host);
        EXPECT_STRNE(boot_id, reply.boot_id) << "UCX's system id";
        EXPECT_EQ(36u, strnlen(reply.boot_id, sizeof(reply.boot_id)) - 1)
                << reply.boot_id;
        EXPECT_EQ(CUDA_SUCCESS, reply.import)
                << uct_cuda_ipc_ns_driver_error_name(reply.import);
        EXPECT_EQ(CUDA_SUCCESS, reply.map);
        EXPECT_TRUE(reply.data_ok);
        EXPECT_TRUE(reply.wrote);
        EXPECT_TRUE(mem.holds(22)) << "the other node's bytes";
        mem.unmap();
        ASSERT_TRUE(importer.chan().send_obj(FABRIC_PEER_RECHECK));
        ASSERT_TRUE(importer.chan().recv_obj(still));
        EXPECT_TRUE(still) << "held by the other node's import";
        ASSERT_TRUE(importer.chan().send_obj(FABRIC_PEER_DONE));
        EXPECT_EQ(0, importer.wait());
    }
    EXPECT_EQ(0, count_files(m_env->domain()));

    ASSERT_EQ(CUDA_SUCCESS, mem.create(m_size));
    ASSERT_EQ(CUDA_SUCCESS, mem.export_handle(&msg.handle));
    opts.node = "node-c";
    {
        test::scoped_env domain("CUDASIM_IMEX_DOMAIN", other_domain.path());
        test::peer importer("fabric_import_peer", opts);
        ASSERT_TRUE(importer.chan().send_obj(msg));
        ASSERT_TRUE(importer.chan().recv_obj(reply))
                << "importer status " << importer.wait();
        EXPECT_EQ(CUDA_ERROR_NOT_PERMITTED, reply.import)
                << uct_cuda_ipc_ns_driver_error_name(reply.import);
        ASSERT_TRUE(importer.chan().send_obj(FABRIC_PEER_DONE));
        EXPECT_EQ(0, importer.wait());
    }
}
