/*
 * cuda_cpy_ns: cost of UCP's memory-type detection per call, in one run.
 *
 * Calls ucp_memory_detect(), the entry UCP uses on every send and receive
 * whose memory type the application does not give, on a host pointer and on
 * CUDA pointers, and prints nanoseconds per call:
 *  - default: UCX_MEMTYPE_CACHE unset, the copy MD turned the memtype cache
 *    off, every call asks the driver through the copy MD's mem_query;
 *  - cache: the memtype cache on (as with UCX_MEMTYPE_CACHE=y), holding what
 *    the copy MD allocated; a host pointer is a cache miss;
 * and, for reference, one cuPointerGetAttributes() call. See docs/ucp.md.
 *
 * Each figure: rounds (alternating the two modes) of at least -n calls
 * (default 200,000) and BENCH_MIN_TIME / rounds seconds, the median batch of
 * 1,000 calls per round, median and range of the rounds (bench_stats.h).
 *
 * Usage: bench_memtype_detect [-n calls] [driver]
 *   driver: the CUDA driver library (default: UCX_CUDA_IPC_NS_DRIVER, else
 *   libcuda.so.1); the module must be linked or preloaded.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_driver.h"
#include "bench_stats.h"

#include <ucp/api/ucp.h>
#include <ucp/core/ucp_context.h>
#include <ucs/config/global_opts.h>
#include <ucs/memory/memtype_cache.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static double bench_now_nsec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}


/* ns per ucp_memory_detect() of @a ptr: the median batch of 1,000 calls,
 * at least @a calls and BENCH_MIN_TIME / rounds seconds, after a warm-up
 * batch; *type_p gets the answer */
static double bench_detect(ucp_context_h context, const void *ptr, long calls,
                           ucs_memory_type_t *type_p)
{
    static bench_samples_t batches;
    const double min_time = bench_round_time() * 1e9;
    ucp_memory_info_t info;
    double start, t0;
    long i, done = 0;

    for (i = 0; i < 1000; ++i) {
        ucp_memory_detect(context, ptr, 64, &info); /* warm up */
    }
    start = bench_now_nsec();
    do {
        t0 = bench_now_nsec();
        for (i = 0; i < 1000; ++i) {
            ucp_memory_detect(context, ptr, 64, &info);
        }
        bench_samples_add(&batches, bench_now_nsec() - t0);
        done += 1000;
    } while ((done < calls) || (bench_now_nsec() - start < min_time));
    *type_p = info.type;
    return bench_samples_median(&batches) / 1000;
}


/* The memtype cache off (as by default) or on again: UCX looks the global
 * instance up on every detection and makes none while the option is off */
static void bench_memtype_cache_set(int on)
{
    static ucs_memtype_cache_t *saved;

    if (!on && (ucs_memtype_cache_global_instance != NULL)) {
        saved                                = ucs_memtype_cache_global_instance;
        ucs_memtype_cache_global_instance    = NULL;
        ucs_global_opts.enable_memtype_cache = UCS_NO;
    } else if (on && (saved != NULL)) {
        ucs_global_opts.enable_memtype_cache = UCS_YES;
        ucs_memtype_cache_global_instance    = saved;
        saved                                = NULL;
    }
}


/* ns per cuPointerGetAttributes() with the attributes the copy MD asks */
static double bench_driver_call(const void *ptr, long calls)
{
    CUpointer_attribute names[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE
    };
    unsigned memory_type;
    int device;
    CUdeviceptr base;
    size_t size;
    void *values[] = {&memory_type, &device, &base, &size};
    double start;
    long i;

    start = bench_now_nsec();
    for (i = 0; i < calls; ++i) {
        uct_cuda_ipc_ns_drv.cuPointerGetAttributes(4, names, values,
                                                 (CUdeviceptr)ptr);
    }
    return (bench_now_nsec() - start) / calls;
}


static void bench_print(const char *what, const double *ns, int rounds,
                        ucs_memory_type_t type)
{
    bench_range_t r = bench_range(ns, rounds);

    printf("  %-46s %8.1f ns/call (rounds %.1f-%.1f)  -> %s\n", what, r.med,
           r.min, r.max, ucs_memory_type_names[type]);
}


static ucs_status_t bench_ucp_alloc(ucp_context_h context, size_t length,
                                    ucp_mem_h *memh_p, void **address_p)
{
    ucp_mem_map_params_t params = {0};
    ucp_mem_attr_t attr;
    ucs_status_t status;

    params.field_mask  = UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                         UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                         UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.length      = length;
    params.flags       = UCP_MEM_MAP_ALLOCATE;
    params.memory_type = UCS_MEMORY_TYPE_CUDA;
    status = ucp_mem_map(context, &params, memh_p);
    if (status != UCS_OK) {
        return status;
    }

    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    status          = ucp_mem_query(*memh_p, &attr);
    *address_p      = attr.address;
    return status;
}


int main(int argc, char **argv)
{
    const char *driver = getenv("UCX_CUDA_IPC_NS_DRIVER");
    ucp_params_t params = {0};
    const int rounds = bench_rounds();
    double fig[5][BENCH_MAX_ROUNDS], ratio[BENCH_MAX_ROUNDS];
    ucs_memory_type_t type[5];
    void *host, *ucp_cuda;
    ucp_context_h context;
    ucp_config_t *config;
    CUdeviceptr own_cuda;
    ucp_mem_h memh;
    CUcontext ctx;
    CUdevice dev;
    long calls = 200000;
    ucs_memory_info_t mem_info;
    int c, r;

    while ((c = getopt(argc, argv, "n:")) != -1) {
        if (c == 'n') {
            calls = atol(optarg);
        } else {
            fprintf(stderr, "usage: %s [-n calls] [driver]\n", argv[0]);
            return 1;
        }
    }
    if (optind < argc) {
        driver = argv[optind];
        setenv("UCX_CUDA_IPC_NS_DRIVER", driver, 1);
    }
    if (getenv("UCX_MEMTYPE_CACHE") != NULL) {
        fprintf(stderr, "unset UCX_MEMTYPE_CACHE: the benchmark sets both "
                "modes itself\n");
        return 1;
    }
    if ((driver == NULL) || (uct_cuda_ipc_ns_driver_load(driver) != UCS_OK) ||
        (uct_cuda_ipc_ns_drv.cuDeviceGet(&dev, 0) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuMemAlloc(&own_cuda, 1 << 20) != CUDA_SUCCESS)) {
        fprintf(stderr, "no CUDA driver or device (%s)\n",
                driver ? driver : "set UCX_CUDA_IPC_NS_DRIVER");
        return 1;
    }

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    if ((ucp_config_read(NULL, NULL, &config) != UCS_OK) ||
        (ucp_init(&params, config, &context) != UCS_OK)) {
        fprintf(stderr, "ucp_init failed\n");
        return 1;
    }
    ucp_config_release(config);
    if (context->num_mem_type_detect_mds == 0) {
        fprintf(stderr, "no memory-type detecting MD: is the module loaded "
                "and cu_cpy_ns in UCX_TLS?\n");
        return 1;
    }
    host = malloc(1 << 20);
    memset(host, 0, 1 << 20);
    printf("ucp_memory_detect() per call, driver %s\n", driver);
    bench_print_settings("bench_memtype_detect");
    printf("per round: the median batch of 1,000 calls, at least %ld calls\n",
           calls);
    if (ucs_global_opts.enable_memtype_cache != UCS_NO) {
        fprintf(stderr, "the memtype cache is on by default: is the module "
                "loaded?\n");
        return 1;
    }

    /* the cache on, as UCX_MEMTYPE_CACHE=y would keep it: created before
     * the copy MD allocates, so that the allocation is recorded */
    ucs_global_opts.enable_memtype_cache = UCS_YES;
    ucs_memtype_cache_lookup(host, 1, &mem_info);
    if ((ucs_memtype_cache_global_instance == NULL) ||
        (bench_ucp_alloc(context, 1 << 20, &memh, &ucp_cuda) != UCS_OK)) {
        fprintf(stderr, "memtype cache or ucp_mem_map failed\n");
        return 1;
    }

    /* rounds alternate the two modes, so both see the same machine state */
    for (r = 0; r < rounds; ++r) {
        bench_memtype_cache_set(0);
        fig[0][r] = bench_detect(context, host, calls, &type[0]);
        fig[1][r] = bench_detect(context, (void*)own_cuda, calls, &type[1]);
        bench_memtype_cache_set(1);
        fig[2][r] = bench_detect(context, host, calls, &type[2]);
        fig[3][r] = bench_detect(context, ucp_cuda, calls, &type[3]);
        fig[4][r] = bench_detect(context, (void*)own_cuda, calls, &type[4]);
        ratio[r]  = fig[0][r] / fig[2][r];
    }
    printf("default (UCX_MEMTYPE_CACHE unset: cache off, driver asked):\n");
    bench_print("host pointer (malloc)", fig[0], rounds, type[0]);
    bench_print("CUDA pointer (application cuMemAlloc)", fig[1], rounds,
                type[1]);
    printf("memtype cache on (UCX_MEMTYPE_CACHE=y):\n");
    bench_print("host pointer (malloc): cache miss", fig[2], rounds, type[2]);
    bench_print("CUDA pointer (ucp_mem_map ALLOCATE): hit", fig[3], rounds,
                type[3]);
    bench_print("CUDA pointer (application cuMemAlloc): miss", fig[4], rounds,
                type[4]);

    printf("reference:\n");
    printf("  %-46s %8.1f ns/call\n", "cuPointerGetAttributes (host pointer)",
           bench_driver_call(host, calls));
    printf("  %-46s %8.1f ns/call\n", "cuPointerGetAttributes (CUDA pointer)",
           bench_driver_call((void*)own_cuda, calls));
    bench_print_ratio("detection of a host pointer default/cache", ratio,
                      rounds);

    ucp_mem_unmap(context, memh);
    ucp_cleanup(context);
    free(host);
    uct_cuda_ipc_ns_drv.cuMemFree(own_cuda);
    return 0;
}
