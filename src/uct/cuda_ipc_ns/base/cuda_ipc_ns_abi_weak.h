/*
 * cuda_ipc_ns: the UCX 1.22 symbols that UCX 1.13.1 lacks, referenced weakly
 * (docs/ucx-versions.md, "The ABI guard"). Included in every file of the
 * module (-include, src/uct/cuda_ipc_ns/Makefile.am): a symbol is weak in
 * the module only when every reference to it is.
 *
 * The loader resolves the references held in data (the configuration and
 * operation tables) when it maps the module, before any constructor runs:
 * a module built for 1.22 preloaded into a 1.13.1 process would stop the
 * process with "symbol lookup error" before the ABI guard could refuse it.
 * Weak, a missing one resolves to NULL and the guard gets to run; nothing
 * reads these references unless the guard admitted the UCX, which then has
 * them all. Listed: what `nm -D --undefined-only` of the 1.22 build names
 * and Debian's 1.13.1 libucs, libuct and libucm do not define.
 */
#ifndef UCT_CUDA_IPC_NS_ABI_WEAK_H
#define UCT_CUDA_IPC_NS_ABI_WEAK_H

#include <uct/api/version.h>

#if (UCT_VERNO_MAJOR == 1) && (UCT_VERNO_MINOR > 13)
#  pragma weak ucs_callbackq_add_oneshot
#  pragma weak ucs_callbackq_remove_oneshot
#  pragma weak ucs_config_doc_nop
#  pragma weak ucs_mpool_params_reset
#  pragma weak uct_base_rkey_compare
#  pragma weak uct_iface_base_query_v2
#  pragma weak uct_iface_fill_info_str_buf
#  pragma weak uct_iface_is_reachable_params_addrs_valid
#  pragma weak uct_md_base_md_query
#endif

#endif
