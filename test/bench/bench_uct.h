/*
 * cuda_ipc_ns benchmarks: what the programs that drive cu_ipc_ns through UCT
 * share (bench_datapath, bench_chunks): the driver and a context, VMM
 * allocation properties, a UCT node (md, worker, iface on device "cuda"),
 * and one put/get posted and progressed to completion.
 */
#ifndef CUDA_IPC_NS_BENCH_UCT_H_
#define CUDA_IPC_NS_BENCH_UCT_H_

#include "cuda_ipc_ns_driver.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>


/* a failed step ends the program, naming it (benchmarks have no recovery) */
#define BENCH_CHECK(_cond, _what) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "%s: %s failed (%s:%d)\n", \
                    program_invocation_short_name, _what, __FILE__, \
                    __LINE__); \
            exit(1); \
        } \
    } while (0)
#define BENCH_CU(_func, ...) \
    BENCH_CHECK(uct_cuda_ipc_ns_drv._func(__VA_ARGS__) == CUDA_SUCCESS, #_func)


/* room for any transport's addresses and packed key */
#define BENCH_ADDR_MAX 256
#define BENCH_RKEY_MAX 256


typedef struct {
    uct_component_h     component;
    uct_md_h            md;
    ucs_async_context_t *async;
    uct_worker_h        worker;
    uct_iface_h         iface;
    int                 event_fd;   /* -1: the transport has none */
} bench_node_t;


/* the driver (UCX_CUDA_IPC_NS_DRIVER, default libcuda.so.1) and device 0's
 * primary context, current */
void bench_cuda_init(void);

/* pinned device memory on device 0 with POSIX fd handles, as exported
 * across PID namespaces */
CUmemAllocationProp bench_vmm_prop(void);

/* md, worker and iface of a transport on device "cuda", send progress on:
 * cu_ipc_ns, or the one BENCH_TL names (UCX's cuda_ipc: the peer that
 * figures stand beside, on a UCX built with CUDA) */
void bench_node_open(bench_node_t *node);

void bench_node_close(bench_node_t *node);

/* pack the key of @a memh for the @a length bytes at @a address: UCX's
 * cuda_ipc finds the allocation from the address (uct_md_mkey_pack passes
 * none from UCX 1.16 on: the driver then answers CU_DEVICE_INVALID as the
 * pointer's device, cuda.h cuPointerGetAttributes) */
void bench_mkey_pack(bench_node_t *node, uct_mem_h memh, void *address,
                     size_t length, void *buffer);

/* this program again as the exporter (`argv0 --exporter FD`: fork + exec,
 * since a CUDA driver cannot be used in a forked child), talking over a
 * socketpair whose other end goes to @a chan_p; returns its pid */
pid_t bench_start_exporter(const char *argv0, int *chan_p);

/* one put (@a is_put) or get of @a size bytes between @a local and
 * @a remote, posted and progressed to its completion */
void bench_copy(bench_node_t *node, uct_ep_h ep, int is_put, void *local,
                size_t size, uint64_t remote, uct_rkey_t rkey);

/* @a count of them at once, the i-th between local + i * size and
 * remote + i * size, progressed until all completed */
void bench_copy_window(bench_node_t *node, uct_ep_h ep, int is_put,
                       void *local, size_t size, unsigned count,
                       uint64_t remote, uct_rkey_t rkey);

#endif
