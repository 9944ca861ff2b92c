/*
 * cuda_ipc_ns: the differences between the UCX releases the library builds
 * against (1.13.1 and 1.22.0), bridged in one place (docs/ucx-versions.md).
 * Every other file is written against one API; the version decides here,
 * through UCT_API, and nowhere else.
 */
#ifndef UCT_CUDA_IPC_NS_COMPAT_H
#define UCT_CUDA_IPC_NS_COMPAT_H

#include <uct/api/version.h>
#include <ucs/config/parser.h>


/**
 * Fill @a opts from the environment with the table of @a entry (its prefix
 * after "UCX_"), as UCX fills its own tables; release with
 * ucs_config_parser_release_opts(opts, entry->table).
 */
ucs_status_t
uct_cuda_ipc_ns_compat_config_fill(void *opts,
                                   ucs_config_global_list_entry_t *entry);

#endif
