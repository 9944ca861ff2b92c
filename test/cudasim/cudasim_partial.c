/*
 * libcudasim_partial.so: a CUDA driver that lacks some entry points, for
 * testing how the module treats a driver without an optional (or required)
 * entry.
 *
 * It exports cuGetProcAddress only and forwards it to another driver, loaded
 * privately (RTLD_LOCAL, so dlsym() on this library finds no other entry):
 *
 *   CUDASIM_PARTIAL_DRIVER  the driver to forward to (default: libcudasim.so
 *                           in this library's directory)
 *   CUDASIM_PARTIAL_HIDE    comma-separated base names answered "not found"
 *                           (default: cuMemsetD8Async)
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDASIM_PARTIAL_API  __attribute__((visibility("default")))

typedef __typeof__(cuGetProcAddress) cudasim_partial_get_proc_t;

static pthread_once_t cudasim_partial_once = PTHREAD_ONCE_INIT;
static cudasim_partial_get_proc_t *cudasim_partial_target;


static void cudasim_partial_load(void)
{
    const char *path = getenv("CUDASIM_PARTIAL_DRIVER");
    char buf[PATH_MAX], *slash;
    Dl_info info;
    void *dl;

    if ((path == NULL) || (path[0] == '\0')) {
        if (!dladdr((void*)cudasim_partial_load, &info) ||
            (strlen(info.dli_fname) >= sizeof(buf))) {
            return;
        }
        strcpy(buf, info.dli_fname);
        slash = strrchr(buf, '/');
        snprintf(slash ? slash + 1 : buf,
                 sizeof(buf) - (slash ? (slash + 1 - buf) : 0),
                 "libcudasim.so");
        path = buf;
    }

    dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        fprintf(stderr, "cudasim_partial: cannot load '%s': %s\n", path,
                dlerror());
        return;
    }
    cudasim_partial_target = (cudasim_partial_get_proc_t*)
            dlsym(dl, "cuGetProcAddress_v2");
}


/* @return nonzero when @a symbol is in the comma-separated hide list */
static int cudasim_partial_hidden(const char *symbol)
{
    const char *list = getenv("CUDASIM_PARTIAL_HIDE");
    size_t len       = strlen(symbol);
    const char *p;

    if (list == NULL) {
        list = "cuMemsetD8Async";
    }
    for (p = list; (p = strstr(p, symbol)) != NULL; p += len) {
        if (((p == list) || (p[-1] == ',')) &&
            ((p[len] == '\0') || (p[len] == ','))) {
            return 1;
        }
    }
    return 0;
}


CUDASIM_PARTIAL_API CUresult CUDAAPI
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                 cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    pthread_once(&cudasim_partial_once, cudasim_partial_load);
    if (cudasim_partial_target == NULL) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }

    if ((symbol != NULL) && (pfn != NULL) && cudasim_partial_hidden(symbol)) {
        *pfn = NULL;
        if (symbolStatus != NULL) {
            *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        }
        return CUDA_ERROR_NOT_FOUND;
    }
    return cudasim_partial_target(symbol, pfn, cudaVersion, flags,
                                  symbolStatus);
}
