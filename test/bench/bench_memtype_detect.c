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
 * Usage: bench_memtype_detect [-n calls] [driver]
 *   driver: the CUDA driver library (default: UCX_CUDA_IPC_NS_DRIVER, else
 *   libcuda.so.1); the module must be linked or preloaded.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_driver.h"

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


/* ns per ucp_memory_detect() of @a ptr; *type_p gets the answer */
static double bench_detect(ucp_context_h context, const void *ptr, long calls,
                           ucs_memory_type_t *type_p)
{
    ucp_memory_info_t info;
    double start;
    long i;

    ucp_memory_detect(context, ptr, 64, &info); /* warm up */
    start = bench_now_nsec();
    for (i = 0; i < calls; ++i) {
        ucp_memory_detect(context, ptr, 64, &info);
    }
    *type_p = info.type;
    return (bench_now_nsec() - start) / calls;
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


static void bench_print(const char *what, double ns, ucs_memory_type_t type)
{
    printf("  %-46s %8.1f ns/call  -> %s\n", what, ns,
           ucs_memory_type_names[type]);
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
    double host_default, host_cache, ns;
    void *host, *ucp_cuda;
    ucs_memory_type_t type;
    ucp_context_h context;
    ucp_config_t *config;
    CUdeviceptr own_cuda;
    ucp_mem_h memh;
    CUcontext ctx;
    CUdevice dev;
    long calls = 1000000;
    ucs_memory_info_t mem_info;
    int c;

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

    printf("ucp_memory_detect() per call, %ld calls each, driver %s\n", calls,
           driver);
    printf("default (UCX_MEMTYPE_CACHE unset: cache %s, driver asked):\n",
           (ucs_global_opts.enable_memtype_cache == UCS_NO) ? "off" : "ON?");
    host_default = bench_detect(context, host, calls, &type);
    bench_print("host pointer (malloc)", host_default, type);
    ns = bench_detect(context, (void*)own_cuda, calls, &type);
    bench_print("CUDA pointer (application cuMemAlloc)", ns, type);

    /* the cache on, as UCX_MEMTYPE_CACHE=y would keep it: created before
     * the copy MD allocates, so that the allocation is recorded */
    ucs_global_opts.enable_memtype_cache = UCS_YES;
    ucs_memtype_cache_lookup(host, 1, &mem_info);
    if ((ucs_memtype_cache_global_instance == NULL) ||
        (bench_ucp_alloc(context, 1 << 20, &memh, &ucp_cuda) != UCS_OK)) {
        fprintf(stderr, "memtype cache or ucp_mem_map failed\n");
        return 1;
    }
    printf("memtype cache on (UCX_MEMTYPE_CACHE=y):\n");
    host_cache = bench_detect(context, host, calls, &type);
    bench_print("host pointer (malloc): cache miss", host_cache, type);
    ns = bench_detect(context, ucp_cuda, calls, &type);
    bench_print("CUDA pointer (ucp_mem_map ALLOCATE): hit", ns, type);
    ns = bench_detect(context, (void*)own_cuda, calls, &type);
    bench_print("CUDA pointer (application cuMemAlloc): miss", ns, type);

    printf("reference:\n");
    printf("  %-46s %8.1f ns/call\n", "cuPointerGetAttributes (host pointer)",
           bench_driver_call(host, calls));
    printf("  %-46s %8.1f ns/call\n", "cuPointerGetAttributes (CUDA pointer)",
           bench_driver_call((void*)own_cuda, calls));
    printf("ratio host pointer default/cache: %.1f\n", host_default / host_cache);

    ucp_mem_unmap(context, memh);
    ucp_cleanup(context);
    free(host);
    uct_cuda_ipc_ns_drv.cuMemFree(own_cuda);
    return 0;
}
