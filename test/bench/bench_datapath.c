/*
 * cuda_ipc_ns: data-path figures as ratios measured in one run
 * (docs/architecture.md, "Performance"):
 *
 *  1. put and get bandwidth through cu_ipc_ns (another process's VMM memory,
 *     one op at a time) vs a single-process cuMemcpyDtoD of the same size,
 *     at 1, 16 and 64 MiB (goal >= 0.90);
 *  2. latency of an 8-byte put (post + progress to completion) vs one
 *     cuMemcpyDtoDAsync + cuEventRecord + polling cuEventQuery in one
 *     process (goal <= 1.5x);
 *
 * The mapping cache's figures come from bench_cache.
 *
 * The exporter is this program again (fork + exec: a CUDA driver cannot be
 * used in a forked child), talking over a socketpair.
 *
 * Usage: bench_datapath [-n iterations]     (driver: UCX_CUDA_IPC_NS_DRIVER)
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_rkey.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include <sys/socket.h>
#include <poll.h>
#include <sys/wait.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define BENCH_MAX_SIZE   (64ul << 20)
#define BENCH_CHECK(_cond, _what) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "bench_datapath: %s failed (%s:%d)\n", _what, \
                    __FILE__, __LINE__); \
            exit(1); \
        } \
    } while (0)
#define BENCH_CU(_func, ...) \
    BENCH_CHECK(uct_cuda_ipc_ns_drv._func(__VA_ARGS__) == CUDA_SUCCESS, #_func)


/* What the exporter sends: its addresses, buffer address and key */
typedef struct {
    uint8_t  dev_addr[UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE];
    uint8_t  iface_addr[UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE];
    uint64_t addr;
    uint8_t  rkey[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
} bench_export_t;


typedef struct {
    uct_component_h     component;
    uct_md_h            md;
    ucs_async_context_t *async;
    uct_worker_h        worker;
    uct_iface_h         iface;
    int                 event_fd;
} bench_node_t;


static double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static void bench_cuda_init(void)
{
    CUdevice device;
    CUcontext ctx;

    BENCH_CHECK(uct_cuda_ipc_ns_driver_load(getenv("UCX_CUDA_IPC_NS_DRIVER") ?:
                                            "libcuda.so.1") == UCS_OK,
                "loading the CUDA driver");
    BENCH_CU(cuDeviceGet, &device, 0);
    BENCH_CU(cuDevicePrimaryCtxRetain, &ctx, device);
    BENCH_CU(cuCtxSetCurrent, ctx);
}


/* VMM memory with POSIX fd handles, as exported across PID namespaces */
static void *bench_vmm_alloc(size_t size)
{
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    CUmemGenericAllocationHandle handle;
    CUdeviceptr ptr;
    size_t granularity;

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    BENCH_CU(cuMemGetAllocationGranularity, &granularity, &prop,
             CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    size = ((size + granularity - 1) / granularity) * granularity;
    BENCH_CU(cuMemCreate, &handle, size, &prop, 0);
    BENCH_CU(cuMemAddressReserve, &ptr, size, 0, 0, 0);
    BENCH_CU(cuMemMap, ptr, size, 0, handle, 0);
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    BENCH_CU(cuMemSetAccess, ptr, size, &access, 1);
    return (void*)ptr;
}


static void bench_node_open(bench_node_t *node)
{
    uct_iface_params_t params = {};
    uct_component_attr_t attr;
    uct_component_h *components;
    uct_iface_config_t *iface_config;
    uct_md_config_t *md_config;
    unsigned i, count;

    node->component = NULL;
    BENCH_CHECK(uct_query_components(&components, &count) == UCS_OK,
                "uct_query_components");
    for (i = 0; i < count; ++i) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "cuda_ipc_ns")) {
            node->component = components[i];
        }
    }
    uct_release_component_list(components);
    BENCH_CHECK(node->component != NULL, "finding component cuda_ipc_ns");

    BENCH_CHECK(uct_md_config_read(node->component, NULL, NULL, &md_config) ==
                UCS_OK, "uct_md_config_read");
    BENCH_CHECK(uct_md_open(node->component, "cuda_ipc_ns", md_config,
                            &node->md) == UCS_OK, "uct_md_open");
    uct_config_release(md_config);
    BENCH_CHECK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                         &node->async) == UCS_OK, "async");
    BENCH_CHECK(uct_worker_create(node->async, UCS_THREAD_MODE_SINGLE,
                                  &node->worker) == UCS_OK, "worker");
    BENCH_CHECK(uct_md_iface_config_read(node->md, "cu_ipc_ns", NULL, NULL,
                                         &iface_config) == UCS_OK,
                "iface config");
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "cu_ipc_ns";
    params.mode.device.dev_name = "cuda";
    BENCH_CHECK(uct_iface_open(node->md, node->worker, &params, iface_config,
                               &node->iface) == UCS_OK, "uct_iface_open");
    uct_config_release(iface_config);
    uct_iface_progress_enable(node->iface, UCT_PROGRESS_SEND);
    BENCH_CHECK(uct_iface_event_fd_get(node->iface, &node->event_fd) == UCS_OK,
                "uct_iface_event_fd_get");
}


static void bench_node_close(bench_node_t *node)
{
    uct_iface_close(node->iface);
    uct_worker_destroy(node->worker);
    ucs_async_context_destroy(node->async);
    uct_md_close(node->md);
}


/* Exporter: a registered VMM buffer until the parent closes the channel */
static int bench_exporter(int chan)
{
    bench_export_t msg;
    bench_node_t node;
    uct_mem_h memh;
    void *buf;
    char c;

    bench_cuda_init();
    bench_node_open(&node);
    buf = bench_vmm_alloc(BENCH_MAX_SIZE);
    BENCH_CHECK(uct_md_mem_reg(node.md, buf, BENCH_MAX_SIZE,
                               UCT_MD_MEM_ACCESS_ALL, &memh) == UCS_OK,
                "uct_md_mem_reg");
    BENCH_CHECK(uct_md_mkey_pack(node.md, memh, msg.rkey) == UCS_OK,
                "uct_md_mkey_pack");
    uct_iface_get_device_address(node.iface, (uct_device_addr_t*)msg.dev_addr);
    uct_iface_get_address(node.iface, (uct_iface_addr_t*)msg.iface_addr);
    msg.addr = (uintptr_t)buf;
    BENCH_CHECK(send(chan, &msg, sizeof(msg), 0) == sizeof(msg), "send");
    while (recv(chan, &c, 1, 0) > 0) {
    }
    uct_md_mem_dereg(node.md, memh);
    bench_node_close(&node);
    return 0;
}


static void bench_comp_cb(uct_completion_t *comp)
{
}


/*
 * One put/get, posted and progressed to completion. Large copies wait on
 * the iface's event fd rather than spin: the spinning thread would compete
 * for the CPU with the copy itself on the emulator (as for cuMemcpyDtoD,
 * which waits inside the driver).
 */
static void bench_copy(bench_node_t *node, uct_ep_h ep, int is_put, void *local,
                       size_t size, uint64_t remote, uct_rkey_t rkey)
{
    uct_iov_t iov          = {local, size, NULL, 0, 1};
    uct_completion_t comp  = {bench_comp_cb, 1, UCS_OK};
    struct pollfd pfd      = {node->event_fd, POLLIN, 0};
    ucs_status_t status;

    status = is_put ? uct_ep_put_zcopy(ep, &iov, 1, remote, rkey, &comp) :
                      uct_ep_get_zcopy(ep, &iov, 1, remote, rkey, &comp);
    BENCH_CHECK(UCS_STATUS_IS_ERR(status) == 0, "put/get zcopy");
    while ((status == UCS_INPROGRESS) && (comp.count > 0)) {
        if (uct_worker_progress(node->worker) || (size < (1ul << 20))) {
            continue;
        }
        if (uct_iface_event_arm(node->iface, UCT_EVENT_SEND_COMP) == UCS_OK) {
            poll(&pfd, 1, 1000);
        }
    }
    BENCH_CHECK(comp.status == UCS_OK, "copy completion");
}


static int bench_iters(size_t size, int base)
{
    int n = (int)((base * (1ul << 20)) / (size + (1ul << 20)));
    return (n < 3) ? 3 : n;
}


static void bench_bandwidth(bench_node_t *node, uct_ep_h ep,
                            const bench_export_t *exp, uct_rkey_t rkey,
                            int base_iters)
{
    static const size_t sizes[] = {1ul << 20, 16ul << 20, 64ul << 20};
    void *local = bench_vmm_alloc(BENCH_MAX_SIZE);
    void *other = bench_vmm_alloc(BENCH_MAX_SIZE);
    double t, local_bw, async_bw, put_bw, get_bw;
    CUstream stream;
    size_t i;
    int it, n;

    BENCH_CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    /* the goal compares with cuMemcpyDtoD; the asynchronous copy on a stream
     * (what the transport does, in one process) is printed for reference */
    printf("%-10s %12s %12s %12s %12s %8s %8s %8s\n", "size", "DtoD MB/s",
           "async MB/s", "put MB/s", "get MB/s", "put/DtoD", "get/DtoD",
           "put/async");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        n = bench_iters(sizes[i], base_iters);
        /* warm up: mappings, streams, events */
        bench_copy(node, ep, 1, local, sizes[i], exp->addr, rkey);
        BENCH_CU(cuMemcpyDtoD, (CUdeviceptr)other, (CUdeviceptr)local, sizes[i]);

        /* interleaved, so all of them see the same machine state */
        local_bw = async_bw = put_bw = get_bw = 0;
        for (it = 0; it < n; ++it) {
            t = bench_now();
            BENCH_CU(cuMemcpyDtoD, (CUdeviceptr)other, (CUdeviceptr)local,
                     sizes[i]);
            local_bw += bench_now() - t;
            t = bench_now();
            BENCH_CU(cuMemcpyDtoDAsync, (CUdeviceptr)other, (CUdeviceptr)local,
                     sizes[i], stream);
            BENCH_CU(cuStreamSynchronize, stream);
            async_bw += bench_now() - t;
            t = bench_now();
            bench_copy(node, ep, 1, local, sizes[i], exp->addr, rkey);
            put_bw += bench_now() - t;
            t = bench_now();
            bench_copy(node, ep, 0, local, sizes[i], exp->addr, rkey);
            get_bw += bench_now() - t;
        }
        local_bw = sizes[i] * n / local_bw / 1e6;
        async_bw = sizes[i] * n / async_bw / 1e6;
        put_bw   = sizes[i] * n / put_bw / 1e6;
        get_bw   = sizes[i] * n / get_bw / 1e6;
        printf("%-10zu %12.1f %12.1f %12.1f %12.1f %8.3f %8.3f %8.3f\n",
               sizes[i], local_bw, async_bw, put_bw, get_bw,
               put_bw / local_bw, get_bw / local_bw, put_bw / async_bw);
    }
    uct_cuda_ipc_ns_drv.cuStreamDestroy(stream);
}


static void bench_latency(bench_node_t *node, uct_ep_h ep,
                          const bench_export_t *exp, uct_rkey_t rkey, int iters)
{
    void *local = bench_vmm_alloc(1ul << 21);
    void *other = bench_vmm_alloc(1ul << 21);
    double t, ours = 0, ref = 0;
    CUstream stream;
    CUevent event;
    int it;

    BENCH_CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    BENCH_CU(cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);
    bench_copy(node, ep, 1, local, 8, exp->addr, rkey);

    for (it = 0; it < iters; ++it) {
        t = bench_now();
        BENCH_CU(cuMemcpyDtoDAsync, (CUdeviceptr)other, (CUdeviceptr)local, 8,
                 stream);
        BENCH_CU(cuEventRecord, event, stream);
        while (uct_cuda_ipc_ns_drv.cuEventQuery(event) == CUDA_ERROR_NOT_READY) {
        }
        ref += bench_now() - t;

        t = bench_now();
        bench_copy(node, ep, 1, local, 8, exp->addr, rkey);
        ours += bench_now() - t;
    }

    printf("\n8-byte put latency: %.2f us; async copy + event in one process: "
           "%.2f us; ratio %.3f (goal <= 1.5)\n", ours / iters * 1e6,
           ref / iters * 1e6, ours / ref);
    uct_cuda_ipc_ns_drv.cuEventDestroy(event);
    uct_cuda_ipc_ns_drv.cuStreamDestroy(stream);
}


int main(int argc, char **argv)
{
    int iters = 40, sv[2], opt;
    uct_ep_params_t ep_params = {};
    uct_rkey_bundle_t rkey;
    bench_export_t exp;
    bench_node_t node;
    char fd_str[16];
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

    BENCH_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair");
    pid = fork();
    BENCH_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(sv[0]);
        snprintf(fd_str, sizeof(fd_str), "%d", sv[1]);
        execl("/proc/self/exe", argv[0], "--exporter", fd_str, (char*)NULL);
        _exit(127);
    }
    close(sv[1]);

    bench_cuda_init();
    bench_node_open(&node);
    BENCH_CHECK(recv(sv[0], &exp, sizeof(exp), 0) == sizeof(exp),
                "exporter message");
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = node.iface;
    ep_params.dev_addr   = (uct_device_addr_t*)exp.dev_addr;
    ep_params.iface_addr = (uct_iface_addr_t*)exp.iface_addr;
    BENCH_CHECK(uct_ep_create(&ep_params, &ep) == UCS_OK, "uct_ep_create");
    BENCH_CHECK(uct_rkey_unpack(node.component, exp.rkey, &rkey) == UCS_OK,
                "uct_rkey_unpack");

    printf("cuda_ipc_ns data path, driver %s\n\n",
           getenv("UCX_CUDA_IPC_NS_DRIVER") ?: "libcuda.so.1");
    bench_bandwidth(&node, ep, &exp, rkey.rkey, iters);
    bench_latency(&node, ep, &exp, rkey.rkey, iters * 50);

    uct_rkey_release(node.component, &rkey);
    uct_ep_destroy(ep);
    bench_node_close(&node);
    close(sv[0]);
    waitpid(pid, NULL, 0);
    return 0;
}
