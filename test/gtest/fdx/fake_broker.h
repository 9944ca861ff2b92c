/*
 * The attacker's broker of the trust tests (peer role "trust_fake_broker",
 * test/gtest/fdx/test_trust.cc): it listens at the address the test gives,
 * and either answers every request with OK and an fd of its own memory, or
 * (silent) accepts and holds connections without a word. It exits when the
 * test shuts the channel, with the number of requests read (answering) or
 * connections accepted (silent) as its exit code; an orphan's child sends
 * that number on the channel instead (an unsigned).
 */
#ifndef TEST_FDX_FAKE_BROKER_H
#define TEST_FDX_FAKE_BROKER_H

extern "C" {
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_rkey.h"
}

#include <stdint.h>


namespace test {

struct fake_broker_cfg {
    uint8_t addr_len;
    char    addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    uint8_t silent;
    uint8_t orphan; /* the listener exits; a child it forked answers */
};


struct fake_broker_report {
    int                             status; /* 0: listening, else an errno */
    uct_cuda_ipc_ns_nsid_identity_t id;     /* of the fake broker's process */
};

} // namespace test

#endif
