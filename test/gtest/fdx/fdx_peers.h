/*
 * cuda_ipc_ns: what the fd exchange tests share (test_fdx.cc,
 * test_broker_dos.cc): the owner peer "fdx_owner" (fdx_peers.cc), which runs
 * a broker and registers memfds on request, the test's side of its
 * channel, and memfd helpers. No CUDA needed: the fd exchange does not care
 * what the fd is.
 */
#ifndef TEST_FDX_FDX_PEERS_H
#define TEST_FDX_FDX_PEERS_H

#include "common/peer.h"

extern "C" {
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_nsid.h"
}

#include <stddef.h>
#include <stdint.h>
#include <memory>
#include <string>


namespace fdx_peers {

/* Messages between the test and the owner (same binary: plain structs) */

struct owner_config {
    char   sock_dir[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    double req_timeout; /* the broker's request deadline; 0: its default */
    int    allowed_uid;
};

enum {
    OWNER_REGISTER = 1,
    OWNER_UNREGISTER,
    OWNER_QUIT,
    OWNER_FILL_FDS, /* lower RLIMIT_NOFILE to size, open fds up to it but
                     * alloc_id of them */
    OWNER_FREE_FDS, /* close them, restore RLIMIT_NOFILE */
    OWNER_ACCEPT_FAILURES /* its brokers' accept() failures so far */
};

struct owner_cmd {
    int      op;
    uint64_t alloc_id;
    uint8_t  pattern;
    size_t   size;
};

struct owner_reply {
    int                         status;
    int                         count; /* fds opened or closed */
    uct_cuda_ipc_ns_rkey_info_t desc;
};


const size_t MEM_SIZE = 8192;

double now_sec();

uint8_t pattern_byte(uint8_t pattern, size_t i);

/* a memfd of @a size bytes filled from @a pattern, or -1 */
int make_memfd(uint8_t pattern, size_t size);

/* the imported fd really shares the owner's memory */
bool check_bytes(int fd, uint8_t pattern, size_t size);

/* a POSIX-fd key with nothing else set */
uct_cuda_ipc_ns_rkey_info_t fd_key();

/* a POSIX-fd key whose owner is process @a id: a broker it runs passes the
 * importer's owner check */
uct_cuda_ipc_ns_rkey_info_t fd_key_of(const uct_cuda_ipc_ns_nsid_identity_t &id);

/* A listening socket of this process at a free abstract address (the kernel
 * picks it), for a test that plays the owner's broker itself, and in @a key a
 * key of registration @a reg_id in chunks that names it (this process is the
 * key's owner, so the importer's owner check passes); -1 on failure */
int listen_as_chunk_owner(uint64_t reg_id, uct_cuda_ipc_ns_rkey_info_t *key);

/* every field set: the broker's request deadline to its default */
uct_cuda_ipc_ns_broker_proto_fdx_config_t fdx_config(uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode,
                                                     double timeout = 2.0);


/* The test's side of the owner (gtest assertions on failure) */

/* start an owner peer with a running broker */
std::unique_ptr<test::peer>
start_owner(const test::peer_options &opts = test::peer_options(),
            const std::string &sock_dir = "", int allowed_uid = -1,
            double req_timeout = 0);

uct_cuda_ipc_ns_rkey_info_t owner_register(test::peer &owner,
                                           uint64_t alloc_id, uint8_t pattern,
                                           size_t size = MEM_SIZE);

void owner_unregister(test::peer &owner, uint64_t alloc_id);

/* the owner (its broker thread included) runs out of fds: it lowers its
 * RLIMIT_NOFILE soft limit to @a limit and opens fds up to it, then closes
 * @a spare of them again; returns how many stay open */
int owner_fill_fds(test::peer &owner, unsigned limit, unsigned spare = 0);

/* undo owner_fill_fds(); returns how many fds the owner closed */
int owner_free_fds(test::peer &owner);

/* how many times the owner's broker failed to accept() for want of fds */
int owner_accept_failures(test::peer &owner);

void stop_owner(test::peer &owner);

} // namespace fdx_peers

#endif
