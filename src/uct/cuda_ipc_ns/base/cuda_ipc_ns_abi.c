/*
 * cuda_ipc_ns: the ABI guard (see cuda_ipc_ns_abi.h and
 * docs/ucx-versions.md, "The ABI guard").
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#ifndef _GNU_SOURCE
#  define _GNU_SOURCE /* dladdr, dl_iterate_phdr, RTLD_NOLOAD */
#endif

#include "cuda_ipc_ns_abi.h"

#include <ucs/datastruct/arbiter.h>
#include <ucs/debug/assert.h>
#include <uct/api/version.h>

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


const uct_cuda_ipc_ns_abi_t uct_cuda_ipc_ns_abi_built = {
    .version_known = 1,
    .major         = UCT_VERNO_MAJOR,
    .minor         = UCT_VERNO_MINOR,
    .patch         = UCT_VERNO_PATCH,
    .assertions    = UCS_ENABLE_ASSERT,
#ifdef ENABLE_STATS
    .statistics    = 1,
#else
    .statistics    = 0,
#endif
};


/* At most this many libucp in one process are looked at */
#define UCT_CUDA_IPC_NS_ABI_MAX_UCP 4

typedef struct {
    unsigned count;
    char     path[UCT_CUDA_IPC_NS_ABI_MAX_UCP][256];
} uct_cuda_ipc_ns_abi_ucp_list_t;

typedef void (*uct_cuda_ipc_ns_ucp_get_version_t)(unsigned *major,
                                                  unsigned *minor,
                                                  unsigned *patch);


/* libucp.so.0, libucp-nixl.so.0 (soname suffix), libucp-1a2b3c4d.so.0.0.0
 * (auditwheel) */
static int uct_cuda_ipc_ns_abi_is_libucp(const char *path)
{
    const char *base = strrchr(path, '/');

    base = (base == NULL) ? path : base + 1;
    return (strncmp(base, "libucp", 6) == 0) &&
           ((base[6] == '.') || (base[6] == '-'));
}


static int uct_cuda_ipc_ns_abi_collect_ucp(struct dl_phdr_info *info,
                                           size_t size, void *arg)
{
    uct_cuda_ipc_ns_abi_ucp_list_t *list = arg;

    /* dlopen() is not allowed here (the loader's lock is held): only names */
    if ((info->dlpi_name != NULL) &&
        uct_cuda_ipc_ns_abi_is_libucp(info->dlpi_name) &&
        (list->count < UCT_CUDA_IPC_NS_ABI_MAX_UCP) &&
        (strlen(info->dlpi_name) < sizeof(list->path[0]))) {
        strcpy(list->path[list->count++], info->dlpi_name);
    }
    return 0;
}


/* Base address of the object that defines addr, NULL if none */
static void *uct_cuda_ipc_ns_abi_object_of(const void *addr, const char **name)
{
    Dl_info info;

    if ((addr == NULL) || (dladdr(addr, &info) == 0)) {
        return NULL;
    }
    if (name != NULL) {
        *name = info.dli_fname;
    }
    return info.dli_fbase;
}


/* Version from the libucp that runs on the libucs at ucs_base; other_ucx
 * when a libucp runs on another libucs */
static void uct_cuda_ipc_ns_abi_probe_version(const void *ucs_base,
                                              uct_cuda_ipc_ns_abi_t *loaded)
{
    uct_cuda_ipc_ns_abi_ucp_list_t list = {0};
    uct_cuda_ipc_ns_ucp_get_version_t get_version;
    unsigned i;
    void *dl;

    dl_iterate_phdr(uct_cuda_ipc_ns_abi_collect_ucp, &list);
    for (i = 0; (i < list.count) && !loaded->version_known; ++i) {
        dl = dlopen(list.path[i], RTLD_LAZY | RTLD_NOLOAD);
        if (dl == NULL) {
            continue;
        }

        /* dlsym on a handle searches the object and its dependencies: the
         * libucs that libucp was linked to */
        if (uct_cuda_ipc_ns_abi_object_of(dlsym(dl, "ucs_status_string"),
                                          NULL) == ucs_base) {
            get_version = (uct_cuda_ipc_ns_ucp_get_version_t)
                          dlsym(dl, "ucp_get_version");
            if (get_version != NULL) {
                get_version(&loaded->major, &loaded->minor, &loaded->patch);
                loaded->version_known = 1;
                loaded->other_ucx     = 0;
                snprintf(loaded->libucp, sizeof(loaded->libucp), "%s",
                         list.path[i]);
            }
        } else if (!loaded->version_known) {
            loaded->other_ucx = 1;
            snprintf(loaded->libucp, sizeof(loaded->libucp), "%s",
                     list.path[i]);
        }
        dlclose(dl);
    }
}


/* ucs_arbiter_group_init() sets the tail pointer, and with assertions the
 * guard that follows it: whether it wrote past the pointer tells how the
 * libucs was configured, without relying on the build's layout */
static int uct_cuda_ipc_ns_abi_probe_assertions(void)
{
    union {
        ucs_arbiter_group_t group;
        uint8_t             bytes[64];
    } probe;
    static const uint8_t canary = 0xa5;

    memset(&probe, canary, sizeof(probe));
    ucs_arbiter_group_init(&probe.group);
    return probe.bytes[sizeof(void*)] != canary;
}


/* libucs exports its statistics nodes only when built with them */
static int uct_cuda_ipc_ns_abi_probe_statistics(const char *libucs)
{
    int found;
    void *dl;

    dl = dlopen(libucs, RTLD_LAZY | RTLD_NOLOAD);
    if (dl == NULL) {
        return 0;
    }
    found = (dlsym(dl, "ucs_stats_node_alloc") != NULL);
    dlclose(dl);
    return found;
}


void uct_cuda_ipc_ns_abi_probe(uct_cuda_ipc_ns_abi_t *loaded)
{
    const char *libucs = "";
    void *ucs_base;

    memset(loaded, 0, sizeof(*loaded));
    /* the definition our reference to a libucs function bound to */
    ucs_base = uct_cuda_ipc_ns_abi_object_of((const void*)ucs_status_string,
                                             &libucs);
    snprintf(loaded->libucs, sizeof(loaded->libucs), "%s", libucs);
    uct_cuda_ipc_ns_abi_probe_version(ucs_base, loaded);
    loaded->assertions = uct_cuda_ipc_ns_abi_probe_assertions();
    loaded->statistics = uct_cuda_ipc_ns_abi_probe_statistics(loaded->libucs);
}


static void uct_cuda_ipc_ns_abi_describe(const uct_cuda_ipc_ns_abi_t *abi,
                                         char *buf, size_t max)
{
    char version[40];

    if (abi->version_known) {
        snprintf(version, sizeof(version), "%u.%u.%u", abi->major,
                 abi->minor, abi->patch);
    } else {
        snprintf(version, sizeof(version), "(version unknown)");
    }
    snprintf(buf, max, "UCX %s (assertions %s, statistics %s)", version,
             abi->assertions ? "on" : "off", abi->statistics ? "on" : "off");
}


ucs_status_t uct_cuda_ipc_ns_abi_compare(const uct_cuda_ipc_ns_abi_t *built,
                                         const uct_cuda_ipc_ns_abi_t *loaded,
                                         char *why, size_t max)
{
    char built_str[128], loaded_str[128];
    const char *what;

    if (loaded->other_ucx) {
        what = "a second UCX";
    } else if (loaded->version_known &&
               ((loaded->major != built->major) ||
                (loaded->minor != built->minor) ||
                (loaded->patch != built->patch))) {
        what = "another UCX version";
    } else if (loaded->assertions != built->assertions) {
        what = "another UCX configuration (assertions)";
    } else if (loaded->statistics != built->statistics) {
        what = "another UCX configuration (statistics)";
    } else {
        return UCS_OK;
    }

    uct_cuda_ipc_ns_abi_describe(built, built_str, sizeof(built_str));
    uct_cuda_ipc_ns_abi_describe(loaded, loaded_str, sizeof(loaded_str));
    if (loaded->other_ucx) {
        snprintf(why, max, "cuda_ipc_ns: built for %s, bound to %s while the "
                 "process runs %s on another libucs (%s): not registered",
                 built_str, loaded->libucs, loaded->libucp, what);
    } else {
        snprintf(why, max, "cuda_ipc_ns: built for %s, loaded by %s from %s "
                 "(%s): not registered", built_str, loaded_str,
                 loaded->libucs, what);
    }
    return UCS_ERR_UNSUPPORTED;
}


ucs_status_t uct_cuda_ipc_ns_abi_admit(void)
{
    char why[UCT_CUDA_IPC_NS_ABI_MSG_MAX], host[64] = "";
    uct_cuda_ipc_ns_abi_t loaded;
    ucs_status_t status;

    uct_cuda_ipc_ns_abi_probe(&loaded);
    status = uct_cuda_ipc_ns_abi_compare(&uct_cuda_ipc_ns_abi_built, &loaded,
                                         why, sizeof(why));
    if (status != UCS_OK) {
        (void)gethostname(host, sizeof(host) - 1);
        fprintf(stderr, "[%s:%d] %s\n", host, (int)getpid(), why);
    }
    return status;
}
