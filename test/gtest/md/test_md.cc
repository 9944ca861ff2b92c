/*
 * Memory domain: registration, export, rkey pack/unpack, memory types,
 * addresses and reachability, through the UCT API.
 */
#include "common/cuda_alloc.h"
#include "common/peer.h"
#include "common/scoped_env.h"
#include "common/uct_util.h"

extern "C" {
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include "cuda_ipc_ns_md.h"
#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_compat.h"
}

#include <gtest/gtest.h>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>
#include <fcntl.h>
#include <unistd.h>


namespace test {
bool fault_reload(const char *faults); /* datapath/uct_node.cc */
}

namespace {

const size_t KEY_SIZE = UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE;
typedef std::vector<uint8_t> bytes_t;


uct_component_h find_component()
{
    return test::find_component("cuda_ipc_ns");
}


/* an open cuda_ipc_ns MD; the test is skipped without driver or device */
class md_test : public ::testing::Test {
protected:
    void SetUp() override
    {
        uct_md_config_t *config;

        m_component = find_component();
        ASSERT_NE(nullptr, m_component) << "component not registered";
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
        ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &config));
        ASSERT_EQ(UCS_OK, uct_md_open(m_component, "cuda_ipc_ns", config, &m_md));
        uct_config_release(config);
    }

    void TearDown() override
    {
        if (m_md != nullptr) {
            uct_md_close(m_md);
        }
    }

    ucs_status_t reg(void *address, size_t length, uct_mem_h *memh)
    {
        return uct_md_mem_reg(m_md, address, length,
                              UCT_MD_MEM_ACCESS_ALL | UCT_MD_MEM_FLAG_HIDE_ERRORS,
                              memh);
    }

    bytes_t pack(uct_mem_h memh)
    {
        uct_md_attr_t attr;
        EXPECT_EQ(UCS_OK, uct_md_query(m_md, &attr));
        EXPECT_EQ(KEY_SIZE, attr.rkey_packed_size);
        bytes_t key(attr.rkey_packed_size, 0xee);
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, key.data()));
        return key;
    }

    uct_cuda_ipc_ns_rkey_info_t parse(const bytes_t &key)
    {
        uct_cuda_ipc_ns_rkey_info_t info;
        EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(key.data(), key.size(),
                                                     &info));
        return info;
    }

    ucs_status_t unpack(const bytes_t &key)
    {
        uct_rkey_bundle_t bundle;
        ucs_status_t status = uct_rkey_unpack(m_component, key.data(), &bundle);
        if (status == UCS_OK) {
            uct_rkey_release(m_component, &bundle);
        }
        return status;
    }

    void check_legacy_keys(bool owner_copy);

    uct_component_h m_component = nullptr;
    uct_md_h        m_md        = nullptr;
};


TEST_F(md_test, query) {
    uct_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
    EXPECT_STREQ("cuda_ipc_ns", attr.component_name);
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_REG);
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_NEED_RKEY);
    EXPECT_EQ(UCS_BIT(UCS_MEMORY_TYPE_CUDA), attr.cap.reg_mem_types);
    /* detection is the copy MD's (cpy/test_cpy_md.cc) */
    EXPECT_EQ(0u, attr.cap.detect_mem_types);
    EXPECT_LT(attr.rkey_packed_size, 256u);
}


TEST_F(md_test, mem_query) {
    test::cuda_legacy_buffer legacy(1 << 20);
    std::vector<char> host(4096);

    uct_md_mem_attr_t mem_attr;
    mem_attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE |
                          UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS |
                          UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH;
    ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, (char*)legacy.ptr() + 100, 10,
                                       &mem_attr));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, mem_attr.mem_type);
    EXPECT_EQ(legacy.ptr(), mem_attr.base_address);
    EXPECT_EQ(legacy.size(), mem_attr.alloc_length);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_md_mem_query(m_md, host.data(), 10, &mem_attr));
}


/* Chunks of a reservation (an expandable segment): mem_query reports the
 * mapping of the queried address and the chunks mapped after it up to the
 * queried end, never the reservation (RANGE_*, docs/driver-contract.md),
 * and an unmapped hole of the reservation is not CUDA memory */
TEST_F(md_test, mem_query_chunks_by_mapping) {
    test::cuda_vmm_chunks chunks(3);
    const size_t chunk = chunks.chunk_size();
    char *second       = (char*)chunks.ptr() + chunk;

    uct_md_mem_attr_t mem_attr;
    mem_attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE |
                          UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS |
                          UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH;
    ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, second + 100, 10, &mem_attr));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, mem_attr.mem_type);
    EXPECT_EQ((void*)second, mem_attr.base_address);
    EXPECT_EQ(chunk, mem_attr.alloc_length);

    /* across the second and third chunks */
    ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, second + 100, chunk, &mem_attr));
    EXPECT_EQ((void*)second, mem_attr.base_address);
    EXPECT_EQ(2 * chunk, mem_attr.alloc_length);

    /* the reserved, unmapped chunk after them */
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_md_mem_query(m_md, second + 2 * chunk + 100, 10, &mem_attr));
}


/* A registration across chunks of a reservation (an expandable segment):
 * its key covers every registered byte, chunks mapped after the one of its
 * address included (docs/framework-memory.md) */
TEST_F(md_test, reg_across_chunks_key_covers_the_range) {
    test::cuda_vmm_chunks chunks(5);
    const size_t chunk = chunks.chunk_size();
    char *address      = (char*)chunks.ptr() + chunk / 2;
    const size_t length = 3 * chunk;
    uct_mem_h memh;

    ASSERT_EQ(UCS_OK, reg(address, length, &memh));
    uct_cuda_ipc_ns_rkey_info_t info = parse(pack(memh));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_CHUNKS, info.handle_type);
    EXPECT_LE(info.base, (uint64_t)(uintptr_t)address);
    EXPECT_GE(info.base + info.length, (uint64_t)(uintptr_t)(address + length))
            << "a key smaller than the registered range";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}


/* The errors of refused packs (counted, not printed) */
int s_pack_errors;

ucs_log_func_rc_t
count_pack_errors(const char *file, unsigned line, const char *function,
                  ucs_log_level_t level, const ucs_log_component_config_t *comp,
                  const char *format, va_list ap)
{
    if ((level == UCS_LOG_LEVEL_ERROR) && (strstr(format, "packed") != NULL)) {
        ++s_pack_errors;
        return UCS_LOG_FUNC_RC_STOP;
    }
    return UCS_LOG_FUNC_RC_CONTINUE;
}


/* UCP's registration cache with UCX's cuda_copy registers one chunk (the
 * allocation cuMemGetAddressRange reports) and packs its key for a buffer
 * across the chunks after it (mkey_pack names that range from UCX 1.16):
 * the packed key covers the range, the key of the registration itself is
 * unchanged, and a range past the mapped chunks fails the pack, saying why */
TEST_F(md_test, key_packed_for_a_range_past_its_chunk_covers_the_range) {
    test::cuda_vmm_chunks chunks(5);
    const size_t chunk  = chunks.chunk_size();
    char *first         = (char*)chunks.ptr();
    char *address       = first + chunk / 2;
    const size_t length = 3 * chunk;
    uct_cuda_ipc_ns_md_t *md = reinterpret_cast<uct_cuda_ipc_ns_md_t*>(m_md);
    uct_mem_h memh;
    bytes_t key(KEY_SIZE, 0xee);

    ASSERT_EQ(UCS_OK, reg(first, chunk, &memh));
    uct_cuda_ipc_ns_rkey_info_t info = parse(pack(memh));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_POSIX_FD, info.handle_type);
    EXPECT_EQ(chunk, info.length);

    /* twice: the second pack takes the wider registration of the first */
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_md_pack_range(
                md, (uct_cuda_ipc_ns_md_memh_t*)memh, address, length,
                key.data()));
        info = parse(key);
        EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_CHUNKS, info.handle_type);
        EXPECT_LE(info.base, (uint64_t)(uintptr_t)address);
        EXPECT_GE(info.base + info.length,
                  (uint64_t)(uintptr_t)(address + length))
                << "a key smaller than the range it was packed for";
        EXPECT_EQ(UCS_OK, unpack(key));
    }

    /* a longer range: a second wider registration, both released with the
     * registration */
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_md_pack_range(
            md, (uct_cuda_ipc_ns_md_memh_t*)memh, address, 4 * chunk,
            key.data()));
    info = parse(key);
    EXPECT_GE(info.base + info.length,
              (uint64_t)(uintptr_t)(address + 4 * chunk));

    /* the registration's own range: its own key */
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_md_pack_range(
            md, (uct_cuda_ipc_ns_md_memh_t*)memh, first, chunk, key.data()));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_POSIX_FD, parse(key).handle_type);

#if UCT_CUDA_IPC_NS_UCX_AT_LEAST(1, 16)
    /* as UCP packs it */
    uct_md_mkey_pack_params_t params;
    params.field_mask = 0;
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack_v2(m_md, memh, address, length,
                                          &params, key.data()));
    info = parse(key);
    EXPECT_GE(info.base + info.length,
              (uint64_t)(uintptr_t)(address + length));
#endif

    /* into the reserved, unmapped chunk after the fifth */
    s_pack_errors = 0;
    ucs_log_push_handler(count_pack_errors);
    EXPECT_NE(UCS_OK, uct_cuda_ipc_ns_md_pack_range(
            md, (uct_cuda_ipc_ns_md_memh_t*)memh, address, 5 * chunk,
            key.data()));
    ucs_log_pop_handler();
    EXPECT_EQ(1, s_pack_errors) << "the refused pack says why";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}


/* Legacy keys of the whole allocation from any subrange; with
 * @a owner_copy they carry the broker's address (docs/owner-copies.md),
 * without, the default PID namespace packs exactly the base key */
void md_test::check_legacy_keys(bool owner_copy)
{
    test::cuda_legacy_buffer buf(1 << 20);
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    size_t offsets[][2] = {{0, buf.size()}, {4096, 8192}, {buf.size() - 1, 1}};

    for (auto &range : offsets) {
        uct_mem_h memh;
        ASSERT_EQ(UCS_OK, reg((char*)buf.ptr() + range[0], range[1], &memh));
        bytes_t key = pack(memh);
        uct_cuda_ipc_ns_rkey_info_t info = parse(key);
        EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_LEGACY, info.handle_type);
        EXPECT_EQ((uint64_t)(uintptr_t)buf.ptr(), info.base);
        EXPECT_EQ(buf.size(), info.length);
        EXPECT_EQ((uint32_t)getpid(), info.pid);
        EXPECT_EQ(owner_copy || (self->pid_ns != UCT_CUDA_IPC_NS_INIT_PID_NS),
                  !!info.has_ext);
        EXPECT_EQ(owner_copy, info.broker_addr_len > 0);
        if (!info.has_ext) {
            for (size_t i = UCT_CUDA_IPC_NS_RKEY_BASE_SIZE; i < key.size(); ++i) {
                ASSERT_EQ(0, key[i]) << "byte " << i << " after the base key";
            }
        }
        EXPECT_EQ(UCS_OK, unpack(key));
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    }
}


TEST_F(md_test, reg_legacy_whole_and_subrange) {
    check_legacy_keys(true);
}


TEST_F(md_test, reg_vmm_posix_fd) {
    test::cuda_vmm_buffer buf(1 << 21);
    int fds_before = test::count_open_fds();
    uct_mem_h memh;

    ASSERT_EQ(UCS_OK, reg((char*)buf.ptr() + 4096, 4096, &memh));
    EXPECT_EQ(fds_before + 1, test::count_open_fds()) << "exported fd";
    bytes_t key = pack(memh);
    uct_cuda_ipc_ns_rkey_info_t info = parse(key);
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_POSIX_FD, info.handle_type);
    EXPECT_TRUE(info.has_ext);
    EXPECT_GE(info.handle.posix.fd, 0);
    EXPECT_EQ((uint64_t)(uintptr_t)buf.ptr(), info.base);
    EXPECT_EQ(buf.size(), info.length);
    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->pid_ns, info.pid_ns);
    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->start_time, info.start_time);
    EXPECT_EQ(UCS_OK, unpack(key));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    EXPECT_EQ(fds_before, test::count_open_fds()) << "fd closed at dereg";
}


TEST_F(md_test, reg_refused) {
    std::vector<char> host(8192);
    uct_mem_h memh;

    EXPECT_EQ(UCS_ERR_UNSUPPORTED, reg(host.data(), host.size(), &memh))
            << "host memory";
}


/* VMM memory without a shareable handle type (vLLM's cumem allocator):
 * nothing to export, so its key is a copy key naming our broker
 * (docs/owner-copies.md), which unpacks as memory its owner copies */
TEST_F(md_test, reg_vmm_without_handle_types) {
    test::cuda_vmm_buffer no_fd(1 << 21, false);
    uct_rkey_bundle_t bundle;
    uct_mem_h memh;

    ASSERT_EQ(UCS_OK, reg((char*)no_fd.ptr() + 4096, 4096, &memh));
    bytes_t key = pack(memh);
    uct_cuda_ipc_ns_rkey_info_t info = parse(key);
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_COPY, info.handle_type);
    EXPECT_EQ((uint64_t)(uintptr_t)no_fd.ptr(), info.base);
    EXPECT_EQ(no_fd.size(), info.length);
    EXPECT_EQ((uint32_t)getpid(), info.pid);
    EXPECT_TRUE(info.has_ext);
    EXPECT_GT(info.broker_addr_len, 0);
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, key.data(), &bundle));
    EXPECT_TRUE(((uct_cuda_ipc_ns_md_rkey_t*)bundle.rkey)->owner_copy);
    uct_rkey_release(m_component, &bundle);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}


/* Memory of a stream-ordered pool of the POSIX-fd handle type: a pool key
 * naming the allocation (cuMemGetAddressRange), with its export data and
 * the pool's fd, close-on-exec, held until the registration goes. Memory
 * of a device's default pool, which exports nothing, gets a copy key of the
 * registered bytes */
TEST_F(md_test, reg_pool_through_its_pool) {
    test::cuda_pool_buffer pool(3 << 20), default_pool(3 << 20, 0, false);
    int fds_before = test::count_open_fds();
    uct_mem_h memh, default_memh;

    ASSERT_EQ(UCS_OK, reg((char*)pool.ptr() + 4096, 4096, &memh));
    EXPECT_EQ(fds_before + 1, test::count_open_fds()) << "the pool's fd";
    bytes_t key = pack(memh);
    uct_cuda_ipc_ns_rkey_info_t info = parse(key);
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_POOL, info.handle_type);
    EXPECT_TRUE(info.has_ext);
    EXPECT_EQ((uint64_t)(uintptr_t)pool.ptr(), info.base);
    EXPECT_GE(info.length, pool.size());
    ASSERT_GE(info.pool_fd, 0);
    EXPECT_EQ(FD_CLOEXEC, fcntl(info.pool_fd, F_GETFD) & FD_CLOEXEC);
    EXPECT_EQ(UCS_OK, unpack(key));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    EXPECT_EQ(fds_before, test::count_open_fds()) << "fd closed at dereg";

    ASSERT_EQ(UCS_OK, reg((char*)default_pool.ptr() + 4096, 4096,
                          &default_memh));
    info = parse(pack(default_memh));
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_COPY, info.handle_type);
    EXPECT_EQ((uint64_t)(uintptr_t)default_pool.ptr() + 4096, info.base);
    EXPECT_EQ(4096u, info.length) << "the registered bytes";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, default_memh));
}


/* A pool whose export the driver refuses is a pool that exports nothing:
 * its owner copies its memory, which is never taken for an allocation of
 * its own (cuMemRetainAllocationHandle refuses it) */
TEST_F(md_test, reg_pool_export_refused_is_copied) {
    test::cuda_pool_buffer pool(1 << 21);
    uct_mem_h memh;

    if (!test::fault_reload("cuMemPoolExportToShareableHandle:1:"
                            "CUDA_ERROR_INVALID_VALUE")) {
        GTEST_SKIP() << "fault injection needs the emulator";
    }
    ucs_status_t status = reg(pool.ptr(), 4096, &memh);
    ASSERT_TRUE(test::fault_reload(""));
    ASSERT_EQ(UCS_OK, status);
    EXPECT_EQ(UCT_CUDA_IPC_NS_HANDLE_COPY, parse(pack(memh)).handle_type);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}


/* Open MPI's MPI_Win_create on a legacy buffer of 64 MiB + 8 KiB + 8 B: UCP's
 * registration cache aligns the range to 16 B, past the allocation's end;
 * the registration covers the allocation and the key describes it */
TEST_F(md_test, reg_range_past_allocation_end_registers_the_allocation) {
    const size_t size = (64ul << 20) + 8192 + 8;
    test::cuda_legacy_buffer legacy(size);
    uct_cuda_ipc_ns_rkey_info_t info;
    bytes_t key;
    uct_mem_h memh;

    ASSERT_EQ(UCS_OK, reg(legacy.ptr(), (size + 15) & ~(size_t)15, &memh));
    key = pack(memh);
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_rkey_parse(key.data(), key.size(),
                                                 &info));
    EXPECT_EQ((uint64_t)(uintptr_t)legacy.ptr(), info.base);
    EXPECT_EQ(legacy.size(), info.length) << "the allocation, not the range";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}


TEST_F(md_test, reg_legacy_disabled) {
    uct_md_config_t *config;
    uct_md_h md;
    test::cuda_legacy_buffer legacy(1 << 20);
    uct_mem_h memh;

    ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &config));
    ASSERT_EQ(UCS_OK, test::config_modify(config, "LEGACY", "n"));
    ASSERT_EQ(UCS_OK, uct_md_open(m_component, "cuda_ipc_ns", config, &md));
    uct_config_release(config);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              uct_md_mem_reg(md, legacy.ptr(), 4096,
                             UCT_MD_MEM_ACCESS_ALL | UCT_MD_MEM_FLAG_HIDE_ERRORS,
                             &memh));
    uct_md_close(md);
}


/* uct_rkey_unpack on random and mutated buffers: an error status or a key,
 * never a crash or a read past the buffer (the fuzz build adds ASan) */
TEST_F(md_test, rkey_unpack_random_and_mutated) {
    test::cuda_legacy_buffer legacy(1 << 20);
    test::cuda_vmm_buffer vmm(1 << 21);
    uct_mem_h memh[2];
    std::vector<bytes_t> seeds;
    std::mt19937 rng(12345);
    size_t ok = 0, refused = 0;

    ASSERT_EQ(UCS_OK, reg(legacy.ptr(), 4096, &memh[0]));
    ASSERT_EQ(UCS_OK, reg(vmm.ptr(), 4096, &memh[1]));
    seeds.push_back(pack(memh[0]));
    seeds.push_back(pack(memh[1]));

    for (int iter = 0; iter < 100000; ++iter) {
        bytes_t key;
        if (iter % 4 == 0) {
            key.resize(KEY_SIZE);
            for (auto &b : key) {
                b = rng();
            }
        } else {
            key = seeds[iter % seeds.size()];
            int flips = 1 + rng() % 8;
            for (int f = 0; f < flips; ++f) {
                switch (rng() % 3) {
                case 0: key[rng() % key.size()] ^= 1u << (rng() % 8); break;
                case 1: key[rng() % key.size()] = rng(); break;
                default: /* extension length, version, addr length fields */
                    key[UCT_CUDA_IPC_NS_RKEY_BASE_SIZE + rng() % 3] = rng();
                    break;
                }
            }
        }
        /* a heap copy of exactly the packed size: overreads hit the end */
        std::unique_ptr<uint8_t[]> exact(new uint8_t[KEY_SIZE]);
        memcpy(exact.get(), key.data(), KEY_SIZE);
        uct_rkey_bundle_t bundle;
        ucs_status_t status = uct_rkey_unpack(m_component, exact.get(), &bundle);
        if (status == UCS_OK) {
            uct_rkey_release(m_component, &bundle);
            ++ok;
        } else {
            ASSERT_TRUE((status == UCS_ERR_INVALID_PARAM) ||
                        (status == UCS_ERR_UNREACHABLE))
                    << ucs_status_string(status);
            ++refused;
        }
    }
    EXPECT_GT(refused, 0u);
    EXPECT_GT(ok, 0u);
    uct_md_mem_dereg(m_md, memh[0]);
    uct_md_mem_dereg(m_md, memh[1]);
}


/* Peer: unpacks the keys it receives and answers their statuses, along
 * with its own PID namespace */
TEST_PEER_ROLE(md_unpack_keys)
{
    uct_component_h component = find_component();
    uint8_t key[KEY_SIZE];
    uint64_t pid_ns = uct_cuda_ipc_ns_nsid_self()->pid_ns;

    if ((component == nullptr) || !chan.send_obj(pid_ns)) {
        return 1;
    }
    while (chan.recv(key, sizeof(key)) == (ssize_t)sizeof(key)) {
        uct_rkey_bundle_t bundle;
        int32_t status = uct_rkey_unpack(component, key, &bundle);
        if (status == UCS_OK) {
            uct_rkey_release(component, &bundle);
        }
        if (!chan.send_obj(status)) {
            return 1;
        }
    }
    return 0;
}


class md_peer_test : public md_test {
protected:
    std::vector<int32_t> unpack_in_peer(const test::peer_options &opts,
                                        const std::vector<bytes_t> &keys,
                                        uint64_t *peer_pid_ns)
    {
        test::peer peer("md_unpack_keys", opts);
        std::vector<int32_t> statuses;

        EXPECT_TRUE(peer.chan().recv_obj(*peer_pid_ns));
        for (const auto &key : keys) {
            int32_t status = UCS_ERR_IO_ERROR;
            EXPECT_TRUE(peer.chan().send(key.data(), key.size()));
            EXPECT_TRUE(peer.chan().recv_obj(status));
            statuses.push_back(status);
        }
        shutdown(peer.chan().fd(), SHUT_RDWR);
        EXPECT_EQ(0, peer.wait());
        return statuses;
    }

    virtual bool owner_copy() const { return true; }

    void other_pid_namespace();
};


void md_peer_test::other_pid_namespace()
{
    test::cuda_legacy_buffer legacy(1 << 20);
    test::cuda_vmm_buffer vmm(1 << 21);
    test::peer_options opts;
    uct_mem_h memh[2];
    uint64_t peer_pid_ns = 0;

    ASSERT_EQ(UCS_OK, reg(legacy.ptr(), 4096, &memh[0]));
    ASSERT_EQ(UCS_OK, reg(vmm.ptr(), 4096, &memh[1]));

    opts.new_pid_ns = true;
    auto statuses = unpack_in_peer(opts, {pack(memh[0]), pack(memh[1])},
                                   &peer_pid_ns);
    EXPECT_NE(uct_cuda_ipc_ns_nsid_self()->pid_ns, peer_pid_ns);
    ASSERT_EQ(2u, statuses.size());
    /* docs/owner-copies.md, "Which path a legacy key takes": the peer is
     * pid 1 there, we are not, so it opens the key's handle itself
     * (UCX_CUDA_IPC_NS_LEGACY_DIRECT=auto), its owner copying it if that
     * fails when the key names a broker; without one the open is all
     * there is */
    EXPECT_EQ(UCS_OK, statuses[0]) << "legacy key";
    EXPECT_EQ(UCS_OK, statuses[1]) << "VMM key";

    /* the same keys in our own namespace */
    statuses = unpack_in_peer(test::peer_options(),
                              {pack(memh[0]), pack(memh[1])}, &peer_pid_ns);
    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->pid_ns, peer_pid_ns);
    EXPECT_EQ(UCS_OK, statuses[0]);
    EXPECT_EQ(UCS_OK, statuses[1]);

    uct_md_mem_dereg(m_md, memh[0]);
    uct_md_mem_dereg(m_md, memh[1]);
}


TEST_F(md_peer_test, other_pid_namespace) {
    other_pid_namespace();
}


/* The same with UCX_CUDA_IPC_NS_OWNER_COPY=n: legacy keys name no broker
 * (another PID namespace only opens them itself), and the default PID
 * namespace packs exactly the base key */
class md_no_owner_copy_test : public md_peer_test {
protected:
    void SetUp() override
    {
        m_env.reset(new test::scoped_env("UCX_CUDA_IPC_NS_OWNER_COPY", "n"));
        md_peer_test::SetUp();
    }

    void TearDown() override
    {
        md_peer_test::TearDown();
        m_env.reset();
    }

    bool owner_copy() const override { return false; }

    std::unique_ptr<test::scoped_env> m_env;
};


TEST_F(md_no_owner_copy_test, reg_legacy_whole_and_subrange) {
    check_legacy_keys(false);
}


TEST_F(md_no_owner_copy_test, other_pid_namespace) {
    other_pid_namespace();
}


TEST_F(md_no_owner_copy_test, reg_vmm_without_handle_types_refused) {
    test::cuda_vmm_buffer no_fd(1 << 21, false);
    uct_mem_h memh;

    EXPECT_EQ(UCS_ERR_UNSUPPORTED, reg(no_fd.ptr(), 4096, &memh))
            << "VMM memory without POSIX fd handle type";
}


/* an interface of the transport, to check addresses and reachability */
class iface_test : public md_test {
protected:
    void SetUp() override
    {
        md_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        open_iface(m_md, &m_async, &m_worker, &m_iface);
        ASSERT_NE(nullptr, m_iface);
    }

    void TearDown() override
    {
        test::close_iface(m_async, m_worker, m_iface);
        md_test::TearDown();
    }

public:
    static void open_iface(uct_md_h md, ucs_async_context_t **async,
                           uct_worker_h *worker, uct_iface_h *iface)
    {
        test::open_iface(md, "cu_ipc_ns", "cuda", async, worker, iface);
    }

    static void get_addresses(uct_iface_h iface, bytes_t *dev, bytes_t *ifa)
    {
        dev->resize(UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);
        ifa->resize(UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);
        ASSERT_EQ(UCS_OK, uct_iface_get_device_address(
                          iface, (uct_device_addr_t*)dev->data()));
        ASSERT_EQ(UCS_OK, uct_iface_get_address(iface,
                                                (uct_iface_addr_t*)ifa->data()));
    }

protected:
    int reachable(const uct_cuda_ipc_ns_addr_device_t &dev,
                  const uct_cuda_ipc_ns_addr_iface_t &ifa)
    {
        return test::iface_is_reachable(m_iface, dev, ifa);
    }

    ucs_async_context_t *m_async  = nullptr;
    uct_worker_h         m_worker = nullptr;
    uct_iface_h          m_iface  = nullptr;
};


TEST_F(iface_test, attributes) {
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    EXPECT_EQ((size_t)UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE, attr.device_addr_len);
    EXPECT_EQ((size_t)UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE, attr.iface_addr_len);
    EXPECT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
}


TEST_F(iface_test, reachability_matrix) {
    bytes_t dev_buf, ifa_buf;
    uct_cuda_ipc_ns_addr_device_t own_dev, dev;
    uct_cuda_ipc_ns_addr_iface_t own_ifa, ifa;
    const uint8_t all = UCT_CUDA_IPC_NS_ADDR_FLAG_LEGACY |
                        UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD |
                        UCT_CUDA_IPC_NS_ADDR_FLAG_BROKER;

    get_addresses(m_iface, &dev_buf, &ifa_buf);
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_device_parse(dev_buf.data(),
                                                        dev_buf.size(), &own_dev));
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_iface_parse(ifa_buf.data(),
                                                       ifa_buf.size(), &own_ifa));
    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->system_id, own_dev.system_id);
    EXPECT_EQ((uint32_t)getpid(), own_ifa.pid);
    EXPECT_EQ(uct_cuda_ipc_ns_nsid_self()->pid_ns, own_ifa.pid_ns);
    ASSERT_EQ(all, own_ifa.flags) << "emulated devices support everything";

    EXPECT_FALSE(reachable(own_dev, own_ifa)) << "same process";

    dev = own_dev; ifa = own_ifa; ifa.pid += 1;
    EXPECT_TRUE(reachable(dev, ifa)) << "other process, same namespace";

    dev.system_id ^= 1;
    EXPECT_FALSE(reachable(dev, ifa)) << "other system";

    dev = own_dev; ifa = own_ifa; ifa.pid_ns += 1;
    EXPECT_TRUE(reachable(dev, ifa)) << "same pid, other PID namespace";

    ifa.flags = dev.flags = UCT_CUDA_IPC_NS_ADDR_FLAG_LEGACY;
    EXPECT_FALSE(reachable(dev, ifa)) << "other namespace, legacy only";

    ifa.flags = dev.flags = UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD;
    EXPECT_FALSE(reachable(dev, ifa)) << "other namespace, no broker";

    dev = own_dev; ifa = own_ifa; ifa.pid += 1;
    ifa.flags = dev.flags = UCT_CUDA_IPC_NS_ADDR_FLAG_POSIX_FD;
    EXPECT_TRUE(reachable(dev, ifa)) << "same namespace, POSIX fd only";
}


/* Peer: sends its device and iface addresses */
TEST_PEER_ROLE(iface_addresses)
{
    uct_component_h component = find_component();
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_iface_h iface;
    uct_md_config_t *config;
    uct_md_h md;
    bytes_t dev, ifa;

    if ((component == nullptr) || !test::cuda_init() ||
        (uct_md_config_read(component, NULL, NULL, &config) != UCS_OK) ||
        (uct_md_open(component, "cuda_ipc_ns", config, &md) != UCS_OK)) {
        return 1;
    }
    uct_config_release(config);
    iface_test::open_iface(md, &async, &worker, &iface);
    if (iface == nullptr) {
        return 1;
    }
    iface_test::get_addresses(iface, &dev, &ifa);
    bytes_t msg(dev);
    msg.insert(msg.end(), ifa.begin(), ifa.end());
    bool sent = chan.send(msg.data(), msg.size());
    char done;
    chan.recv(&done, 1);
    test::close_iface(async, worker, iface);
    uct_md_close(md);
    return sent ? 0 : 1;
}


TEST_F(iface_test, peer_in_other_pid_namespace) {
    test::peer_options opts;
    opts.new_pid_ns = true;
    test::peer peer("iface_addresses", opts);
    bytes_t msg(UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE + UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);

    ASSERT_EQ((ssize_t)msg.size(), peer.chan().recv(msg.data(), msg.size()));
    uct_cuda_ipc_ns_addr_iface_t ifa;
    ASSERT_EQ(UCS_OK, uct_cuda_ipc_ns_addr_iface_parse(
                      msg.data() + UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE,
                      UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE, &ifa));
    EXPECT_EQ(1u, ifa.pid) << "pid 1 of its namespace";
    EXPECT_NE(uct_cuda_ipc_ns_nsid_self()->pid_ns, ifa.pid_ns);
    EXPECT_TRUE(uct_iface_is_reachable(
            m_iface, (uct_device_addr_t*)msg.data(),
            (uct_iface_addr_t*)(msg.data() + UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE)))
            << "both sides exchange POSIX fds through brokers";
    char done = 1;
    peer.chan().send(&done, 1);
    EXPECT_EQ(0, peer.wait());
}

} // namespace
