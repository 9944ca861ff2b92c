/*
 * cuda_ipc_ns: data-path figures as ratios measured in one run
 * (docs/architecture.md, "Performance"):
 *
 *  1. put and get bandwidth through cu_ipc_ns (another process's VMM memory,
 *     one op at a time) vs a single-process cuMemcpyDtoD of the same size,
 *     at 1, 16 and 64 MiB (goal >= 0.90), and get vs put;
 *  2. latency of an 8-byte put (post + progress to completion) vs one
 *     cuMemcpyDtoDAsync + cuEventRecord + polling cuEventQuery in one
 *     process (goal <= 1.5x);
 * each as rounds after a warm-up, median and range (bench_stats.h).
 *
 * The mapping cache's figures come from bench_cache.
 *
 * The exporter is this program again (fork + exec: a CUDA driver cannot be
 * used in a forked child), talking over a socketpair.
 *
 * Usage: bench_datapath [-c|-v] [-n iterations] (driver: UCX_CUDA_IPC_NS_DRIVER)
 *   -n: the fewest iterations of a bandwidth round (default 5); a latency
 *   round runs at least 200 times as many
 *   -c: instead, the phases contrib/icount.sh counts the instructions of
 *   under callgrind (-n: the repetitions of a phase)
 *   -v: instead, put and get a pattern of 8 B, 64 KiB and 4 MiB + 8 and
 *   check its bytes on the other side
 * Environment: BENCH_TL (cu_ipc_ns, or UCX's cuda_ipc: bench_uct.h),
 *   BENCH_MEM (vmm, default: cuMemCreate with POSIX fd handles; legacy:
 *   cuMemAlloc, exported with cuIpcGetMemHandle), both sides alike;
 *   BENCH_SIZES (bandwidth sizes, comma separated, K/M suffixes; default
 *   1M,16M,64M)
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_rkey.h"
#include "bench_stats.h"
#include "bench_cpu_cache.h"
#include "bench_cpu_pin.h"
#include "bench_uct.h"
#include "bench_callgrind.h"

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


/* What the exporter sends: its addresses, buffer address and key */
typedef struct {
    uint8_t  dev_addr[BENCH_ADDR_MAX];
    uint8_t  iface_addr[BENCH_ADDR_MAX];
    uint64_t addr;
    uint8_t  rkey[BENCH_RKEY_MAX];
    CUipcMemHandle ipc;  /* BENCH_MEM=legacy: the buffer's handle */
} bench_export_t;


/* BENCH_MEM=legacy: cuMemAlloc memory on both sides, else VMM */
static int bench_mem_legacy(void)
{
    const char *mem = getenv("BENCH_MEM") ?: "vmm";

    BENCH_CHECK(!strcmp(mem, "vmm") || !strcmp(mem, "legacy"),
                "BENCH_MEM: vmm or legacy");
    return !strcmp(mem, "legacy");
}


/* map @a handle of @a size bytes read-write on device 0 */
static void *bench_vmm_map(CUmemGenericAllocationHandle handle, size_t size)
{
    CUmemAllocationProp prop = bench_vmm_prop();
    CUmemAccessDesc access   = {};
    CUdeviceptr ptr;

    BENCH_CU(cuMemAddressReserve, &ptr, size, 0, 0, 0);
    BENCH_CU(cuMemMap, ptr, size, 0, handle, 0);
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    BENCH_CU(cuMemSetAccess, ptr, size, &access, 1);
    return (void*)ptr;
}


/* VMM memory with POSIX fd handles, as exported across PID namespaces;
 * @a size a multiple of the granularity; @a handle_p may be NULL */
static void *bench_vmm_alloc(size_t size,
                             CUmemGenericAllocationHandle *handle_p)
{
    CUmemAllocationProp prop = bench_vmm_prop();
    CUmemGenericAllocationHandle handle;
    size_t granularity;

    BENCH_CU(cuMemGetAllocationGranularity, &granularity, &prop,
             CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    BENCH_CHECK(size % granularity == 0, "size a multiple of the granularity");
    BENCH_CU(cuMemCreate, &handle, size, &prop, 0);
    if (handle_p != NULL) {
        *handle_p = handle;
    }
    return bench_vmm_map(handle, size);
}


/* a buffer of the kind BENCH_MEM names */
static void *bench_mem_alloc(size_t size)
{
    CUdeviceptr ptr;

    if (!bench_mem_legacy()) {
        return bench_vmm_alloc(size, NULL);
    }
    BENCH_CU(cuMemAlloc, &ptr, size);
    return (void*)ptr;
}


/* Exporter: a registered VMM buffer until the parent closes the channel */
static int bench_exporter(int chan)
{
    char cbuf[CMSG_SPACE(sizeof(int))] = {};
    CUmemGenericAllocationHandle handle;
    struct msghdr mh = {};
    struct cmsghdr *cmsg;
    struct iovec iov;
    bench_export_t msg;
    bench_node_t node;
    uct_mem_h memh;
    CUdeviceptr dptr;
    void *buf;
    int fd = -1;
    char c;

    bench_cuda_init();
    bench_node_open(&node);
    memset(&msg, 0, sizeof(msg));
    if (bench_mem_legacy()) {
        BENCH_CU(cuMemAlloc, &dptr, BENCH_MAX_SIZE);
        BENCH_CU(cuIpcGetMemHandle, &msg.ipc, dptr);
        buf = (void*)dptr;
    } else {
        buf = bench_vmm_alloc(BENCH_MAX_SIZE, &handle);
        BENCH_CU(cuMemExportToShareableHandle, &fd, handle,
                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    }
    BENCH_CHECK(uct_md_mem_reg(node.md, buf, BENCH_MAX_SIZE,
                               UCT_MD_MEM_ACCESS_ALL, &memh) == UCS_OK,
                "uct_md_mem_reg");
    bench_mkey_pack(&node, memh, buf, BENCH_MAX_SIZE, msg.rkey);
    uct_iface_get_device_address(node.iface, (uct_device_addr_t*)msg.dev_addr);
    uct_iface_get_address(node.iface, (uct_iface_addr_t*)msg.iface_addr);
    msg.addr = (uintptr_t)buf;
    /* with the memory's fd (VMM) or handle (legacy): the importer's own
     * single-process reference copies use the very pages the transport
     * copies to and from */
    iov.iov_base       = &msg;
    iov.iov_len        = sizeof(msg);
    mh.msg_iov         = &iov;
    mh.msg_iovlen      = 1;
    if (fd >= 0) {
        mh.msg_control     = cbuf;
        mh.msg_controllen  = sizeof(cbuf);
        cmsg               = CMSG_FIRSTHDR(&mh);
        cmsg->cmsg_level   = SOL_SOCKET;
        cmsg->cmsg_type    = SCM_RIGHTS;
        cmsg->cmsg_len     = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    }
    BENCH_CHECK(sendmsg(chan, &mh, 0) == sizeof(msg), "send");
    if (fd >= 0) {
        close(fd);
    }
    while (recv(chan, &c, 1, 0) > 0) {
    }
    uct_md_mem_dereg(node.md, memh);
    bench_node_close(&node);
    return 0;
}


enum {
    BENCH_OP_DTOD,   /* cuMemcpyDtoD to the exporter's pages, one process,
                      * + cuStreamSynchronize of the default stream */
    BENCH_OP_DTOD_R, /* cuMemcpyDtoD from them, one process, + the same */
    BENCH_OP_ASYNC,  /* cuMemcpyDtoDAsync + cuStreamSynchronize, as DTOD */
    BENCH_OP_PUT,    /* put_zcopy to the exporter's memory */
    BENCH_OP_GET,    /* get_zcopy from it */
    BENCH_OP_LAST
};


typedef struct {
    bench_node_t          *node;
    uct_ep_h              ep;
    uint64_t              remote;    /* the exporter's buffer, its address */
    uct_rkey_t            rkey;
    void                  *local;
    void                  *peer_mem; /* the same buffer, mapped here */
    CUstream              stream;
} bench_bw_ctx_t;


static void bench_op(const bench_bw_ctx_t *c, int op, size_t size)
{
    CUdeviceptr local = (CUdeviceptr)c->local, peer = (CUdeviceptr)c->peer_mem;

    switch (op) {
    /* cuMemcpyDtoD returns before the copy is done (the driver's "API
     * synchronization behavior"; the emulator too): the time of the copy
     * is the time until the default stream is synchronized */
    case BENCH_OP_DTOD:
        BENCH_CU(cuMemcpyDtoD, peer, local, size);
        BENCH_CU(cuStreamSynchronize, NULL);
        break;
    case BENCH_OP_DTOD_R:
        BENCH_CU(cuMemcpyDtoD, local, peer, size);
        BENCH_CU(cuStreamSynchronize, NULL);
        break;
    case BENCH_OP_ASYNC:
        BENCH_CU(cuMemcpyDtoDAsync, peer, local, size, c->stream);
        BENCH_CU(cuStreamSynchronize, c->stream);
        break;
    default:
        bench_copy(c->node, c->ep, op == BENCH_OP_PUT, c->local, size,
                   c->remote, c->rkey);
        break;
    }
}


/*
 * Every operation once, on the buffers the figures time: every page of the
 * local and of the exporter's buffer (through both mappings) is written and
 * read in each direction, and the transport's mapping, streams and events
 * exist before the first timed op
 */
static void bench_warmup(const bench_bw_ctx_t *c, size_t size)
{
    int op;

    for (op = 0; op < BENCH_OP_LAST; ++op) {
        bench_op(c, op, size);
    }
}


/* a size as the figures name it: "64 MiB", "64 KiB" or "8 B" */
static void bench_size_name(size_t size, char *buf, size_t max)
{
    if (size % (1ul << 20) == 0) {
        snprintf(buf, max, "%zu MiB", size >> 20);
    } else if (size % 1024 == 0) {
        snprintf(buf, max, "%zu KiB", size >> 10);
    } else {
        snprintf(buf, max, "%zu B", size);
    }
}


/* BENCH_SIZES into @a sizes (at most @a max); returns how many */
static size_t bench_sizes(size_t *sizes, size_t max)
{
    char *list = strdup(getenv("BENCH_SIZES") ?: "1M,16M,64M"), *tok, *end;
    size_t n   = 0;

    for (tok = strtok(list, ","); (tok != NULL) && (n < max);
         tok = strtok(NULL, ",")) {
        sizes[n] = strtoul(tok, &end, 0);
        sizes[n] <<= (*end == 'K') ? 10 : (*end == 'M') ? 20 : 0;
        BENCH_CHECK((sizes[n] > 0) && (sizes[n] <= BENCH_MAX_SIZE),
                    "BENCH_SIZES: sizes of 1 B to 64M");
        ++n;
    }
    free(list);
    BENCH_CHECK(n > 0, "BENCH_SIZES");
    return n;
}


/*
 * The reference copies are single-process cuMemcpyDtoD between the same
 * pages as the put and the get: the local buffer and the exporter's buffer,
 * which this process maps itself too. Figures then compare the transport's
 * path with the copy alone, not one pair of buffers with another (copies
 * between different buffers differ by 10-30% from run to run on the
 * emulator, with where their pages happen to lie).
 */
static void bench_bandwidth(bench_node_t *node, uct_ep_h ep,
                            const bench_export_t *exp, uct_rkey_t rkey,
                            void *peer_mem, int min_iters)
{
    size_t sizes[16], nsizes = bench_sizes(sizes, 16);
    static const char *op_names[] = {"DtoD", "DtoD reverse", "async", "put",
                                     "get"};
    const int rounds        = bench_rounds();
    const double round_time = bench_round_time();
    double bw[BENCH_OP_LAST][BENCH_MAX_ROUNDS], t[BENCH_OP_LAST], t0;
    double put_dtod[BENCH_MAX_ROUNDS], get_dtod[BENCH_MAX_ROUNDS];
    double put_async[BENCH_MAX_ROUNDS], get_put[BENCH_MAX_ROUNDS];
    double iters[BENCH_MAX_ROUNDS], tmin, dt;
    bench_samples_t samples[BENCH_OP_LAST] = {};
    bench_range_t it_range, b[BENCH_OP_LAST];
    bench_bw_ctx_t c;
    cpu_set_t cpus;
    char name[64], size_name[32];
    size_t i;
    long it;
    int r, k, op, cpu;

    c.node     = node;
    c.ep       = ep;
    c.remote   = exp->addr;
    c.rkey     = rkey;
    c.local    = bench_mem_alloc(BENCH_MAX_SIZE);
    c.peer_mem = peer_mem;
    cpu        = bench_pin_threads(&cpus);
    BENCH_CU(cuStreamCreate, &c.stream, CU_STREAM_NON_BLOCKING);
    bench_warmup(&c, BENCH_MAX_SIZE);

    /* the goal compares with cuMemcpyDtoD; the asynchronous copy on a stream
     * (what the transport does, in one process) is printed for reference */
    printf("bandwidth: medians of the rounds; iters: iterations per round "
           "(min-max); DtoD: to the exporter's pages, as put; DtoD-r: from "
           "them, as get; %s\n", bench_cache_mode());
    bench_print_pin(cpu);
    printf("%-10s %9s %10s %10s %10s %10s %10s %8s %8s %9s\n", "size", "iters",
           "DtoD MB/s", "DtoD-r", "async MB/s", "put MB/s", "get MB/s",
           "put/DtoD", "get/DtoD", "put/async");
    for (i = 0; i < nsizes; ++i) {
        bench_warmup(&c, sizes[i]);
        for (r = 0; r < rounds; ++r) {
            /* interleaved, so all of them see the same machine state; the
             * first op of an iteration turns, so none always follows another */
            memset(t, 0, sizeof(t));
            it = 0;
            do {
                for (k = 0; k < BENCH_OP_LAST; ++k) {
                    op = (k + it) % BENCH_OP_LAST;
                    bench_cache_evict(c.local, sizes[i]);
                    bench_cache_evict(c.peer_mem, sizes[i]);
                    t0 = bench_time_now();
                    bench_op(&c, op, sizes[i]);
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
                bw[op][r] = sizes[i] / bench_samples_median(&samples[op]) /
                            1e6;
            }
            iters[r]     = it;
            put_dtod[r]  = bw[BENCH_OP_PUT][r] / bw[BENCH_OP_DTOD][r];
            get_dtod[r]  = bw[BENCH_OP_GET][r] / bw[BENCH_OP_DTOD_R][r];
            put_async[r] = bw[BENCH_OP_PUT][r] / bw[BENCH_OP_ASYNC][r];
            get_put[r]   = bw[BENCH_OP_GET][r] / bw[BENCH_OP_PUT][r];
        }
        it_range = bench_range(iters, rounds);
        for (op = 0; op < BENCH_OP_LAST; ++op) {
            b[op] = bench_range(bw[op], rounds);
        }
        snprintf(name, sizeof(name), "%.0f-%.0f", it_range.min, it_range.max);
        printf("%-10zu %9s %10.1f %10.1f %10.1f %10.1f %10.1f %8.3f %8.3f "
               "%9.3f\n", sizes[i], name, b[0].med, b[1].med, b[2].med,
               b[3].med, b[4].med, bench_range(put_dtod, rounds).med,
               bench_range(get_dtod, rounds).med,
               bench_range(put_async, rounds).med);
        for (op = 0; op < BENCH_OP_LAST; ++op) {
            printf("  %-12s MB/s over the rounds: min %.1f, max %.1f\n",
                   op_names[op], b[op].min, b[op].max);
        }
        bench_size_name(sizes[i], size_name, sizeof(size_name));
        snprintf(name, sizeof(name), "put/DtoD %s", size_name);
        bench_print_ratio(name, put_dtod, rounds);
        snprintf(name, sizeof(name), "get/DtoD %s", size_name);
        bench_print_ratio(name, get_dtod, rounds);
        snprintf(name, sizeof(name), "put/async %s", size_name);
        bench_print_ratio(name, put_async, rounds);
        snprintf(name, sizeof(name), "get/put %s", size_name);
        bench_print_ratio(name, get_put, rounds);
    }
    for (op = 0; op < BENCH_OP_LAST; ++op) {
        free(samples[op].v);
    }
    uct_cuda_ipc_ns_drv.cuStreamDestroy(c.stream);
    bench_unpin_threads(cpu, &cpus);
}


/* The exporter's message, and its buffer mapped in this process too */
static void *bench_recv_export(int chan, bench_export_t *exp)
{
    char cbuf[CMSG_SPACE(sizeof(int))] = {};
    CUmemGenericAllocationHandle handle;
    struct msghdr mh = {};
    struct cmsghdr *cmsg;
    struct iovec iov;
    void *ptr;
    int fd;

    iov.iov_base      = exp;
    iov.iov_len       = sizeof(*exp);
    mh.msg_iov        = &iov;
    mh.msg_iovlen     = 1;
    mh.msg_control    = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    BENCH_CHECK(recvmsg(chan, &mh, 0) == sizeof(*exp), "exporter message");
    if (bench_mem_legacy()) {
        /* the transport's own open of the handle, in this context, gets
         * the same mapping (cuIpcOpenMemHandle: reference counted) */
        BENCH_CU(cuIpcOpenMemHandle, (CUdeviceptr*)&ptr, exp->ipc,
                 CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        return ptr;
    }
    cmsg = CMSG_FIRSTHDR(&mh);
    BENCH_CHECK((cmsg != NULL) && (cmsg->cmsg_type == SCM_RIGHTS),
                "exporter's fd");
    memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
    BENCH_CU(cuMemImportFromShareableHandle, &handle, (void*)(uintptr_t)fd,
             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    ptr = bench_vmm_map(handle, BENCH_MAX_SIZE);
    BENCH_CU(cuMemRelease, handle); /* the mapping keeps it */
    return ptr;
}


static void bench_latency(bench_node_t *node, uct_ep_h ep,
                          const bench_export_t *exp, uct_rkey_t rkey,
                          int min_iters)
{
    const int rounds        = bench_rounds();
    const double round_time = bench_round_time();
    void *local = bench_mem_alloc(1ul << 21);
    void *other = bench_mem_alloc(1ul << 21);
    double t, ours, ref, ratio[BENCH_MAX_ROUNDS], us[BENCH_MAX_ROUNDS];
    double ref_us[BENCH_MAX_ROUNDS], iters[BENCH_MAX_ROUNDS], dt;
    bench_samples_t s_ours = {}, s_ref = {};
    bench_range_t it_range;
    CUstream stream;
    CUevent event;
    long it;
    int r;

    BENCH_CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    BENCH_CU(cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);
    /* warm up: both ops, both buffers written and read */
    for (it = 0; it < 100; ++it) {
        bench_copy(node, ep, it % 2, local, 8, exp->addr, rkey);
        BENCH_CU(cuMemcpyDtoDAsync, (CUdeviceptr)other, (CUdeviceptr)local, 8,
                 stream);
        BENCH_CU(cuMemcpyDtoDAsync, (CUdeviceptr)local, (CUdeviceptr)other, 8,
                 stream);
        BENCH_CU(cuStreamSynchronize, stream);
    }

    for (r = 0; r < rounds; ++r) {
        ours = ref = 0;
        it   = 0;
        do {
            t = bench_time_now();
            BENCH_CU(cuMemcpyDtoDAsync, (CUdeviceptr)other,
                     (CUdeviceptr)local, 8, stream);
            BENCH_CU(cuEventRecord, event, stream);
            while (uct_cuda_ipc_ns_drv.cuEventQuery(event) ==
                   CUDA_ERROR_NOT_READY) {
            }
            dt   = bench_time_now() - t;
            ref += dt;
            bench_samples_add(&s_ref, dt);

            t = bench_time_now();
            bench_copy(node, ep, 1, local, 8, exp->addr, rkey);
            dt    = bench_time_now() - t;
            ours += dt;
            bench_samples_add(&s_ours, dt);
            ++it;
        } while ((it < min_iters) || (ours < round_time) || (ref < round_time));
        us[r]     = bench_samples_median(&s_ours) * 1e6;
        ref_us[r] = bench_samples_median(&s_ref) * 1e6;
        ratio[r]  = us[r] / ref_us[r];
        iters[r]  = it;
    }
    free(s_ours.v);
    free(s_ref.v);
    it_range = bench_range(iters, rounds);
    printf("\n8-byte put latency: %.2f us; async copy + event in one process: "
           "%.2f us (medians of %d rounds of %.0f-%.0f iterations)\n",
           bench_range(us, rounds).med, bench_range(ref_us, rounds).med,
           rounds, it_range.min, it_range.max);
    bench_print_ratio("8 B put latency / async copy + event", ratio, rounds);
    uct_cuda_ipc_ns_drv.cuEventDestroy(event);
    uct_cuda_ipc_ns_drv.cuStreamDestroy(stream);
}


/* @a size bytes of a pattern of @a seed at @a buf (host memory) */
static void bench_pattern(uint8_t *buf, size_t size, unsigned seed)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        buf[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
    }
}


/*
 * -v: a pattern put to the exporter's buffer and got back from it at
 * several sizes, its bytes checked through this process's own mapping of
 * that buffer (@a peer_mem): the transport moved them, not only completed
 */
static void bench_verify(bench_node_t *node, uct_ep_h ep,
                         const bench_export_t *exp, uct_rkey_t rkey,
                         void *peer_mem)
{
    static const size_t sizes[] = {8, 64ul << 10, (4ul << 20) + 8};
    const size_t max = sizes[2];
    uint8_t *want    = malloc(max), *got = malloc(max);
    void *local      = bench_mem_alloc(8ul << 20);
    unsigned seed    = 1;
    size_t i;

    BENCH_CHECK((want != NULL) && (got != NULL), "malloc");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i, seed += 2) {
        bench_pattern(want, sizes[i], seed);
        BENCH_CU(cuMemcpyHtoD, (CUdeviceptr)local, want, sizes[i]);
        BENCH_CU(cuMemsetD8, (CUdeviceptr)peer_mem, 0, sizes[i]);
        BENCH_CU(cuCtxSynchronize);
        bench_copy(node, ep, 1, local, sizes[i], exp->addr, rkey);
        BENCH_CU(cuMemcpyDtoH, got, (CUdeviceptr)peer_mem, sizes[i]);
        BENCH_CHECK(!memcmp(want, got, sizes[i]), "the bytes of a put");

        bench_pattern(want, sizes[i], seed + 1);
        BENCH_CU(cuMemcpyHtoD, (CUdeviceptr)peer_mem, want, sizes[i]);
        BENCH_CU(cuMemsetD8, (CUdeviceptr)local, 0, sizes[i]);
        BENCH_CU(cuCtxSynchronize);
        bench_copy(node, ep, 0, local, sizes[i], exp->addr, rkey);
        BENCH_CU(cuMemcpyDtoH, got, (CUdeviceptr)local, sizes[i]);
        BENCH_CHECK(!memcmp(want, got, sizes[i]), "the bytes of a get");
    }
    printf("bytes checked: put and get of 8 B, 64 KiB, 4 MiB + 8 through %s, "
           "%s memory\n", getenv("BENCH_TL") ?: "cu_ipc_ns",
           bench_mem_legacy() ? "legacy" : "VMM");
    free(want);
    free(got);
}


/* a completion counted down by the module */
static void bench_icount_done(uct_completion_t *comp)
{
}


/*
 * One 8-byte put (@a is_put) or get, counted as two parts: the post, and
 * the progress that completes it. The copy itself is waited for between
 * them, outside the count (cuCtxSynchronize), so one progress call finds
 * it done whatever time it took: the count is the same from run to run.
 */
static void bench_icount_op(bench_node_t *node, uct_ep_h ep, int is_put,
                            void *local, uint64_t remote, uct_rkey_t rkey)
{
    uct_completion_t comp = {bench_icount_done, 1, UCS_OK};
    uct_iov_t iov         = {local, 8, NULL, 0, 1};
    ucs_status_t status;
    unsigned calls = 0;

    bench_callgrind_toggle();
    status = is_put ? uct_ep_put_zcopy(ep, &iov, 1, remote, rkey, &comp) :
                      uct_ep_get_zcopy(ep, &iov, 1, remote, rkey, &comp);
    bench_callgrind_toggle();
    BENCH_CHECK(!UCS_STATUS_IS_ERR(status), "put/get zcopy");
    BENCH_CU(cuCtxSynchronize);
    bench_callgrind_toggle();
    while ((status == UCS_INPROGRESS) && (comp.count > 0)) {
        uct_worker_progress(node->worker);
        ++calls;
    }
    bench_callgrind_toggle();
    BENCH_CHECK(calls <= 1, "completion by the first progress call");
    BENCH_CHECK(comp.status == UCS_OK, "copy completion");
}


/*
 * -c: the phases whose instructions contrib/icount.sh counts, run under
 * callgrind with collection off at start: each phase collects only the
 * module's calls and is dumped under its name ("icount-phase NAME REPS" on
 * stdout gives the count to divide by). A first use maps the exporter's
 * memory (the fd import, the driver's import and mapping); the hits find
 * it in the mapping cache.
 */
static void bench_icount(bench_node_t *node, uct_ep_h ep,
                         const bench_export_t *exp, uct_rkey_t rkey,
                         unsigned reps)
{
    void *local = bench_mem_alloc(1ul << 21);
    uct_rkey_bundle_t bundle;
    unsigned i;

    /* system calls are counted also while collection is off: from here */
    bench_callgrind_zero();
    bench_icount_op(node, ep, 1, local, exp->addr, rkey);
    bench_callgrind_dump("first_use");
    printf("icount-phase first_use 1\n");

    /* the first hits warm what they touch (UCX's mpools, the streams) */
    for (i = 0; i < reps; ++i) {
        bench_icount_op(node, ep, 1, local, exp->addr, rkey);
        bench_icount_op(node, ep, 0, local, exp->addr, rkey);
    }
    bench_callgrind_zero();
    for (i = 0; i < reps; ++i) {
        bench_icount_op(node, ep, 1, local, exp->addr, rkey);
    }
    bench_callgrind_dump("put_hit");
    printf("icount-phase put_hit %u\n", reps);
    for (i = 0; i < reps; ++i) {
        bench_icount_op(node, ep, 0, local, exp->addr, rkey);
    }
    bench_callgrind_dump("get_hit");
    printf("icount-phase get_hit %u\n", reps);

    for (i = 0; i < reps; ++i) {
        bench_callgrind_toggle();
        BENCH_CHECK(uct_rkey_unpack(node->component, exp->rkey, &bundle) ==
                    UCS_OK, "uct_rkey_unpack");
        uct_rkey_release(node->component, &bundle);
        bench_callgrind_toggle();
    }
    bench_callgrind_dump("rkey_unpack");
    printf("icount-phase rkey_unpack %u\n", reps);
    fflush(stdout);
}


int main(int argc, char **argv)
{
    int iters = 5, icount = 0, verify = 0, chan, opt;
    uct_ep_params_t ep_params = {};
    uct_rkey_bundle_t rkey;
    bench_export_t exp;
    bench_node_t node;
    void *peer_mem;
    uct_ep_h ep;
    pid_t pid;

    if ((argc == 3) && !strcmp(argv[1], "--exporter")) {
        return bench_exporter(atoi(argv[2]));
    }
    while ((opt = getopt(argc, argv, "cvn:")) != -1) {
        if (opt == 'n') {
            iters = atoi(optarg);
        } else if (opt == 'c') {
            icount = 1;
        } else if (opt == 'v') {
            verify = 1;
        } else {
            fprintf(stderr, "usage: %s [-c|-v] [-n iterations]\n", argv[0]);
            return 2;
        }
    }

    pid = bench_start_exporter(argv[0], &chan);

    bench_cuda_init();
    bench_node_open(&node);
    peer_mem = bench_recv_export(chan, &exp);
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = node.iface;
    ep_params.dev_addr   = (uct_device_addr_t*)exp.dev_addr;
    ep_params.iface_addr = (uct_iface_addr_t*)exp.iface_addr;
    BENCH_CHECK(uct_ep_create(&ep_params, &ep) == UCS_OK, "uct_ep_create");
    BENCH_CHECK(uct_rkey_unpack(node.component, exp.rkey, &rkey) == UCS_OK,
                "uct_rkey_unpack");

    printf("cuda_ipc_ns data path through %s, %s memory, driver %s\n",
           getenv("BENCH_TL") ?: "cu_ipc_ns",
           bench_mem_legacy() ? "legacy" : "VMM",
           getenv("UCX_CUDA_IPC_NS_DRIVER") ?: "libcuda.so.1");
    if (verify) {
        bench_verify(&node, ep, &exp, rkey.rkey, peer_mem);
    } else if (icount) {
        bench_icount(&node, ep, &exp, rkey.rkey, iters);
    } else {
        bench_print_settings("bench_datapath");
        printf("\n");
        bench_bandwidth(&node, ep, &exp, rkey.rkey, peer_mem, iters);
        bench_latency(&node, ep, &exp, rkey.rkey, iters * 200);
    }

    uct_rkey_release(node.component, &rkey);
    uct_ep_destroy(ep);
    bench_node_close(&node);
    close(chan);
    waitpid(pid, NULL, 0);
    return 0;
}
