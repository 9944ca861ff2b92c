/*
 * cuda_ipc_ns: copies made by the owner (docs/owner-copies.md) against the
 * direct IPC lane, in one run.
 *
 * Starts this program again as the exporter, which allocates 64 MiB of
 * legacy memory (cuMemAlloc), registered with its broker for copies, and
 * 64 MiB of VMM memory registered through cu_ipc_ns. The importer gets
 * from and puts to each, at the same sizes and offsets, into its own VMM
 * buffer: through COPY requests to the owner (a request, the owner's copy,
 * its answer) and through cu_ipc_ns zero copy (mapped, copied by the
 * importer), with as many copies in flight as the owner runs for one client
 * (UCT_CUDA_IPC_NS_COPY_QUEUE_MAX; one at 64 MiB), as a bandwidth test keeps
 * a window of them. Per size it prints the bandwidth of each and the ratio
 * owner/direct (median and range of the rounds: bench_stats.h). Both
 * processes are in one PID namespace here: what is measured is the cost of
 * the lane, which does not depend on the namespace.
 *
 * Usage: bench_owner_copy [-n iterations]
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "bench_uct.h"
#include "bench_stats.h"
#include "bench_cpu_cache.h"
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_broker_copy.h"
#include "cuda_ipc_ns_copy_client.h"
#include "cuda_ipc_ns_nsid.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#define BENCH_SIZE   (64ul << 20)
#define BENCH_REG_ID 0x0c09


typedef struct {
    uct_cuda_ipc_ns_rkey_info_t range_key; /* owner, broker, token */
    uint64_t                    vmm_addr;
    uint8_t                     vmm_rkey[256];
    uint8_t                     dev_addr[64];
    uint8_t                     iface_addr[64];
} bench_export_t;


/* pinned VMM memory with POSIX fd handles, one allocation */
static void *bench_vmm_alloc(size_t size, CUmemGenericAllocationHandle *handle_p)
{
    CUmemAllocationProp prop = bench_vmm_prop();
    CUmemAccessDesc access   = {};
    CUdeviceptr ptr;

    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    BENCH_CU(cuMemAddressReserve, &ptr, size, 0, 0, 0);
    BENCH_CU(cuMemCreate, handle_p, size, &prop, 0);
    BENCH_CU(cuMemMap, ptr, size, 0, *handle_p, 0);
    BENCH_CU(cuMemSetAccess, ptr, size, &access, 1);
    return (void*)ptr;
}


/* Exporter: both buffers registered until the parent closes the channel */
static int bench_exporter(int chan)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {.mode        = UCT_CUDA_IPC_NS_FDX_AUTO,
                                        .timeout     = 5.0,
                                        .allowed_uid = -1};
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    CUmemGenericAllocationHandle handle;
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    uct_cuda_ipc_ns_broker_t *broker;
    bench_export_t msg = {};
    bench_node_t node;
    uct_mem_h memh;
    CUdeviceptr legacy;
    CUcontext ctx;
    const char *addr;
    void *vmm;
    char c;

    bench_cuda_init();
    bench_node_open(&node);
    BENCH_CU(cuCtxGetCurrent, &ctx);
    BENCH_CU(cuMemAlloc, &legacy, BENCH_SIZE);
    vmm = bench_vmm_alloc(BENCH_SIZE, &handle);
    BENCH_CHECK(uct_md_mem_reg(node.md, vmm, BENCH_SIZE, UCT_MD_MEM_ACCESS_ALL,
                               &memh) == UCS_OK, "uct_md_mem_reg");
    bench_mkey_pack(&node, memh, vmm, BENCH_SIZE, msg.vmm_rkey);
    uct_iface_get_device_address(node.iface, (uct_device_addr_t*)msg.dev_addr);
    uct_iface_get_address(node.iface, (uct_iface_addr_t*)msg.iface_addr);
    msg.vmm_addr = (uintptr_t)vmm;

    BENCH_CHECK(uct_cuda_ipc_ns_broker_get(&cfg, &broker) == UCS_OK,
                "uct_cuda_ipc_ns_broker_get");
    BENCH_CHECK(uct_cuda_ipc_ns_broker_register_range(
                        broker, BENCH_REG_ID, legacy, BENCH_SIZE, ctx, 0,
                        msg.range_key.token, &reg) == UCS_OK,
                "uct_cuda_ipc_ns_broker_register_range");
    msg.range_key.handle_type = UCT_CUDA_IPC_NS_HANDLE_LEGACY;
    msg.range_key.pid         = self->pid;
    msg.range_key.pid_ns      = self->pid_ns;
    msg.range_key.start_time  = self->start_time;
    msg.range_key.base        = legacy;
    msg.range_key.length      = BENCH_SIZE;
    addr = uct_cuda_ipc_ns_broker_addr(broker, &msg.range_key.broker_addr_len);
    memcpy(msg.range_key.broker_addr, addr, msg.range_key.broker_addr_len);

    BENCH_CHECK(send(chan, &msg, sizeof(msg), 0) == sizeof(msg), "send");
    while (recv(chan, &c, 1, 0) > 0) {
    }
    uct_cuda_ipc_ns_broker_unregister(broker, reg);
    uct_cuda_ipc_ns_broker_put(broker);
    uct_md_mem_dereg(node.md, memh);
    bench_node_close(&node);
    return 0;
}


typedef struct {
    bench_node_t *node;
    uct_ep_h     ep;
    uct_rkey_t   rkey;
    uint64_t     vmm_addr;
    void         *local;
    int          local_fd;
    uint64_t     local_id;
    int          sock;
    const uint8_t *token;
    uint64_t     seq;
} bench_ctx_t;


/* @a count COPY requests at once, the i-th for [i * size, (i + 1) * size)
 * of both buffers, and their answers */
static void bench_owner_copy(bench_ctx_t *ctx, int is_put, size_t size,
                             unsigned count)
{
    uct_cuda_ipc_ns_broker_proto_copy_args_t copy = {};
    uint64_t first                                = ctx->seq + 1;
    ucs_status_t op_status;
    unsigned i;
    uint64_t seq;

    copy.length    = size;
    copy.buf_id    = ctx->local_id;
    copy.buf_size  = BENCH_SIZE;
    copy.direction = is_put ? UCT_CUDA_IPC_NS_COPY_FROM_IMPORTER :
                              UCT_CUDA_IPC_NS_COPY_TO_IMPORTER;
    for (i = 0; i < count; ++i) {
        copy.seq        = ++ctx->seq;
        copy.offset     = i * size;
        copy.buf_offset = i * size;
        /* the fd goes once: the owner keeps the buffer mapped */
        BENCH_CHECK(uct_cuda_ipc_ns_copy_client_send(
                            ctx->sock, BENCH_REG_ID, ctx->token, &copy,
                            (copy.seq == 1) ? ctx->local_fd : -1, 0) == UCS_OK,
                    "COPY request");
    }
    for (i = 0; i < count; ++i) {
        BENCH_CHECK((uct_cuda_ipc_ns_copy_client_recv(ctx->sock, BENCH_REG_ID,
                                                      0, &seq, &op_status) ==
                     UCS_OK) && (seq >= first) && (seq <= ctx->seq) &&
                    (op_status == UCS_OK), "COPY answer");
    }
}


enum { BENCH_OWNER, BENCH_DIRECT, BENCH_LANES };


/* requests in flight at once: as many as the owner runs for one client */
static unsigned bench_window(size_t size)
{
    return ucs_max(1, ucs_min(UCT_CUDA_IPC_NS_COPY_QUEUE_MAX,
                              BENCH_SIZE / size));
}


static void bench_run(bench_ctx_t *ctx, int is_put, int iters)
{
    static const size_t sizes[] = {64ul << 10, 1ul << 20, 4ul << 20, 64ul << 20};
    const double round_time     = bench_round_time();
    const int rounds            = bench_rounds();
    double bw[BENCH_LANES][BENCH_MAX_ROUNDS], ratio[BENCH_MAX_ROUNDS];
    bench_samples_t samples[BENCH_LANES] = {}, pairs = {};
    double pair_dt[BENCH_LANES];
    const char *op = is_put ? "put" : "get";
    double t0, start, dt;
    unsigned window;
    bench_range_t rb;
    int r, lane, n;
    size_t i;
    char name[64];

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        window = bench_window(sizes[i]);
        /* warm-up: mappings on both sides, the owner's stream, every page */
        bench_owner_copy(ctx, is_put, sizes[i], window);
        bench_copy_window(ctx->node, ctx->ep, is_put, ctx->local, sizes[i],
                          window, ctx->vmm_addr, ctx->rkey);
        for (r = 0; r < rounds; ++r) {
            start = bench_time_now();
            for (n = 0; (n < iters) || (bench_time_now() - start < round_time);
                 ++n) {
                /* interleaved: both lanes see the same machine state */
                for (lane = 0; lane < BENCH_LANES; ++lane) {
                    /* as bench_chunks: the owner's buffers are not mapped
                     * here, ours leaves the caches before each copy */
                    bench_cache_evict(ctx->local, sizes[i] * window);
                    t0 = bench_time_now();
                    if (lane == BENCH_OWNER) {
                        bench_owner_copy(ctx, is_put, sizes[i], window);
                    } else {
                        bench_copy_window(ctx->node, ctx->ep, is_put,
                                          ctx->local, sizes[i], window,
                                          ctx->vmm_addr, ctx->rkey);
                    }
                    dt = bench_time_now() - t0;
                    bench_samples_add(&samples[lane], dt);
                    pair_dt[lane] = dt;
                }
                /* this iteration's ratio: both lanes back to back */
                bench_samples_add(&pairs, pair_dt[BENCH_DIRECT] /
                                          pair_dt[BENCH_OWNER]);
            }
            for (lane = 0; lane < BENCH_LANES; ++lane) {
                bw[lane][r] = sizes[i] * window /
                              bench_samples_median(&samples[lane]) / 1e9;
            }
            ratio[r] = bench_samples_median(&pairs);
        }
        rb = bench_range(bw[BENCH_OWNER], rounds);
        printf("%s %6zu KiB, %u in flight: owner copy %.2f GB/s", op,
               sizes[i] >> 10, window, rb.med);
        rb = bench_range(bw[BENCH_DIRECT], rounds);
        printf(", direct IPC %.2f GB/s\n", rb.med);
        snprintf(name, sizeof(name), "owner_copy/ipc %s %zu KiB", op,
                 sizes[i] >> 10);
        bench_print_ratio(name, ratio, rounds);
    }
    for (lane = 0; lane < BENCH_LANES; ++lane) {
        free(samples[lane].v);
    }
    free(pairs.v);
}


int main(int argc, char **argv)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {.mode        = UCT_CUDA_IPC_NS_FDX_AUTO,
                                        .timeout     = 5.0,
                                        .allowed_uid = -1};
    uct_ep_params_t ep_params = {};
    CUmemGenericAllocationHandle handle;
    unsigned long long buffer_id;
    uct_rkey_bundle_t rkey;
    bench_export_t exp;
    bench_node_t node;
    bench_ctx_t ctx = {};
    int iters = 20, chan, opt, status;
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
    BENCH_CHECK(uct_ep_create(&ep_params, &ctx.ep) == UCS_OK, "uct_ep_create");
    BENCH_CHECK(uct_rkey_unpack(node.component, exp.vmm_rkey, &rkey) == UCS_OK,
                "uct_rkey_unpack");

    ctx.node     = &node;
    ctx.rkey     = rkey.rkey;
    ctx.vmm_addr = exp.vmm_addr;
    ctx.token    = exp.range_key.token;
    ctx.local    = bench_vmm_alloc(BENCH_SIZE, &handle);
    BENCH_CU(cuMemExportToShareableHandle, &ctx.local_fd, handle,
             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    BENCH_CU(cuPointerGetAttribute, &buffer_id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
             (CUdeviceptr)ctx.local);
    ctx.local_id = buffer_id;
    BENCH_CHECK(uct_cuda_ipc_ns_copy_client_open(&cfg, &exp.range_key,
                                                 &ctx.sock) == UCS_OK,
                "uct_cuda_ipc_ns_copy_client_open");

    printf("cuda_ipc_ns owner copies (legacy memory, COPY requests) vs direct "
           "IPC (VMM memory, cu_ipc_ns zero copy), driver %s\n",
           getenv("UCX_CUDA_IPC_NS_DRIVER") ?: "libcuda.so.1");
    bench_print_settings("bench_owner_copy");
    printf("%s\n", bench_cache_mode());
    printf("\n");
    bench_run(&ctx, 0, iters);
    bench_run(&ctx, 1, iters);

    close(ctx.sock);
    close(ctx.local_fd);
    uct_rkey_release(node.component, &rkey);
    uct_ep_destroy(ctx.ep);
    bench_node_close(&node);
    close(chan);
    BENCH_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    return (WIFEXITED(status) && (WEXITSTATUS(status) == 0)) ? 0 : 1;
}
