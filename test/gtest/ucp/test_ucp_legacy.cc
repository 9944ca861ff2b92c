/*
 * UCP with legacy (cuMemAlloc) memory owned by a peer in another PID
 * namespace: cu_ipc_ns refuses its key at unpack (a legacy handle cannot be
 * opened there), warns once per owner, and UCP moves the data without it:
 * tag messages staged through the driver (cu_cpy_ns) with either protocol
 * setting, RMA with protocols v2 (UCX_PROTO_ENABLE=y) through active
 * messages packed and unpacked by cu_cpy_ns, that is, by the driver.
 * docs/ucp.md, "Legacy memory from another PID namespace".
 *
 * Those tests set UCX_CUDA_IPC_NS_OWNER_COPY=n. With its default, y, the
 * same memory goes through cu_ipc_ns:
 * the owner's broker copies it (docs/owner-copies.md), for tag messages and
 * RMA with either protocol setting; the copies the brokers launched show it.
 * So does VMM memory without a shareable handle type (vLLM's cumem
 * allocator), which nobody but its owner can map, in any namespace.
 */
#include "common/cuda_alloc.h"
#include "common/uct_util.h"
#include "common/peer.h"
#include "common/pod_net.h"
#include "common/scoped_env.h"
#include "common/ucp_side.h"

extern "C" {
#include "cuda_ipc_ns_broker_serve.h"
#include "cuda_ipc_ns_cache.h"
#include <ucs/debug/log_def.h>
}

#include <gtest/gtest.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <dlfcn.h>
#include <unistd.h>


namespace {

using test::ucp_side;
typedef std::vector<uint8_t> bytes_t;

const size_t MiB      = 1ul << 20;
const size_t MAX_SIZE = 4 * MiB + 8192 + 8;
const size_t SIZES[]  = {8, 64 * 1024, MAX_SIZE};
/* UCX_TLS: cu_ipc_ns, the CUDA copy transport (cu_cpy_ns, or UCX's own
 * cuda_copy where it is loaded) and tcp: test::module_tls() */
/* what cu_cpy_ns copies with; the test helpers use HtoD/DtoH */
const char *COPY_FAULT = "cuMemcpy:*:CUDA_ERROR_ILLEGAL_ADDRESS";


enum legacy_op : uint32_t {
    OP_RECV = 1, /* receive a tag message of size, check it holds seed */
    OP_SEND,     /* fill with seed, send a tag message of size */
    OP_FILL,     /* fill with seed */
    OP_CHECK,    /* check the first size bytes hold seed */
    OP_FAULT,    /* seed 1: the driver's cuMemcpy fails; 0: it works again */
    OP_COPIES,   /* the copies our broker launched for importers */
    OP_EXIT
};

struct legacy_cmd {
    uint32_t op;
    uint32_t seed;
    uint64_t size;
};

struct legacy_hello {
    uint64_t addr;
    uint32_t rkey_len;
    uint8_t  rkey[1024];
};


using test::seed_pattern;
using test::seed_fill;
using test::seed_holds;


/* What the owner allocates (from its environment) and the tests too */
const char *MEMORY_ENV = "TEST_UCP_LEGACY_MEMORY";

/* MAX_SIZE bytes of cuMemAlloc memory, or of VMM memory without a
 * shareable handle type when @a unshareable */
class test_memory {
public:
    explicit test_memory(bool unshareable)
    {
        if (unshareable) {
            m_vmm.reset(new test::cuda_vmm_buffer(MAX_SIZE, false));
        } else {
            m_legacy.reset(new test::cuda_legacy_buffer(MAX_SIZE));
        }
    }

    /* the kind the environment names */
    test_memory() : test_memory(getenv(MEMORY_ENV) != nullptr) {}

    void *ptr() const { return m_vmm ? m_vmm->ptr() : m_legacy->ptr(); }
    size_t size() const { return MAX_SIZE; }

private:
    std::unique_ptr<test::cuda_legacy_buffer> m_legacy;
    std::unique_ptr<test::cuda_vmm_buffer>    m_vmm;
};


/* A test's name for its protocol setting (UCX_PROTO_ENABLE) */
std::string proto_name(const ::testing::TestParamInfo<const char*> &info)
{
    return (info.param[0] == 'y') ? "v2" : "v1";
}


/* Copies the brokers of this process launched for importers */
int32_t broker_copies()
{
    uct_cuda_ipc_ns_broker_serve_stats_t stats;
    uct_cuda_ipc_ns_broker_serve_get_stats(&stats);
    return (int32_t)stats.copies;
}


/* Makes the emulator's cuMemcpy fail (or work again); false when the driver
 * is not the emulator */
bool copy_faults(bool on)
{
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
    void *lib = (path == nullptr) ? nullptr :
                dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) {
        return false;
    }
    auto reload = (int (*)(void))dlsym(lib, "cudasim_fault_reload");
    dlclose(lib);
    if (reload == nullptr) {
        return false;
    }
    if (on) {
        setenv("CUDASIM_FAULTS", COPY_FAULT, 1);
    } else {
        unsetenv("CUDASIM_FAULTS");
    }
    return reload() == (on ? 1 : 0);
}


/* Counts the warnings of cu_ipc_ns about legacy keys, and the errors of
 * cu_cpy_ns about failed copies, while installed */
class log_counter {
public:
    /* @a quiet: the errors of failed copies are counted, not printed */
    explicit log_counter(bool quiet = false)
    {
        s_quiet  = quiet;
        s_legacy = s_copy_errors = 0;
        s_last.clear();
        ucs_log_push_handler(handler);
    }
    ~log_counter() { ucs_log_pop_handler(); }

    static std::atomic<int> s_legacy;
    static std::atomic<int> s_copy_errors;
    static std::string      s_last;
    static bool             s_quiet;

private:
    static ucs_log_func_rc_t
    handler(const char *file, unsigned line, const char *function,
            ucs_log_level_t level, const ucs_log_component_config_t *comp,
            const char *format, va_list ap)
    {
        char msg[2048];
        va_list aq;

        va_copy(aq, ap);
        vsnprintf(msg, sizeof(msg), format, aq);
        va_end(aq);
        if ((level == UCS_LOG_LEVEL_WARN) &&
            strstr(msg, "legacy CUDA IPC handle")) {
            ++s_legacy;
            s_last = msg;
        } else if (level == UCS_LOG_LEVEL_ERROR) {
            if (strstr(msg, "cuda_cpy_ns: ")) {
                ++s_copy_errors;
            }
            if (s_quiet && (strstr(msg, "cuda_cpy_ns: ") ||
                            strstr(msg, "cuMemcpy() failed") ||
                            strstr(msg, "_short() failed"))) {
                return UCS_LOG_FUNC_RC_STOP;
            }
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
};

std::atomic<int> log_counter::s_legacy;
std::atomic<int> log_counter::s_copy_errors;
std::string      log_counter::s_last;
bool             log_counter::s_quiet;


/* Owner: legacy memory registered for RMA, tag messages on demand */
TEST_PEER_ROLE(ucp_legacy_owner)
{
    std::unique_ptr<log_counter> quiet;
    legacy_hello hello = {};
    char client_addr[4096];
    ucp_mem_h memh;
    legacy_cmd cmd;

    if (!test::cuda_init()) {
        return 1;
    }
    test_memory buf;
    ucp_side side;
    if (!side.ok()) {
        return 2;
    }

    if (!side.map_and_pack(buf.ptr(), buf.size(), &memh, hello.rkey,
                           sizeof(hello.rkey), &hello.rkey_len)) {
        return 3;
    }
    hello.addr     = (uintptr_t)buf.ptr();

    bytes_t address = side.address();
    if (!chan.send(address.data(), address.size()) || !chan.send_obj(hello)) {
        return 4;
    }
    ssize_t len = chan.recv(client_addr, sizeof(client_addr), 60000);
    if ((len <= 0) ||
        (side.connect(bytes_t(client_addr, client_addr + len)) != UCS_OK)) {
        return 5;
    }

    while (side.chan_recv(chan, &cmd, sizeof(cmd)) && (cmd.op != OP_EXIT)) {
        int32_t result = UCS_OK;
        switch (cmd.op) {
        case OP_RECV:
            result = side.wait(side.recv(buf.ptr(), cmd.size, cmd.seed),
                               nullptr);
            if ((result == UCS_OK) && !seed_holds(buf.ptr(), cmd.seed, cmd.size)) {
                result = UCS_ERR_MESSAGE_TRUNCATED; /* stands for "wrong bytes" */
            }
            break;
        case OP_SEND:
            seed_fill(buf.ptr(), cmd.seed, cmd.size);
            result = side.wait(side.send(buf.ptr(), cmd.size, cmd.seed),
                               nullptr);
            break;
        case OP_FILL:
            seed_fill(buf.ptr(), cmd.seed, cmd.size);
            break;
        case OP_CHECK:
            result = seed_holds(buf.ptr(), cmd.seed, cmd.size) ? UCS_OK :
                     UCS_ERR_MESSAGE_TRUNCATED;
            break;
        case OP_FAULT:
            /* the errors of the failed copies are expected: not printed */
            if (cmd.seed != 0) {
                quiet.reset(new log_counter(true));
            } else {
                quiet.reset();
            }
            result = copy_faults(cmd.seed != 0) ? UCS_OK : UCS_ERR_UNSUPPORTED;
            break;
        case OP_COPIES:
            result = broker_copies();
            break;
        }
        if (!chan.send_obj(result)) {
            return 6;
        }
    }

    side.close_ep();
    ucp_mem_unmap(side.context, memh);
    chan.send_obj(cmd); /* done: the client may tear down */
    return 0;
}




/* One owner in its own PID namespace, connected to a UCP side of ours */
struct owner_link {
    explicit owner_link(const char *proto, uint32_t pid_number = 0) :
        peer("ucp_legacy_owner", options(proto, pid_number)),
        side(nullptr, proto)
    {
        char owner_addr[4096];
        ssize_t len = peer.chan().recv(owner_addr, sizeof(owner_addr), 60000);
        if ((len <= 0) || !peer.chan().recv_obj(hello, 60000) || !side.ok() ||
            (side.connect(bytes_t(owner_addr, owner_addr + len)) != UCS_OK)) {
            return;
        }
        bytes_t address = side.address();
        connected = peer.chan().send(address.data(), address.size());
    }

    /* the owner takes the same protocols from its environment */
    static test::peer_options options(const char *proto, uint32_t pid_number)
    {
        test::peer_options opts;
        opts.pid_number = pid_number;
        if (proto != nullptr) {
            setenv("UCX_PROTO_ENABLE", proto, 1);
        } else {
            unsetenv("UCX_PROTO_ENABLE");
        }
        opts.new_pid_ns = true;
        return opts;
    }

    /* a command to the owner, progressing our worker; its result */
    int32_t call(uint32_t op, uint32_t seed, size_t size)
    {
        legacy_cmd cmd = {op, seed, size};
        int32_t result = UCS_ERR_LAST;
        if (!peer.chan().send_obj(cmd) ||
            !side.chan_recv(peer.chan(), &result, sizeof(result))) {
            return UCS_ERR_LAST;
        }
        return result;
    }

    ucs_status_t flush()
    {
        ucp_request_param_t param = {};
        return side.wait(ucp_ep_flush_nbx(side.ep, &param), nullptr);
    }

    /* a tag message of @a size from @a buf, filled with @a seed, which the
     * owner receives and checks */
    void tag_to_owner(void *buf, size_t size, uint32_t seed)
    {
        legacy_cmd cmd = {OP_RECV, seed, size};
        int32_t result = UCS_ERR_LAST;

        seed_fill(buf, seed, size);
        ASSERT_TRUE(peer.chan().send_obj(cmd));
        EXPECT_EQ(UCS_OK, side.wait(side.send(buf, size, seed), nullptr));
        ASSERT_TRUE(side.chan_recv(peer.chan(), &result, sizeof(result)));
        EXPECT_EQ(UCS_OK, result) << "tag to the owner";
    }

    /* a tag message the owner fills with @a seed, received into @a buf */
    void tag_from_owner(void *buf, size_t size, uint32_t seed)
    {
        legacy_cmd cmd = {OP_SEND, seed, size};
        int32_t result = UCS_ERR_LAST;

        ucs_status_ptr_t rreq = side.recv(buf, size, seed);
        ASSERT_TRUE(peer.chan().send_obj(cmd));
        EXPECT_EQ(UCS_OK, side.wait(rreq, nullptr));
        ASSERT_TRUE(side.chan_recv(peer.chan(), &result, sizeof(result)));
        EXPECT_EQ(UCS_OK, result);
        EXPECT_TRUE(seed_holds(buf, seed, size)) << "tag from the owner";
    }

    /* ucp_put of @a size bytes of @a buf, filled with @a seed, to the
     * owner's memory, flushed; the owner checks them */
    void put(void *buf, size_t size, uint32_t seed, ucp_rkey_h rkey)
    {
        ucp_request_param_t param = {};

        seed_fill(buf, seed, size);
        EXPECT_EQ(UCS_OK, side.wait(ucp_put_nbx(side.ep, buf, size,
                                                hello.addr, rkey, &param),
                                    nullptr));
        EXPECT_EQ(UCS_OK, flush());
        EXPECT_EQ(UCS_OK, call(OP_CHECK, seed, size)) << "put";
    }

    /* ucp_get of @a size bytes of the owner's memory, filled with @a seed,
     * into @a buf, flushed */
    void get(void *buf, size_t size, uint32_t seed, ucp_rkey_h rkey)
    {
        ucp_request_param_t param = {};

        EXPECT_EQ(UCS_OK, call(OP_FILL, seed, size));
        EXPECT_EQ(UCS_OK, side.wait(ucp_get_nbx(side.ep, buf, size,
                                                hello.addr, rkey, &param),
                                    nullptr));
        EXPECT_EQ(UCS_OK, flush());
        EXPECT_TRUE(seed_holds(buf, seed, size)) << "get";
    }

    int finish()
    {
        legacy_cmd cmd = {OP_EXIT, 0, 0};
        if (peer.chan().send_obj(cmd)) {
            side.chan_recv(peer.chan(), &cmd, sizeof(cmd));
        }
        side.close_ep();
        return peer.wait();
    }

    test::peer   peer;
    ucp_side     side;
    legacy_hello hello     = {};
    bool         connected = false;
};


class ucp_legacy : public ::testing::TestWithParam<const char* /* proto */> {
protected:
    void SetUp() override
    {
        /* both sides read it, the owner from its environment */
        m_owner_copy.reset(new test::scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY",
                                                owner_copy()));
        /* both sides read it */
        m_direct.reset(new test::scoped_env("UCX_CUDA_IPC_NS_LEGACY_DIRECT",
                                            legacy_direct()));
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        setenv("UCX_TLS", test::module_tls().c_str(), 1);
        test::use_pod_network_device();
    }

    void TearDown() override
    {
        unsetenv("UCX_TLS");
        unsetenv("UCX_NET_DEVICES");
        unsetenv("UCX_PROTO_ENABLE");
        copy_faults(false);
        m_direct.reset();
        m_owner_copy.reset();
    }

    /* UCX_CUDA_IPC_NS_OWNER_COPY: off, the keys are refused */
    virtual const char *owner_copy() const { return "n"; }

    /* UCX_CUDA_IPC_NS_LEGACY_DIRECT: the owner's lane (or none), not our
     * own open of its legacy memory (ucp_legacy_direct takes that) */
    virtual const char *legacy_direct() const { return "n"; }

    std::unique_ptr<test::scoped_env> m_owner_copy;
    std::unique_ptr<test::scoped_env> m_direct;
};


/* The refusal is a warning a user sees, once per owner process */
TEST_F(ucp_legacy, unpack_warns_once_per_owner)
{
    log_counter logs;
    owner_link first(nullptr);
    ASSERT_TRUE(first.connected);

    for (int i = 0; i < 3; ++i) {
        ucp_rkey_h rkey;
        ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(first.side.ep, first.hello.rkey,
                                             &rkey));
        ucp_rkey_destroy(rkey);
    }
    EXPECT_EQ(1, log_counter::s_legacy) << "three keys of one owner";
    std::string msg = log_counter::s_last;
    for (const char *words : {"cuMemAlloc", "PID namespace", "cuMemCreate",
                              "UCX_CUDA_IPC_NS_OWNER_COPY=y",
                              "POSIX_FILE_DESCRIPTOR", "UCX_PROTO_ENABLE=y",
                              "copies device memory with the CPU"}) {
        EXPECT_NE(std::string::npos, msg.find(words)) << words << ": " << msg;
    }

    owner_link second(nullptr);
    ASSERT_TRUE(second.connected);
    for (int i = 0; i < 2; ++i) {
        ucp_rkey_h rkey;
        ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(second.side.ep,
                                             second.hello.rkey, &rkey));
        ucp_rkey_destroy(rkey);
    }
    EXPECT_EQ(2, log_counter::s_legacy) << "a second owner";

    EXPECT_EQ(0, first.finish());
    EXPECT_EQ(0, second.finish());
}


/* Tag messages both ways, staged through the driver, with either protocol
 * setting */
TEST_P(ucp_legacy, tag_both_ways)
{
    owner_link owner(GetParam());
    ASSERT_TRUE(owner.connected);
    test::cuda_legacy_buffer local(MAX_SIZE);
    uint32_t seed = 1;

    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        ASSERT_NO_FATAL_FAILURE(owner.tag_to_owner(local.ptr(), size, ++seed));
        ASSERT_NO_FATAL_FAILURE(owner.tag_from_owner(local.ptr(), size,
                                                     ++seed));
    }
    EXPECT_EQ(0, owner.finish());
}

INSTANTIATE_TEST_SUITE_P(proto, ucp_legacy,
                         ::testing::Values("n", "y"),
                         proto_name);


/* RMA with protocols v2: the bytes arrive, and through the driver: when the
 * driver's copies fail on the side that writes the destination, not one
 * byte of it changes. The request still completes with UCS_OK: UCP
 * (1.13.1 and 1.22.0) drops the status of a memory-type unpack (the put
 * handler of ucp/rma/rma_sw.c, ucp_get_rep_handler, ucp_dt_contig_unpack
 * return void); the failure shows only as cu_cpy_ns's error in the log of
 * the process whose copy failed. The test checks the log, not the status.
 * UCX 1.22.0 instead aborts that process (ucs_fatal) */
TEST_F(ucp_legacy, rma_proto_v2_through_the_driver)
{
    owner_link owner("y");
    ASSERT_TRUE(owner.connected);
    test::cuda_legacy_buffer local(MAX_SIZE);
    ucp_request_param_t param = {};
    ucp_rkey_h rkey;
    uint32_t seed = 1;

    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(owner.side.ep, owner.hello.rkey,
                                         &rkey));
    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        owner.put(local.ptr(), size, ++seed, rkey);
        owner.get(local.ptr(), size, ++seed, rkey);
    }

    if (!copy_faults(false)) {
        ucp_rkey_destroy(rkey);
        EXPECT_EQ(0, owner.finish());
        GTEST_SKIP() << "the driver is not the emulator: no fault injection";
    }

    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    if ((major > 1) || (minor > 13)) {
        /* UCX 1.22.0 aborts the process whose memory-type copy failed
         * (ucs_fatal in ucp_mem_type_unpack, ucp/dt/dt.c): a put with
         * failing copies at the owner kills the owner, and that is the
         * proof its copy went through the driver */
        EXPECT_EQ(UCS_OK, owner.call(OP_FAULT, 1, 0));
        seed_fill(local.ptr(), ++seed, 8);
        owner.side.wait(ucp_put_nbx(owner.side.ep, local.ptr(), 8,
                                    owner.hello.addr, rkey, &param), nullptr);
        owner.flush();
        ucp_rkey_destroy(rkey);
        EXPECT_NE(0, owner.peer.wait()) << "the owner survived its failed copy";
        return; /* ~owner_link force-closes our endpoint */
    }

    log_counter logs(true);
    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        ucs_status_t status;

        /* put: the owner unpacks into its memory */
        uint32_t before = ++seed;
        EXPECT_EQ(UCS_OK, owner.call(OP_FILL, before, MAX_SIZE));
        seed_fill(local.ptr(), ++seed, size);
        ASSERT_EQ(UCS_OK, owner.call(OP_FAULT, 1, 0));
        status = owner.side.wait(ucp_put_nbx(owner.side.ep, local.ptr(), size,
                                             owner.hello.addr, rkey, &param),
                                 nullptr);
        ucs_status_t flushed = owner.flush();
        ASSERT_EQ(UCS_OK, owner.call(OP_FAULT, 0, 0));
        EXPECT_EQ(UCS_OK, owner.call(OP_CHECK, before, MAX_SIZE))
                << "put with failing copies at the owner changed its memory "
                << "(put " << ucs_status_string(status) << ", flush "
                << ucs_status_string(flushed) << ")";

        /* get: we unpack into our memory */
        before = ++seed;
        seed_fill(local.ptr(), before, MAX_SIZE);
        EXPECT_EQ(UCS_OK, owner.call(OP_FILL, ++seed, size));
        ASSERT_TRUE(copy_faults(true));
        status  = owner.side.wait(ucp_get_nbx(owner.side.ep, local.ptr(), size,
                                              owner.hello.addr, rkey, &param),
                                  nullptr);
        flushed = owner.flush();
        ASSERT_TRUE(copy_faults(false));
        EXPECT_TRUE(seed_holds(local.ptr(), before, MAX_SIZE))
                << "get with failing copies here changed our memory "
                << "(get " << ucs_status_string(status) << ", flush "
                << ucs_status_string(flushed) << ")";
    }
    /* ours only: the owner's are in its own process */
    EXPECT_GE(log_counter::s_copy_errors, (int)(sizeof(SIZES) / sizeof(SIZES[0])))
            << "cu_cpy_ns reports each failed copy";

    ucp_rkey_destroy(rkey);
    EXPECT_EQ(0, owner.finish());
}

/* The owner's copies carry legacy memory of another PID namespace through
 * cu_ipc_ns (docs/owner-copies.md): UCX_CUDA_IPC_NS_OWNER_COPY=y on both
 * sides, since each owns memory the other reads or writes (a tag rendezvous
 * goes either way). Each transfer must show as copies a broker launched */
class ucp_owner_copy : public ucp_legacy {
protected:
    void SetUp() override
    {
        if (unshareable()) {
            m_memory.reset(new test::scoped_env(MEMORY_ENV, "vmm_no_fd"));
        }
        ucp_legacy::SetUp();
    }

    void TearDown() override
    {
        ucp_legacy::TearDown();
        m_memory.reset();
    }

    const char *owner_copy() const override { return "y"; }

    /* both sides' memory: VMM without a shareable handle type, else legacy */
    virtual bool unshareable() const { return false; }

    /* the owner's pid in its PID namespace (0: 1) */
    virtual uint32_t owner_pid_number() const { return 0; }

    /* copies launched by both brokers, ours and the owner's */
    static int32_t copies(owner_link &owner)
    {
        int32_t theirs = owner.call(OP_COPIES, 0, 0);
        return (theirs < 0) ? theirs : (theirs + broker_copies());
    }

    void tag_both_ways_through_the_owner();
    void rma_through_the_owner();

    std::unique_ptr<test::scoped_env> m_memory;
};


/* Tag messages both ways: a rendezvous moves its data through the owner's
 * copies, and no key is refused */
void ucp_owner_copy::tag_both_ways_through_the_owner()
{
    log_counter logs;
    owner_link owner(GetParam(), owner_pid_number());
    ASSERT_TRUE(owner.connected);
    test_memory local(unshareable());
    uint32_t seed = 1;

    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        int32_t before = copies(owner);
        ASSERT_GE(before, 0);

        ASSERT_NO_FATAL_FAILURE(owner.tag_to_owner(local.ptr(), size, ++seed));
        int32_t sent = copies(owner);
        ASSERT_NO_FATAL_FAILURE(owner.tag_from_owner(local.ptr(), size,
                                                     ++seed));

        if (size == MAX_SIZE) { /* a rendezvous */
            EXPECT_GT(sent, before) << "tag to the owner: no copy by an owner";
            EXPECT_GT(copies(owner), sent)
                    << "tag from the owner: no copy by an owner";
        }
    }
    EXPECT_EQ(0, log_counter::s_legacy) << log_counter::s_last;
    EXPECT_EQ(0, owner.finish());
}


/* ucp_put/ucp_get of every size on the owner's legacy memory: each one is
 * copied by the owner (so none by the CPU, as protocols v1 would without
 * cu_ipc_ns), bytes checked on both sides */
void ucp_owner_copy::rma_through_the_owner()
{
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    if ((GetParam()[0] == 'n') && ((major > 1) || (minor > 13))) {
        GTEST_SKIP() << "UCX " << major << "." << minor << " has no RMA on "
                     << "protocols v1 (ucp_put_nbx: UCS_ERR_UNSUPPORTED)";
    }

    log_counter logs;
    owner_link owner(GetParam(), owner_pid_number());
    ASSERT_TRUE(owner.connected);
    test_memory local(unshareable());
    ucp_rkey_h rkey;
    uint32_t seed = 1;

    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(owner.side.ep, owner.hello.rkey,
                                         &rkey));
    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        int32_t before = owner.call(OP_COPIES, 0, 0);
        ASSERT_GE(before, 0);

        owner.put(local.ptr(), size, ++seed, rkey);
        int32_t put = owner.call(OP_COPIES, 0, 0);
        EXPECT_GT(put, before) << "put: no copy by the owner";

        owner.get(local.ptr(), size, ++seed, rkey);
        EXPECT_GT(owner.call(OP_COPIES, 0, 0), put) << "get: no copy by the owner";
    }
    EXPECT_EQ(0, log_counter::s_legacy) << log_counter::s_last;

    ucp_rkey_destroy(rkey);
    EXPECT_EQ(0, owner.finish());
}

TEST_P(ucp_owner_copy, tag_both_ways_through_the_owner)
{
    tag_both_ways_through_the_owner();
}


TEST_P(ucp_owner_copy, rma_through_the_owner)
{
    rma_through_the_owner();
}

INSTANTIATE_TEST_SUITE_P(proto, ucp_owner_copy,
                         ::testing::Values("n", "y"),
                         proto_name);


/* Legacy memory on both sides, the pid numbers different (the owner pid 1
 * of its own PID namespace, we are not), UCX_CUDA_IPC_NS_LEGACY_DIRECT=auto:
 * each side opens the other's handle itself (docs/owner-copies.md, "Which
 * path a legacy key takes"), so tag rendezvous and RMA of every size move
 * the bytes with no copy by either broker; bytes checked on both sides */
class ucp_legacy_direct : public ucp_owner_copy {
protected:
    const char *legacy_direct() const override { return "auto"; }

    /* lookups in our mapping cache: what cu_ipc_ns mapped or found here */
    static uint64_t cache_lookups()
    {
        uct_cuda_ipc_ns_cache_stats_t stats;

        uct_cuda_ipc_ns_cache_get_stats(&stats);
        return stats.hits + stats.misses;
    }
};


TEST_P(ucp_legacy_direct, tag_both_ways_opened_here)
{
    log_counter logs;
    owner_link owner(GetParam());
    ASSERT_TRUE(owner.connected);
    test_memory local(false);
    uint32_t seed = 1;
    int32_t before = copies(owner);
    ASSERT_GE(before, 0);

    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        ASSERT_NO_FATAL_FAILURE(owner.tag_to_owner(local.ptr(), size, ++seed));
        uint64_t lookups = cache_lookups();
        ASSERT_NO_FATAL_FAILURE(owner.tag_from_owner(local.ptr(), size,
                                                     ++seed));
        if (size == MAX_SIZE) { /* a rendezvous: we read the owner's memory */
            EXPECT_GT(cache_lookups(), lookups)
                    << "tag from the owner: not through our mapping cache";
        }
    }
    EXPECT_EQ(before, copies(owner)) << "a broker copied";
    EXPECT_EQ(0, log_counter::s_legacy) << log_counter::s_last;
    EXPECT_EQ(0, owner.finish());
}


TEST_P(ucp_legacy_direct, rma_opened_here)
{
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    if ((GetParam()[0] == 'n') && ((major > 1) || (minor > 13))) {
        GTEST_SKIP() << "UCX " << major << "." << minor << " has no RMA on "
                     << "protocols v1 (ucp_put_nbx: UCS_ERR_UNSUPPORTED)";
    }

    log_counter logs;
    owner_link owner(GetParam());
    ASSERT_TRUE(owner.connected);
    test_memory local(false);
    ucp_rkey_h rkey;
    uint32_t seed = 1;
    int32_t before = copies(owner);
    ASSERT_GE(before, 0);

    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(owner.side.ep, owner.hello.rkey,
                                         &rkey));
    for (size_t size : SIZES) {
        SCOPED_TRACE(size);
        uint64_t lookups = cache_lookups();
        owner.put(local.ptr(), size, ++seed, rkey);
        EXPECT_GT(cache_lookups(), lookups) << "put: not through cu_ipc_ns";
        lookups = cache_lookups();
        owner.get(local.ptr(), size, ++seed, rkey);
        EXPECT_GT(cache_lookups(), lookups) << "get: not through cu_ipc_ns";
    }
    EXPECT_EQ(before, copies(owner)) << "a broker copied";
    EXPECT_EQ(0, log_counter::s_legacy) << log_counter::s_last;

    ucp_rkey_destroy(rkey);
    EXPECT_EQ(0, owner.finish());
}

INSTANTIATE_TEST_SUITE_P(proto, ucp_legacy_direct,
                         ::testing::Values("n", "y"),
                         proto_name);


/* UCX_CUDA_IPC_NS_LEGACY_DIRECT=auto between processes whose pid numbers
 * are equal in their PID namespaces (the owner gets ours in its own, as
 * pods started alike get alike pids): each side predicts the driver's
 * refusal from the other's key and never tries; the owner's copies move
 * every tag rendezvous and RMA, bytes checked on both sides */
class ucp_legacy_direct_equal_pid : public ucp_owner_copy {
protected:
    const char *legacy_direct() const override { return "auto"; }
    uint32_t owner_pid_number() const override { return getpid(); }
};


TEST_P(ucp_legacy_direct_equal_pid, tag_both_ways_through_the_owner)
{
    tag_both_ways_through_the_owner();
}


TEST_P(ucp_legacy_direct_equal_pid, rma_through_the_owner)
{
    rma_through_the_owner();
}

INSTANTIATE_TEST_SUITE_P(proto, ucp_legacy_direct_equal_pid,
                         ::testing::Values("n", "y"),
                         proto_name);


/* UCX_CUDA_IPC_NS_LEGACY_DIRECT=auto on a driver that refuses legacy
 * handles of another PID namespace (the emulator's
 * CUDASIM_LEGACY_IPC_PIDNS=refuse, as older drivers are reported to): each
 * side's first open fails, and the owner's copies move every tag rendezvous
 * and RMA, bytes checked on both sides, no key refused */
class ucp_legacy_direct_refused : public ucp_owner_copy {
protected:
    void SetUp() override
    {
        /* both sides read it at each open, the owner from its environment */
        m_refuse.reset(new test::scoped_env("CUDASIM_LEGACY_IPC_PIDNS",
                                            "refuse"));
        ucp_owner_copy::SetUp();
        if (!IsSkipped() && !cudasim_test_is_emulator()) {
            GTEST_SKIP() << "the refusing driver is the emulator's setting";
        }
    }

    void TearDown() override
    {
        ucp_owner_copy::TearDown();
        m_refuse.reset();
    }

    const char *legacy_direct() const override { return "auto"; }

    static bool cudasim_test_is_emulator()
    {
        void *dl = dlopen(getenv("UCX_CUDA_IPC_NS_DRIVER"),
                          RTLD_NOW | RTLD_NOLOAD);
        bool emulator = (dl != nullptr) &&
                        (dlsym(dl, "cudasim_is_emulator") != nullptr);
        if (dl != nullptr) {
            dlclose(dl);
        }
        return emulator;
    }

    std::unique_ptr<test::scoped_env> m_refuse;
};


TEST_P(ucp_legacy_direct_refused, tag_both_ways_through_the_owner)
{
    tag_both_ways_through_the_owner();
}


TEST_P(ucp_legacy_direct_refused, rma_through_the_owner)
{
    rma_through_the_owner();
}

INSTANTIATE_TEST_SUITE_P(proto, ucp_legacy_direct_refused,
                         ::testing::Values("n", "y"),
                         proto_name);


/* The same on VMM memory without a shareable handle type on both sides
 * (vLLM's cumem allocator): only its owner can copy it */
class ucp_owner_copy_unshareable : public ucp_owner_copy {
protected:
    bool unshareable() const override { return true; }
};


TEST_P(ucp_owner_copy_unshareable, tag_both_ways_through_the_owner)
{
    tag_both_ways_through_the_owner();
}


TEST_P(ucp_owner_copy_unshareable, rma_through_the_owner)
{
    rma_through_the_owner();
}

INSTANTIATE_TEST_SUITE_P(proto, ucp_owner_copy_unshareable,
                         ::testing::Values("n", "y"),
                         proto_name);


/* The same between pods with GPUs of their own (a machine of two GPUs, the
 * owner seeing GPU 1 only, we GPU 0 only): neither side can use the other's
 * GPU, so the copies stage through pinned host memory on both sides
 * (docs/owner-copies.md, "The pinned host ring"), where before UCP moved the
 * data without cu_ipc_ns */
class ucp_owner_copy_other_gpu : public ucp_owner_copy {
protected:
    void SetUp() override
    {
        /* the owner's driver reads them at its cuInit; ours has read its
         * own already */
        m_count.reset(new test::scoped_env("CUDASIM_DEVICE_COUNT", "2"));
        m_gpus.reset(new test::scoped_env("CUDASIM_VISIBLE_DEVICES", "1"));
        ucp_owner_copy::SetUp();
    }

    void TearDown() override
    {
        ucp_owner_copy::TearDown();
        m_gpus.reset();
        m_count.reset();
    }

    std::unique_ptr<test::scoped_env> m_count, m_gpus;
};


TEST_P(ucp_owner_copy_other_gpu, tag_both_ways_through_the_owner)
{
    tag_both_ways_through_the_owner();
}


TEST_P(ucp_owner_copy_other_gpu, rma_through_the_owner)
{
    rma_through_the_owner();
}

INSTANTIATE_TEST_SUITE_P(proto, ucp_owner_copy_other_gpu,
                         ::testing::Values("n", "y"),
                         proto_name);

} // namespace
