/*
 * Test runner: gtest, or a peer role when started by test::peer.
 */
#include "common/peer.h"

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
    return RUN_ALL_TESTS();
}
