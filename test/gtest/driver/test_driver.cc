/*
 * Driver table: a driver that lacks an OPTIONAL entry is used (the device
 * is listed, the entry stays NULL, a test helper that needs it fails with a
 * message naming it); one that lacks a REQUIRED entry is not (no device).
 *
 * The driver is test/cudasim's libcudasim_partial.so in front of the tests'
 * driver, hiding the entries named in CUDASIM_PARTIAL_HIDE. The module loads
 * a driver once per process, so each case runs in a fresh peer.
 */
#include "common/cuda_alloc.h"
#include "common/peer.h"
#include "common/uct_util.h"

extern "C" {
#include <uct/api/uct.h>
}

#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>


namespace {

struct driver_report {
    int  load_status;     /* uct_cuda_ipc_ns_driver_load() */
    bool has_memset;      /* cuMemsetD8 resolved */
    bool has_memset_async;
    bool listed;          /* UCT lists cu_ipc_ns on device "cuda" */
    char fill_error[160]; /* what test::cuda_fill() threw */
};


/* The partial emulator: the build's, or TEST_CUDASIM_PARTIAL (the mutation
 * check runs one suite binary against each copy's libraries) */
const char *partial_driver_path()
{
    const char *path = getenv("TEST_CUDASIM_PARTIAL");
    return (path != nullptr) ? path : CUDASIM_PARTIAL_LIB_PATH;
}


/* Whether an MD of @a component lists transport cu_ipc_ns on device cuda */
bool md_lists_transport(uct_component_h component)
{
    uct_tl_resource_desc_t *tls;
    uct_md_config_t *config;
    bool listed = false;
    unsigned num_tls;
    uct_md_h md;

    if (uct_md_config_read(component, NULL, NULL, &config) != UCS_OK) {
        return false;
    }
    if (uct_md_open(component, "cuda_ipc_ns", config, &md) == UCS_OK) {
        if (uct_md_query_tl_resources(md, &tls, &num_tls) == UCS_OK) {
            for (unsigned i = 0; i < num_tls; ++i) {
                listed = listed || (!strcmp(tls[i].tl_name, "cu_ipc_ns") &&
                                    !strcmp(tls[i].dev_name, "cuda"));
            }
            uct_release_tl_resource_list(tls);
        }
        uct_md_close(md);
    }
    uct_config_release(config);
    return listed;
}


/* What ucx_info -d shows: component, MD resource, transport on "cuda" */
bool transport_listed()
{
    uct_component_h component = test::find_component("cuda_ipc_ns");
    uct_component_attr_t attr = {};

    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    return (component != nullptr) &&
           (uct_component_query(component, &attr) == UCS_OK) &&
           (attr.md_resource_count > 0) && md_lists_transport(component);
}


/* Receives the hide list, then uses the partial driver like the module */
TEST_PEER_ROLE(driver_partial)
{
    driver_report report = {};
    char hide[128]       = {};

    if (chan.recv(hide, sizeof(hide) - 1) < 0) {
        return 1;
    }
    setenv("CUDASIM_PARTIAL_HIDE", hide, 1);
    setenv("CUDASIM_PARTIAL_DRIVER", getenv("UCX_CUDA_IPC_NS_DRIVER"), 1);
    setenv("UCX_CUDA_IPC_NS_DRIVER", partial_driver_path(), 1);

    report.load_status      = uct_cuda_ipc_ns_driver_load(
                                      partial_driver_path());
    report.has_memset       = uct_cuda_ipc_ns_drv.cuMemsetD8 != nullptr;
    report.has_memset_async = uct_cuda_ipc_ns_drv.cuMemsetD8Async != nullptr;
    report.listed           = transport_listed();
    if (test::cuda_init()) {
        try {
            /* a test helper asking for the missing optional entry */
            test::cuda_legacy_buffer buf(4096);
            TEST_CU_ENTRY(cuMemsetD8Async)((CUdeviceptr)buf.ptr(), 0x5a,
                                         buf.size(), NULL);
        } catch (const std::exception &e) {
            snprintf(report.fill_error, sizeof(report.fill_error), "%s",
                     e.what());
        }
    }
    return chan.send_obj(report) ? 0 : 2;
}


driver_report run_partial(const char *hide)
{
    test::peer peer("driver_partial");
    driver_report report = {};

    EXPECT_TRUE(peer.chan().send(hide, strlen(hide) + 1)); /* never empty */
    EXPECT_TRUE(peer.chan().recv_obj(report));
    EXPECT_EQ(0, peer.wait());
    return report;
}


class test_driver : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
    }
};


TEST_F(test_driver, optional_entry_missing_keeps_device)
{
    driver_report report = run_partial("cuMemsetD8Async");

    EXPECT_EQ(UCS_OK, report.load_status);
    EXPECT_TRUE(report.has_memset);
    EXPECT_FALSE(report.has_memset_async);
    EXPECT_TRUE(report.listed) << "the device must still be listed";
    EXPECT_STREQ("cuMemsetD8Async: the CUDA driver lacks this optional entry "
                 "point", report.fill_error);
}


TEST_F(test_driver, required_entry_missing_no_device)
{
    driver_report report = run_partial("cuMemCreate");

    EXPECT_EQ(UCS_ERR_NO_DEVICE, report.load_status);
    EXPECT_FALSE(report.listed);
}


TEST_F(test_driver, nothing_hidden)
{
    driver_report report = run_partial("");

    EXPECT_EQ(UCS_OK, report.load_status);
    EXPECT_TRUE(report.has_memset);
    EXPECT_TRUE(report.listed);
    EXPECT_STREQ("", report.fill_error);
}

} // namespace
