/*
 * Test runner: gtest, or a peer role when started by test::peer.
 */
#include "common/peer.h"
#include "common/pod_net.h"

#include <gtest/gtest.h>
#include <cstdlib>


int main(int argc, char **argv)
{
    int exit_code;

    /* the module, the tests and their peers all load this driver: the CPU
     * emulator unless the environment names another (a real libcuda) */
    setenv("UCX_CUDA_IPC_NS_DRIVER", CUDASIM_LIB_PATH, 0);

    if (test::peer_main(argc, argv, &exit_code)) {
        return exit_code;
    }

    ::testing::InitGoogleTest(&argc, argv);
    /* before any test starts UCX (common/pod_net.h); tests that need it
     * fail when it could not be made */
    test::pod_network::get().create();
    exit_code = RUN_ALL_TESTS();
    test::pod_network::get().destroy();
    return exit_code;
}
