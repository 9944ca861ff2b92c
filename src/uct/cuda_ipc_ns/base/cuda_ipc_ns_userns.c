/*
 * cuda_ipc_ns: peers of another user namespace (see cuda_ipc_ns_userns.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_userns.h"

#include <ucs/debug/log.h>

#include <inttypes.h>
#include <stdio.h>


#define UCT_CUDA_IPC_NS_USERNS_OVERFLOW_DEFAULT 65534


/* The overflow uid when our user namespace leaves uids unmapped, else -1;
 * read once (both files are fixed for the process's life) */
static int64_t uct_cuda_ipc_ns_userns_overflow = -2;


static int64_t uct_cuda_ipc_ns_userns_read_overflow(void)
{
    unsigned long first, lower, count, mapped = 0;
    unsigned overflow = UCT_CUDA_IPC_NS_USERNS_OVERFLOW_DEFAULT;
    FILE *f;

    f = fopen("/proc/self/uid_map", "r");
    if (f == NULL) {
        ucs_debug("cuda_ipc_ns: cannot read /proc/self/uid_map: %m; no uid "
                  "is taken as unmapped");
        return -1;
    }
    while (fscanf(f, "%lu %lu %lu", &first, &lower, &count) == 3) {
        mapped += count;
    }
    fclose(f);
    if (mapped >= UINT32_MAX) {
        return -1; /* the initial namespace's "0 0 4294967295" */
    }

    f = fopen("/proc/sys/kernel/overflowuid", "r");
    if (f != NULL) {
        if (fscanf(f, "%u", &overflow) != 1) {
            overflow = UCT_CUDA_IPC_NS_USERNS_OVERFLOW_DEFAULT;
        }
        fclose(f);
    }
    ucs_debug("cuda_ipc_ns: our user namespace maps %lu uids: a peer it does "
              "not map shows uid %u", mapped, overflow);
    return overflow;
}


int uct_cuda_ipc_ns_userns_unmapped(uid_t uid)
{
    int64_t overflow = __atomic_load_n(&uct_cuda_ipc_ns_userns_overflow,
                                       __ATOMIC_RELAXED);

    if (overflow == -2) {
        /* racing readers read the same files */
        overflow = uct_cuda_ipc_ns_userns_read_overflow();
        __atomic_store_n(&uct_cuda_ipc_ns_userns_overflow, overflow,
                         __ATOMIC_RELAXED);
    }
    return (overflow >= 0) && ((int64_t)uid == overflow);
}


int uct_cuda_ipc_ns_userns_trusted(uid_t uid, int userns_peers)
{
    return userns_peers && uct_cuda_ipc_ns_userns_unmapped(uid);
}


const char *uct_cuda_ipc_ns_userns_hint(uid_t uid)
{
    return uct_cuda_ipc_ns_userns_unmapped(uid) ?
           ": the overflow uid, a peer of a user namespace ours does not map "
           "(a pod with hostUsers: false); UCX_CUDA_IPC_NS_USERNS_PEERS=y "
           "trusts such peers (docs/security.md)" : "";
}
