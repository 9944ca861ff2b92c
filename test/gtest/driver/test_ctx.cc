/*
 * The library's one way to make a context current (cuda_ipc_ns_ctx.h): a
 * given context or a device's primary one becomes current, pushed only when
 * another or none is current, and the caller's context is current again
 * after the pop. Runs in a peer with two emulated devices (a GPU machine
 * needs two devices for the cases with another device's context).
 */
#include "common/cuda_alloc.h"
#include "common/peer.h"

extern "C" {
#include "cuda_ipc_ns_ctx.h"
}

#include <gtest/gtest.h>
#include <cstdlib>
#include <string>


namespace {

/* per case: what was current inside (1: the expected context) and after
 * the pop (1: the caller's again), and whether it pushed */
struct ctx_case {
    int inside = -1;
    int after  = -1;
    int pushed = -1;
};

struct ctx_report {
    int      count = 0;
    ctx_case none_current;    /* no context current, device 0's primary */
    ctx_case same_current;    /* device 0's primary already current */
    ctx_case other_device;    /* device 1's primary current, device 0's */
    ctx_case given_ctx;       /* device 0's current, device 1's given */
};


CUcontext current_ctx()
{
    CUcontext ctx = nullptr;

    return (uct_cuda_ipc_ns_drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS) ?
           ctx : (CUcontext)-1;
}


/* make @a caller current, push (@a given or @a device's primary), pop */
ctx_case run_case(CUcontext caller, CUcontext given, int device,
                  CUcontext expected)
{
    ctx_case c;
    int pushed = 0;

    if ((uct_cuda_ipc_ns_drv.cuCtxSetCurrent(caller) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_ctx_push(given, device, &pushed) != UCS_OK)) {
        return c;
    }
    c.inside = (current_ctx() == expected);
    c.pushed = pushed;
    uct_cuda_ipc_ns_ctx_pop(pushed);
    c.after  = (current_ctx() == caller);
    return c;
}

} // namespace


TEST_PEER_ROLE(ctx_helper_peer)
{
    ctx_report report;
    CUdevice dev0, dev1;
    CUcontext p0, p1;

    if (!test::cuda_init() ||
        (uct_cuda_ipc_ns_drv.cuDeviceGetCount(&report.count) !=
         CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuDeviceGet(&dev0, 0) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRetain(&p0, dev0) !=
         CUDA_SUCCESS)) {
        return 1;
    }
    report.none_current = run_case(nullptr, nullptr, 0, p0);
    report.same_current = run_case(p0, nullptr, 0, p0);
    if (report.count >= 2) {
        if ((uct_cuda_ipc_ns_drv.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS) ||
            (uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRetain(&p1, dev1) !=
             CUDA_SUCCESS)) {
            return 2;
        }
        report.other_device = run_case(p1, nullptr, 0, p0);
        report.given_ctx    = run_case(p0, p1, -1, p1);
    }
    return chan.send_obj(report) ? 0 : 3;
}


TEST(test_ctx, push_makes_current_and_pop_restores)
{
    const char *old   = getenv("CUDASIM_DEVICE_COUNT");
    std::string saved = (old != nullptr) ? old : "";
    ctx_report report;

    setenv("CUDASIM_DEVICE_COUNT", "2", 1);
    {
        test::peer peer("ctx_helper_peer");
        if (old != nullptr) {
            setenv("CUDASIM_DEVICE_COUNT", saved.c_str(), 1);
        } else {
            unsetenv("CUDASIM_DEVICE_COUNT");
        }
        ASSERT_TRUE(peer.chan().recv_obj(report));
        EXPECT_EQ(0, peer.wait());
    }

    EXPECT_EQ(1, report.none_current.inside);
    EXPECT_EQ(1, report.none_current.pushed);
    EXPECT_EQ(1, report.none_current.after) << "a context left current";
    EXPECT_EQ(1, report.same_current.inside);
    EXPECT_EQ(0, report.same_current.pushed) << "pushed the current context";
    EXPECT_EQ(1, report.same_current.after) << "the caller's context popped";
    if (report.count < 2) {
        GTEST_SKIP() << "the cases with another device's context need two";
    }
    EXPECT_EQ(1, report.other_device.inside);
    EXPECT_EQ(1, report.other_device.pushed);
    EXPECT_EQ(1, report.other_device.after) << "the caller's context lost";
    EXPECT_EQ(1, report.given_ctx.inside);
    EXPECT_EQ(1, report.given_ctx.pushed);
    EXPECT_EQ(1, report.given_ctx.after) << "the caller's context lost";
}
