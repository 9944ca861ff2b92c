/*
 * The ABI guard: the facts the build recorded are those of the UCX source
 * tree it compiled against; the probe reads the same facts from the UCX this
 * process runs; the module registered because they match; and any
 * difference (version, assertions, statistics, a second UCX) is refused
 * with one line naming both. Loading a module built for another UCX is
 * checked end to end by test/activation/check_abi_guard.sh.
 */
extern "C" {
#include "cuda_ipc_ns_abi.h"
#include <ucp/api/ucp.h>
#include <ucs/debug/assert.h>
#include <ucs/type/status.h>
#include <uct/api/version.h>
}
#include "common/uct_util.h"

#include <gtest/gtest.h>
#include <dlfcn.h>
#include <string>


namespace {

const uct_cuda_ipc_ns_abi_t &built = uct_cuda_ipc_ns_abi_built;

uct_cuda_ipc_ns_abi_t probed()
{
    uct_cuda_ipc_ns_abi_t loaded;
    uct_cuda_ipc_ns_abi_probe(&loaded);
    return loaded;
}

/* the line uct_cuda_ipc_ns_abi_compare() writes, "" when it admits */
std::string refusal(const uct_cuda_ipc_ns_abi_t &loaded)
{
    char why[UCT_CUDA_IPC_NS_ABI_MSG_MAX] = "";
    ucs_status_t status = uct_cuda_ipc_ns_abi_compare(&built, &loaded, why,
                                                      sizeof(why));
    EXPECT_EQ(status == UCS_OK, why[0] == '\0') << why;
    return why;
}

bool has(const std::string &line, const std::string &what)
{
    return line.find(what) != std::string::npos;
}

} // namespace


TEST(abi_guard, built_facts_are_those_of_the_ucx_source_tree)
{
    EXPECT_TRUE(built.version_known);
    EXPECT_EQ(UCT_VERNO_MAJOR, built.major);
    EXPECT_EQ(UCT_VERNO_MINOR, built.minor);
    EXPECT_EQ(UCT_VERNO_PATCH, built.patch);
    EXPECT_EQ(UCS_ENABLE_ASSERT, built.assertions);
#ifdef ENABLE_STATS
    EXPECT_EQ(1, built.statistics);
#else
    EXPECT_EQ(0, built.statistics);
#endif
}

TEST(abi_guard, probe_reads_the_ucx_of_this_process)
{
    uct_cuda_ipc_ns_abi_t loaded = probed();
    unsigned major, minor, patch;
    Dl_info info;

    ucp_get_version(&major, &minor, &patch);
    ASSERT_TRUE(loaded.version_known) << "no libucp found, yet the suite "
                                         "links one";
    EXPECT_EQ(major, loaded.major);
    EXPECT_EQ(minor, loaded.minor);
    EXPECT_EQ(patch, loaded.patch);
    EXPECT_FALSE(loaded.other_ucx);
    ASSERT_NE(0, dladdr((const void*)ucs_status_string, &info));
    EXPECT_STREQ(info.dli_fname, loaded.libucs);
    EXPECT_NE(std::string::npos, std::string(loaded.libucp).find("libucp"))
        << loaded.libucp;
    /* this suite is built against the source tree of the installed UCX */
    EXPECT_EQ(UCS_ENABLE_ASSERT, loaded.assertions);
#ifdef ENABLE_STATS
    EXPECT_EQ(1, loaded.statistics);
#else
    EXPECT_EQ(0, loaded.statistics);
#endif
}

TEST(abi_guard, matching_ucx_is_admitted_and_the_module_registered)
{
    EXPECT_EQ("", refusal(probed()));
    EXPECT_EQ(UCS_OK, uct_cuda_ipc_ns_abi_admit());
    EXPECT_NE(nullptr, test::find_component("cuda_ipc_ns"));
    EXPECT_NE(nullptr, test::find_component("cuda_cpy_ns"));
}

TEST(abi_guard, other_version_is_refused_naming_both)
{
    uct_cuda_ipc_ns_abi_t loaded = probed();
    std::string line;
    char built_version[32], other_version[32];

    loaded.minor = built.minor + 1;
    snprintf(built_version, sizeof(built_version), "UCX %u.%u.%u ",
             built.major, built.minor, built.patch);
    snprintf(other_version, sizeof(other_version), "UCX %u.%u.%u ",
             loaded.major, loaded.minor, loaded.patch);
    line = refusal(loaded);
    EXPECT_TRUE(has(line, built_version)) << line;
    EXPECT_TRUE(has(line, other_version)) << line;
    EXPECT_TRUE(has(line, loaded.libucs)) << line;
    EXPECT_TRUE(has(line, "another UCX version")) << line;
    EXPECT_TRUE(has(line, "not registered")) << line;
    EXPECT_EQ(std::string::npos, line.find('\n')) << line;

    loaded       = probed();
    loaded.patch = built.patch + 1;
    EXPECT_TRUE(has(refusal(loaded), "another UCX version"));
}

TEST(abi_guard, other_assertions_are_refused)
{
    uct_cuda_ipc_ns_abi_t loaded = probed();
    std::string line;

    loaded.assertions = !built.assertions;
    line              = refusal(loaded);
    EXPECT_TRUE(has(line, "(assertions)")) << line;
    EXPECT_TRUE(has(line, built.assertions ? "assertions on" :
                                             "assertions off")) << line;
    EXPECT_TRUE(has(line, built.assertions ? "assertions off" :
                                             "assertions on")) << line;
}

TEST(abi_guard, other_statistics_are_refused)
{
    uct_cuda_ipc_ns_abi_t loaded = probed();

    loaded.statistics = !built.statistics;
    EXPECT_TRUE(has(refusal(loaded), "(statistics)"));
}

TEST(abi_guard, second_ucx_is_refused)
{
    uct_cuda_ipc_ns_abi_t loaded = probed();
    std::string line;

    loaded.version_known = 0;
    loaded.other_ucx     = 1;
    snprintf(loaded.libucp, sizeof(loaded.libucp), "/elsewhere/libucp-nixl.so.0");
    line = refusal(loaded);
    EXPECT_TRUE(has(line, "a second UCX")) << line;
    EXPECT_TRUE(has(line, "/elsewhere/libucp-nixl.so.0")) << line;
    EXPECT_TRUE(has(line, loaded.libucs)) << line;
}

TEST(abi_guard, unknown_version_checks_the_configuration)
{
    uct_cuda_ipc_ns_abi_t loaded = probed();

    /* a process using UCT without libucp: nothing to read a version from */
    loaded.version_known = 0;
    EXPECT_EQ("", refusal(loaded));
    loaded.assertions = !built.assertions;
    EXPECT_TRUE(has(refusal(loaded), "(assertions)"));
}
