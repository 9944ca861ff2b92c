/*
 * cuda_ipc_ns: the ABI guard (docs/ucx-versions.md, "The ABI guard").
 *
 * The module is compiled against UCX's internal headers and config.h, so it
 * relies on the structure layouts of one UCX release built one way. The
 * build records the facts that decide those layouts; at load the module
 * reads the same facts from the UCX that loaded it and registers nothing
 * when they differ.
 */
#ifndef UCT_CUDA_IPC_NS_ABI_H
#define UCT_CUDA_IPC_NS_ABI_H

#include <ucs/type/status.h>

#include <stddef.h>


/* Longest line the guard writes */
#define UCT_CUDA_IPC_NS_ABI_MSG_MAX 1024


/* What a UCX is, as far as the module's layouts go */
typedef struct uct_cuda_ipc_ns_abi {
    int      version_known; /* 0: no libucp in the process to ask */
    unsigned major;         /* release, as ucp_get_version() says */
    unsigned minor;
    unsigned patch;
    int      assertions;    /* ENABLE_ASSERT: fields in ucs_arbiter_group_t,
                               ucs_async_context_t and its mutex */
    int      statistics;    /* ENABLE_STATS: a stats node in the interface
                               and endpoint base classes */
    int      other_ucx;     /* a libucp runs on another libucs than the one
                               the module bound to (a second UCX) */
    char     libucs[256];   /* the libucs the module bound to ("" if built) */
    char     libucp[256];   /* the libucp the version was read from, or the
                               one on another libucs when other_ucx */
} uct_cuda_ipc_ns_abi_t;


/* The facts of the UCX source tree the module was compiled against */
extern const uct_cuda_ipc_ns_abi_t uct_cuda_ipc_ns_abi_built;


/**
 * Read the facts of the UCX the module runs on: the libucs its references
 * bound to, the version of the libucp loaded on that libucs, and probes of
 * that libucs for the configuration (never through a layout that could be
 * wrong).
 */
void uct_cuda_ipc_ns_abi_probe(uct_cuda_ipc_ns_abi_t *loaded);


/**
 * Compare the UCX the module was built for with the one it runs on.
 *
 * @param [in]  built   The recorded facts.
 * @param [in]  loaded  The probed facts.
 * @param [out] why     On a mismatch, one line naming both.
 * @param [in]  max     Size of @a why.
 *
 * @return UCS_OK when the module may register, UCS_ERR_UNSUPPORTED if not.
 */
ucs_status_t uct_cuda_ipc_ns_abi_compare(const uct_cuda_ipc_ns_abi_t *built,
                                         const uct_cuda_ipc_ns_abi_t *loaded,
                                         char *why, size_t max);


/**
 * Probe and compare with what the build recorded; on a mismatch write the
 * line to stderr (UCX's own log reads its global options through the
 * build's layouts, which is what is in doubt).
 *
 * @return UCS_OK when the module may register.
 */
ucs_status_t uct_cuda_ipc_ns_abi_admit(void);

#endif
