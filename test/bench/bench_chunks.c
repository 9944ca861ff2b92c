/*
 * cuda_ipc_ns: framework memory (docs/framework-memory.md), as ratios
 * measured in one run:
 *
 *  1. put and get bandwidth over a registration of 64 VMM allocations mapped
 *     back to back (PyTorch's expandable segments) vs one allocation of the
 *     same size, at 4, 16 and 64 MiB (goal >= 0.95): copies split at chunk
 *     boundaries against one copy;
 *  2. the first use of each chunk (layout request + fd import + mapping),
 *     against the first use of the single allocation; and the part of it
 *     that batching changes, the fd exchange per chunk, 16 chunks per
 *     request (GET_CHUNK_FDS) against one.
 *
 * The exporter is this program again (fork + exec), over a socketpair. On
 * the emulator the granularity is set to 1 MiB (CUDASIM_VMM_GRANULARITY,
 * unless set) so that 64 MiB is 64 chunks; with a GPU's 2 MiB it is 32.
 *
 * Usage: bench_chunks [-n iterations]     (driver: UCX_CUDA_IPC_NS_DRIVER)
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_fdx.h"
#include "bench_stats.h"
#include "bench_cpu_cache.h"
#include "bench_cpu_pin.h"
#include "bench_uct.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <ucs/debug/memtrack_int.h>

#include <sys/socket.h>
#include <poll.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define BENCH_SIZE        (64ul << 20)
#define BENCH_MAX_CHUNKS  64
#define BENCH_NUM_SIZES   3   /* of the bandwidth figures */


/* What the exporter sends: its addresses, and both buffers with their keys */
typedef struct {
    uint8_t  dev_addr[UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE];
    uint8_t  iface_addr[UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE];
    uint64_t single_addr;
    uint64_t chunks_addr;
    uint32_t num_chunks;
    uint8_t  single_rkey[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uint8_t  chunks_rkey[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uint8_t  batch_rkey[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
} bench_export_t;


/* The size of a chunk: 64 MiB in at most 64 allocations of the granularity
 * or more */
static size_t bench_chunk_size(void)
{
    CUmemAllocationProp prop = bench_vmm_prop();
    size_t gran;

    BENCH_CU(cuMemGetAllocationGranularity, &gran, &prop,
             CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    return (gran > BENCH_SIZE / BENCH_MAX_CHUNKS) ? gran :
           BENCH_SIZE / BENCH_MAX_CHUNKS;
}


/* @a count allocations of @a chunk bytes back to back in one reservation,
 * read-write on device 0 */
static void *bench_vmm_chunks(size_t chunk, size_t count)
{
    CUmemAllocationProp prop = bench_vmm_prop();
    CUmemAccessDesc access   = {};
    CUmemGenericAllocationHandle handle;
    CUdeviceptr ptr;
    size_t i;

    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    BENCH_CU(cuMemAddressReserve, &ptr, chunk * count, 0, 0, 0);
    for (i = 0; i < count; ++i) {
        BENCH_CU(cuMemCreate, &handle, chunk, &prop, 0);
        BENCH_CU(cuMemMap, ptr + i * chunk, chunk, 0, handle, 0);
        BENCH_CU(cuMemRelease, handle); /* the mapping keeps it */
        BENCH_CU(cuMemSetAccess, ptr + i * chunk, chunk, &access, 1);
    }
    return (void*)ptr;
}


static void bench_vmm_free(void *ptr, size_t size)
{
    BENCH_CU(cuMemUnmap, (CUdeviceptr)ptr, size);
    BENCH_CU(cuMemAddressFree, (CUdeviceptr)ptr, size);
}


/* A pair of buffers the exporter times: 64 chunks and one allocation */
typedef struct {
    void      *single, *chunks;
    uct_mem_h single_memh, chunks_memh;
} bench_pair_t;


/* @a ptr (BENCH_SIZE bytes) registered, its key packed into @a rkey */
static uct_mem_h bench_reg_pack(bench_node_t *node, void *ptr, uint8_t *rkey)
{
    uct_mem_h memh;

    BENCH_CHECK(uct_md_mem_reg(node->md, ptr, BENCH_SIZE,
                               UCT_MD_MEM_ACCESS_ALL, &memh) == UCS_OK,
                "uct_md_mem_reg");
    bench_mkey_pack(node, memh, ptr, BENCH_SIZE, rkey);
    return memh;
}


static void bench_pair_alloc(bench_node_t *node, bench_pair_t *pair,
                             bench_export_t *msg)
{
    pair->single      = bench_vmm_chunks(BENCH_SIZE, 1);
    pair->chunks      = bench_vmm_chunks(BENCH_SIZE / msg->num_chunks,
                                         msg->num_chunks);
    pair->single_memh = bench_reg_pack(node, pair->single, msg->single_rkey);
    pair->chunks_memh = bench_reg_pack(node, pair->chunks, msg->chunks_rkey);
    msg->single_addr = (uintptr_t)pair->single;
    msg->chunks_addr = (uintptr_t)pair->chunks;
}


static void bench_pair_free(bench_node_t *node, bench_pair_t *pair)
{
    uct_md_mem_dereg(node->md, pair->chunks_memh);
    uct_md_mem_dereg(node->md, pair->single_memh);
    bench_vmm_free(pair->chunks, BENCH_SIZE);
    bench_vmm_free(pair->single, BENCH_SIZE);
}


/*
 * Exporter: the buffers registered until the parent closes the channel.
 * Each byte the parent sends asks for a fresh pair, allocated before the
 * previous one is freed (so that its memory is other memory).
 */
static int bench_exporter(int chan)
{
    uct_mem_h batch_memh;
    bench_export_t msg = {};
    bench_pair_t pair, next;
    bench_node_t node;
    void *batch;
    char c;

    bench_cuda_init();
    bench_node_open(&node);
    msg.num_chunks = BENCH_SIZE / bench_chunk_size();
    bench_pair_alloc(&node, &pair, &msg);
    batch      = bench_vmm_chunks(BENCH_SIZE / msg.num_chunks,
                                  msg.num_chunks);
    batch_memh = bench_reg_pack(&node, batch, msg.batch_rkey);
    uct_iface_get_device_address(node.iface, (uct_device_addr_t*)msg.dev_addr);
    uct_iface_get_address(node.iface, (uct_iface_addr_t*)msg.iface_addr);
    BENCH_CHECK(send(chan, &msg, sizeof(msg), 0) == sizeof(msg), "send");
    while (recv(chan, &c, 1, 0) > 0) {
        bench_pair_alloc(&node, &next, &msg);
        BENCH_CHECK(send(chan, &msg, sizeof(msg), 0) == sizeof(msg), "send");
        bench_pair_free(&node, &pair);
        pair = next;
    }
    uct_md_mem_dereg(node.md, batch_memh);
    bench_vmm_free(batch, BENCH_SIZE);
    bench_pair_free(&node, &pair);
    bench_node_close(&node);
    return 0;
}


enum {
    BENCH_OP_PUT_CHUNKS,
    BENCH_OP_PUT_SINGLE,
    BENCH_OP_GET_CHUNKS,
    BENCH_OP_GET_SINGLE,
    BENCH_OP_LAST
};


typedef struct {
    bench_node_t      *node;
    uct_ep_h          ep;
    int               chan;     /* to the exporter */
    void              *local;
    uint64_t          addr[2];  /* chunks, single */
    uct_rkey_bundle_t bundle[2];
    uct_rkey_t        rkey[2];
    uint8_t           batch_rkey[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE]; /* packed:
                                               its fds are fetched directly */
} bench_ctx_t;


/* the exporter's pair of buffers in @a exp, in place of the previous one */
static void bench_take_pair(bench_ctx_t *c, const bench_export_t *exp)
{
    int i;

    for (i = 0; i < 2; ++i) {
        if (c->rkey[i] != 0) {
            uct_rkey_release(c->node->component, &c->bundle[i]);
        }
        BENCH_CHECK(uct_rkey_unpack(c->node->component,
                                    i ? exp->single_rkey : exp->chunks_rkey,
                                    &c->bundle[i]) == UCS_OK,
                    "uct_rkey_unpack");
        c->rkey[i] = c->bundle[i].rkey;
    }
    c->addr[0] = exp->chunks_addr;
    c->addr[1] = exp->single_addr;
}


/*
 * A fresh pair from the exporter and a fresh local buffer: on this VM the
 * same copy between other memory runs up to 10% faster or slower, and the
 * chunks and the one allocation are different memory, so a ratio taken on
 * one set of buffers says as much about where they lie as about the chunks
 * (measured: put chunks/single 16 MiB 0.909 in one run, 1.079 in the next,
 * each within 0.03 over its rounds). Each round measures other buffers.
 */
static void bench_fresh_buffers(bench_ctx_t *c)
{
    bench_export_t exp;

    BENCH_CHECK(send(c->chan, "n", 1, 0) == 1, "send");
    BENCH_CHECK(recv(c->chan, &exp, sizeof(exp), 0) == sizeof(exp),
                "exporter message");
    bench_take_pair(c, &exp);
    bench_vmm_free(c->local, BENCH_SIZE);
    c->local = bench_vmm_chunks(BENCH_SIZE, 1);
}


static void bench_op(const bench_ctx_t *c, int op, size_t size)
{
    int single = (op == BENCH_OP_PUT_SINGLE) || (op == BENCH_OP_GET_SINGLE);
    int is_put = (op == BENCH_OP_PUT_CHUNKS) || (op == BENCH_OP_PUT_SINGLE);

    bench_copy(c->node, c->ep, is_put, c->local, size, c->addr[single],
               c->rkey[single]);
}


/*
 * What batching changes in a chunk's first use: its fd exchange with the
 * owner's broker (connect, owner check, request, export, reply). The fds of
 * all chunks of another registration are fetched one per request, then 16
 * per request (GET_CHUNK_FDS), alternately, in rounds, each fd closed at
 * once; the import and mapping that follow are the same either way. Per
 * chunk, in us, against @a first_use (us, the whole first use of a chunk).
 */
static void bench_first_use_batched(const bench_ctx_t *c, unsigned num_chunks,
                                    double first_use)
{
    const uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {.mode        = UCT_CUDA_IPC_NS_FDX_AUTO,
                                              .timeout     = 5.0,
                                              .req_timeout = 0.5,
                                              .allowed_uid = -1};
    const int rounds = bench_rounds();
    double single[BENCH_MAX_ROUNDS], batched[BENCH_MAX_ROUNDS];
    double ratio[BENCH_MAX_ROUNDS];
    int fds[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
    uct_cuda_ipc_ns_rkey_info_t key;
    uct_cuda_ipc_ns_broker_proto_chunk_t *chunks;
    unsigned first, batch, count, i;
    bench_range_t r1, r16, rr;
    double t0;
    int round, pass;

    BENCH_CHECK(uct_cuda_ipc_ns_rkey_parse(c->batch_rkey,
                                           UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE,
                                           &key) == UCS_OK,
                "uct_cuda_ipc_ns_rkey_parse");
    BENCH_CHECK(uct_cuda_ipc_ns_fdx_layout(&cfg, &key, &chunks) == UCS_OK,
                "uct_cuda_ipc_ns_fdx_layout");
    for (round = 0; round < rounds; ++round) {
        for (pass = 0; pass < 2; ++pass) {
            batch = pass ? UCT_CUDA_IPC_NS_BROKER_FDS_MAX : 1;
            t0    = bench_time_now();
            for (first = 0; first < num_chunks; first += count) {
                count = ucs_min(batch, num_chunks - first);
                BENCH_CHECK(uct_cuda_ipc_ns_fdx_chunk_fds(&cfg, &key, chunks,
                                                          first, count, fds,
                                                          NULL) == UCS_OK,
                            "uct_cuda_ipc_ns_fdx_chunk_fds");
                for (i = 0; i < count; ++i) {
                    close(fds[i]);
                }
            }
            (pass ? batched : single)[round] = (bench_time_now() - t0) * 1e6 /
                                               num_chunks;
        }
        ratio[round] = batched[round] / single[round];
    }
    ucs_free(chunks);

    r1  = bench_range(single, rounds);
    r16 = bench_range(batched, rounds);
    rr  = bench_range(ratio, rounds);
    printf("first use, the fd exchange per chunk (%u chunks, %d rounds; the "
           "import and mapping after it are the same)\n", num_chunks, rounds);
    printf("  one chunk per request (before): median %.0f us (min %.0f, max "
           "%.0f)\n", r1.med, r1.min, r1.max);
    printf("  %d chunks per request (GET_CHUNK_FDS): median %.0f us (min %.0f, "
           "max %.0f)\n", UCT_CUDA_IPC_NS_BROKER_FDS_MAX, r16.med, r16.min,
           r16.max);
    printf("ratio fd exchange per chunk, %d per request / one: %.3f (min "
           "%.3f, max %.3f)\n", UCT_CUDA_IPC_NS_BROKER_FDS_MAX, rr.med,
           rr.min, rr.max);
    printf("  first use of a chunk, one per request (above): %.0f us; with %d "
           "per request about %.0f us\n\n", first_use,
           UCT_CUDA_IPC_NS_BROKER_FDS_MAX, first_use - (r1.med - r16.med));
}


/*
 * The first use of each chunk: an 8-byte put into each chunk in turn maps it
 * (the first one also asks for the layout), then the same puts again into
 * mapped chunks; per chunk, the difference. Likewise for the one allocation.
 * One sample per chunk: a mapping is made once.
 */
static void bench_first_use(const bench_ctx_t *c, unsigned num_chunks)
{
    size_t chunk = BENCH_SIZE / num_chunks;
    double first[BENCH_MAX_CHUNKS], again[BENCH_MAX_CHUNKS];
    double cost[BENCH_MAX_CHUNKS], single_first, single_again, t0;
    bench_range_t per_chunk;
    unsigned i, pass;

    BENCH_CU(cuMemsetD8, (CUdeviceptr)c->local, 0, 8); /* the local page */
    for (pass = 0; pass < 2; ++pass) {
        for (i = 0; i < num_chunks; ++i) {
            t0 = bench_time_now();
            bench_copy(c->node, c->ep, 1, c->local, 8,
                       c->addr[0] + i * chunk + chunk / 2, c->rkey[0]);
            (pass ? again : first)[i] = bench_time_now() - t0;
        }
    }
    t0 = bench_time_now();
    bench_copy(c->node, c->ep, 1, c->local, 8, c->addr[1], c->rkey[1]);
    single_first = bench_time_now() - t0;
    t0 = bench_time_now();
    bench_copy(c->node, c->ep, 1, c->local, 8, c->addr[1], c->rkey[1]);
    single_again = bench_time_now() - t0;

    for (i = 1; i < num_chunks; ++i) {
        cost[i - 1] = (first[i] - again[i]) * 1e6;
    }
    per_chunk = bench_range(cost, num_chunks - 1);
    printf("first use: an 8-byte put into a chunk not mapped yet, minus the "
           "same put mapped (one sample per chunk)\n");
    printf("  first chunk (layout request of %u chunks + fd import + "
           "mapping): %.0f us\n", num_chunks,
           (first[0] - again[0]) * 1e6);
    printf("  each further chunk (fd import + mapping): median %.0f us (min "
           "%.0f, max %.0f, %u chunks)\n", per_chunk.med, per_chunk.min,
           per_chunk.max, num_chunks - 1);
    printf("  one allocation (fd import + mapping): %.0f us\n",
           (single_first - single_again) * 1e6);
    printf("ratio first use of a chunk / of one allocation: %.3f\n\n",
           per_chunk.med / ((single_first - single_again) * 1e6));
    bench_first_use_batched(c, num_chunks, per_chunk.med);
}


static void bench_bandwidth(bench_ctx_t *c, int min_iters)
{
    static const size_t sizes[BENCH_NUM_SIZES] = {4ul << 20, 16ul << 20,
                                                  64ul << 20};
    const int rounds        = bench_rounds();
    const double round_time = bench_round_time();
    double bw[BENCH_NUM_SIZES][BENCH_OP_LAST][BENCH_MAX_ROUNDS];
    double put_ratio[BENCH_NUM_SIZES][BENCH_MAX_ROUNDS];
    double get_ratio[BENCH_NUM_SIZES][BENCH_MAX_ROUNDS];
    double t[BENCH_OP_LAST], t0, dt, tmin;
    bench_samples_t samples[BENCH_OP_LAST] = {};
    cpu_set_t cpus;
    char name[64];
    size_t i;
    long it;
    int r, k, op, cpu;

    cpu = bench_pin_threads(&cpus);
    printf("bandwidth: %s; fresh buffers in each round\n", bench_cache_mode());
    bench_print_pin(cpu);
    for (r = 0; r < rounds; ++r) {
        bench_fresh_buffers(c);
        for (i = 0; i < BENCH_NUM_SIZES; ++i) {
            for (op = 0; op < BENCH_OP_LAST; ++op) {
                bench_op(c, op, sizes[i]); /* warm-up: every page, both ways */
            }
            memset(t, 0, sizeof(t));
            it = 0;
            do {
                /* interleaved, the first op of an iteration turning */
                for (k = 0; k < BENCH_OP_LAST; ++k) {
                    op = (k + it) % BENCH_OP_LAST;
                    /* the owner's buffers are not mapped here: the
                     * emulator's copies leave no line of them cached */
                    bench_cache_evict(c->local, sizes[i]);
                    t0 = bench_time_now();
                    bench_op(c, op, sizes[i]);
                    dt     = bench_time_now() - t0;
                    t[op] += dt;
                    bench_samples_add(&samples[op], dt);
                }
                ++it;
                for (tmin = t[0], k = 1; k < BENCH_OP_LAST; ++k) {
                    tmin = (t[k] < tmin) ? t[k] : tmin;
                }
            } while ((it < min_iters) || (tmin < round_time));
            for (op = 0; op < BENCH_OP_LAST; ++op) {
                bw[i][op][r] = sizes[i] /
                               bench_samples_median(&samples[op]) / 1e6;
            }
            put_ratio[i][r] = bw[i][BENCH_OP_PUT_CHUNKS][r] /
                              bw[i][BENCH_OP_PUT_SINGLE][r];
            get_ratio[i][r] = bw[i][BENCH_OP_GET_CHUNKS][r] /
                              bw[i][BENCH_OP_GET_SINGLE][r];
        }
    }
    bench_unpin_threads(cpu, &cpus);

    printf("%-10s %14s %14s %14s %14s\n", "size", "put chunks MB/s",
           "put single", "get chunks", "get single");
    for (i = 0; i < BENCH_NUM_SIZES; ++i) {
        printf("%-10zu %14.1f %14.1f %14.1f %14.1f\n", sizes[i],
               bench_range(bw[i][0], rounds).med,
               bench_range(bw[i][1], rounds).med,
               bench_range(bw[i][2], rounds).med,
               bench_range(bw[i][3], rounds).med);
        snprintf(name, sizeof(name), "put chunks/single %zu MiB",
                 sizes[i] >> 20);
        bench_print_ratio(name, put_ratio[i], rounds);
        snprintf(name, sizeof(name), "get chunks/single %zu MiB",
                 sizes[i] >> 20);
        bench_print_ratio(name, get_ratio[i], rounds);
    }
    for (op = 0; op < BENCH_OP_LAST; ++op) {
        free(samples[op].v);
    }
}


int main(int argc, char **argv)
{
    int iters = 5, chan, opt;
    uct_ep_params_t ep_params = {};
    bench_export_t exp;
    bench_node_t node;
    bench_ctx_t ctx;
    uct_ep_h ep;
    pid_t pid;

    if ((argc == 3) && !strcmp(argv[1], "--exporter")) {
        return bench_exporter(atoi(argv[2]));
    }
    while ((opt = getopt(argc, argv, "n:")) != -1) {
        if (opt == 'n') {
            iters = atoi(optarg);
        } else {
            fprintf(stderr, "usage: %s [-n iterations]\n", argv[0]);
            return 2;
        }
    }

    /* the emulator's granularity, for both processes: 64 chunks in 64 MiB */
    setenv("CUDASIM_VMM_GRANULARITY", "1048576", 0);
    pid = bench_start_exporter(argv[0], &chan);

    bench_cuda_init();
    bench_node_open(&node);
    BENCH_CHECK(recv(chan, &exp, sizeof(exp), 0) == sizeof(exp),
                "exporter message");
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = node.iface;
    ep_params.dev_addr   = (uct_device_addr_t*)exp.dev_addr;
    ep_params.iface_addr = (uct_iface_addr_t*)exp.iface_addr;
    BENCH_CHECK(uct_ep_create(&ep_params, &ep) == UCS_OK, "uct_ep_create");

    memset(&ctx, 0, sizeof(ctx));
    ctx.node  = &node;
    ctx.ep    = ep;
    ctx.chan  = chan;
    ctx.local = bench_vmm_chunks(BENCH_SIZE, 1);
    memcpy(ctx.batch_rkey, exp.batch_rkey, sizeof(ctx.batch_rkey));
    bench_take_pair(&ctx, &exp);

    printf("cuda_ipc_ns framework memory: %u chunks of %lu KiB vs one "
           "allocation of 64 MiB, driver %s\n", exp.num_chunks,
           (BENCH_SIZE / exp.num_chunks) >> 10,
           getenv("UCX_CUDA_IPC_NS_DRIVER") ?: "libcuda.so.1");
    bench_print_settings("bench_chunks");
    printf("\n");
    bench_first_use(&ctx, exp.num_chunks);
    bench_bandwidth(&ctx, iters);

    uct_rkey_release(node.component, &ctx.bundle[1]);
    uct_rkey_release(node.component, &ctx.bundle[0]);
    bench_vmm_free(ctx.local, BENCH_SIZE);
    uct_ep_destroy(ep);
    bench_node_close(&node);
    close(chan);
    waitpid(pid, NULL, 0);
    return 0;
}
