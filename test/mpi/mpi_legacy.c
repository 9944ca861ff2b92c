/*
 * Open MPI over UCX with CUDA memory from cuMemAlloc (legacy IPC), the way an
 * application does it: MPI_Send/MPI_Recv of a device buffer, then
 * MPI_Win_create on a device buffer and MPI_Put + MPI_Win_fence. Bytes are
 * checked on the receiving rank. Two ranks.
 *
 * The CUDA driver is loaded with dlopen: UCX_CUDA_IPC_NS_DRIVER (the
 * emulator, test/cudasim) or libcuda.so.1. Usage: mpi_legacy [SIZE]
 * (default 64 MiB + 8 KiB + 8 B). Prints "mpi_legacy: rank N PASS".
 */
#include <mpi.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static struct {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGet)(CUdevice*, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
    CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
} cu;

static int rank;

#define CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "mpi_legacy: rank %d: ", rank); \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n"); \
            MPI_Abort(MPI_COMM_WORLD, 1); \
        } \
    } while (0)

#define CU(_call) \
    do { \
        CUresult _res = cu._call; \
        CHECK(_res == 0, "%s failed: %d", #_call, _res); \
    } while (0)

static void *sym(void *lib, const char *name)
{
    void *func = dlsym(lib, name);
    CHECK(func != NULL, "%s: %s", name, dlerror());
    return func;
}

static void cuda_setup(void)
{
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
    CUcontext ctx;
    CUdevice dev;
    void *lib;

    lib = dlopen(((path != NULL) && (*path != '\0')) ? path : "libcuda.so.1",
                 RTLD_NOW | RTLD_GLOBAL);
    CHECK(lib != NULL, "dlopen: %s", dlerror());
    *(void**)&cu.cuInit                   = sym(lib, "cuInit");
    *(void**)&cu.cuDeviceGet              = sym(lib, "cuDeviceGet");
    *(void**)&cu.cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
    *(void**)&cu.cuCtxSetCurrent          = sym(lib, "cuCtxSetCurrent");
    *(void**)&cu.cuMemAlloc               = sym(lib, "cuMemAlloc_v2");
    *(void**)&cu.cuMemFree                = sym(lib, "cuMemFree_v2");
    *(void**)&cu.cuMemcpyHtoD             = sym(lib, "cuMemcpyHtoD_v2");
    *(void**)&cu.cuMemcpyDtoH             = sym(lib, "cuMemcpyDtoH_v2");
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
}

static uint8_t byte_at(unsigned seed, size_t i)
{
    return (uint8_t)(seed * 131u + i * 7u + (i >> 12));
}

static void fill(CUdeviceptr dev, unsigned seed, size_t size, uint8_t *host)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        host[i] = byte_at(seed, i);
    }
    CU(cuMemcpyHtoD(dev, host, size));
}

static void check(CUdeviceptr dev, unsigned seed, size_t size, uint8_t *host,
                  const char *what)
{
    size_t i;

    memset(host, 0, size);
    CU(cuMemcpyDtoH(host, dev, size));
    for (i = 0; i < size; ++i) {
        CHECK(host[i] == byte_at(seed, i), "%s: byte %zu of %zu is 0x%02x, "
              "not 0x%02x", what, i, size, host[i], byte_at(seed, i));
    }
}

int main(int argc, char **argv)
{
    size_t size = (argc > 1) ? strtoull(argv[1], NULL, 0) :
                  (64ul << 20) + 8192 + 8;
    CUdeviceptr buf, win_buf;
    uint8_t *host;
    int nranks;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK(nranks == 2, "needs 2 ranks, not %d", nranks);

    cuda_setup();
    host = malloc(size);
    CHECK(host != NULL, "malloc %zu", size);
    CU(cuMemAlloc(&buf, size));
    CU(cuMemAlloc(&win_buf, size));

    /* point to point, both directions: 8 bytes (eager) and size */
    for (int round = 0; round < 2; ++round) {
        size_t len = (round == 0) ? 8 : size;
        for (int from = 0; from < 2; ++from) {
            unsigned seed = 10 + round * 2 + from;
            if (rank == from) {
                fill(buf, seed, len, host);
                MPI_Send((void*)(uintptr_t)buf, (int)len, MPI_BYTE, 1 - from,
                         seed, MPI_COMM_WORLD);
            } else {
                CU(cuMemcpyHtoD(buf, memset(host, 0, len), len));
                MPI_Recv((void*)(uintptr_t)buf, (int)len, MPI_BYTE, from, seed,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                check(buf, seed, len, host, "MPI_Recv");
            }
        }
    }

    /* one-sided: rank 0 puts into rank 1's window, rank 1 into rank 0's */
    CU(cuMemcpyHtoD(win_buf, memset(host, 0, size), size));
    MPI_Win_create((void*)(uintptr_t)win_buf, size, 1, MPI_INFO_NULL,
                   MPI_COMM_WORLD, &win);
    fill(buf, 20 + rank, size, host);
    MPI_Win_fence(0, win);
    MPI_Put((void*)(uintptr_t)buf, (int)size, MPI_BYTE, 1 - rank, 0, (int)size,
            MPI_BYTE, win);
    MPI_Win_fence(0, win);
    check(win_buf, 20 + (1 - rank), size, host, "MPI_Put");
    MPI_Win_free(&win);

    CU(cuMemFree(win_buf));
    CU(cuMemFree(buf));
    free(host);
    printf("mpi_legacy: rank %d PASS (%zu bytes)\n", rank, size);
    MPI_Finalize();
    return 0;
}
