/*
 * cudasim tests: helpers. The tests reach the driver only through the
 * module's driver table (uct_cuda_ipc_ns_drv), so the same tests run on the
 * emulator and on a real libcuda.so.1 (UCX_CUDA_IPC_NS_DRIVER=...).
 * Checks of emulator-only behaviour skip on a real driver.
 */
#ifndef TEST_CUDASIM_TEST_H
#define TEST_CUDASIM_TEST_H

#include "common/cuda_alloc.h"
#include "common/peer.h"

#include <gtest/gtest.h>
#include <dlfcn.h>
#include <cstdlib>
#include <string>

#define CU_EXPECT(_expected, _func, ...) \
    EXPECT_EQ(_expected, TEST_CU_ENTRY(_func)(__VA_ARGS__)) << #_func

#define CU_ASSERT(_expected, _func, ...) \
    ASSERT_EQ(_expected, TEST_CU_ENTRY(_func)(__VA_ARGS__)) << #_func

#define CU_OK(_func, ...)  CU_ASSERT(CUDA_SUCCESS, _func, __VA_ARGS__)

namespace cudasim_test {

/* the driver the tests use */
static inline const char *driver_path()
{
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
#ifdef CUDASIM_LIB_PATH
    if (path == nullptr) {
        path = CUDASIM_LIB_PATH;
    }
#endif
    return path;
}

/* dlsym() in the already loaded driver; nullptr if absent */
static inline void *driver_sym(const char *name)
{
    void *dl = dlopen(driver_path(), RTLD_NOW | RTLD_NOLOAD);
    void *sym;

    if (dl == nullptr) {
        return nullptr;
    }
    sym = dlsym(dl, name);
    dlclose(dl);
    return sym;
}

static inline bool is_emulator()
{
    return driver_sym("cudasim_is_emulator") != nullptr;
}

/* re-read CUDASIM_FAULTS in the emulator; false on a real driver */
static inline bool fault_reload()
{
    typedef int (*reload_t)(void);
    reload_t reload = (reload_t)driver_sym("cudasim_fault_reload");

    return (reload != nullptr) && (reload() >= 0);
}

/* Base fixture: driver loaded, device 0's primary context current */
class base : public ::testing::Test {
protected:
    void SetUp() override {
        if (driver_path() == nullptr) {
            GTEST_SKIP() << "no CUDA driver configured";
        }
        if (!test::cuda_init()) {
            GTEST_SKIP() << "no CUDA driver/device at " << driver_path();
        }
    }

    static size_t granularity() {
        CUmemAllocationProp prop = {};
        size_t gran              = 0;

        prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id   = 0;
        uct_cuda_ipc_ns_drv.cuMemGetAllocationGranularity(
                &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        return gran;
    }
};

#define SKIP_IF_NOT_EMULATOR() \
    do { \
        if (!cudasim_test::is_emulator()) { \
            GTEST_SKIP() << "checks emulator-only behaviour"; \
        } \
    } while (0)

} // namespace cudasim_test

#endif
