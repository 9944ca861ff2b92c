/*
 * cuda_ipc_ns: which path a legacy key of another PID namespace takes
 * (docs/owner-copies.md, "Which path a legacy key takes").
 *
 * The driver opens a legacy IPC handle of another PID namespace (driver 580
 * on an H200), except in a process whose pid number in its namespace is the
 * exporter's in its own (CUDA_ERROR_INVALID_CONTEXT, as for the exporter
 * itself: reported between vLLM pods) or on a GPU it does not see; older
 * drivers are reported to refuse every such open. The importer opens the
 * handle itself (the mapping cache, one copy by its own copy engine) when
 * it can, and otherwise asks the owner to make the copies:
 *
 *  - UCX_CUDA_IPC_NS_LEGACY_DIRECT=n: always the owner's copies;
 *  - y: always the importer's own open, a failure is the op's error;
 *  - auto (default): the owner's copies without trying when the key's pid
 *    is ours (the collision predicted), its GPU is not one we can use, or
 *    an open of that peer's memory failed before; else the importer's own
 *    open, and an open that fails sends this key and every later key of
 *    that peer to the owner's copies, logged once per peer with the
 *    driver's answer.
 *
 * Process-wide, as the remote keys it decides for (unpacked by the
 * component, not by an md): the md opened last sets the mode.
 */
#ifndef UCT_CUDA_IPC_NS_LEGACY_DIRECT_H
#define UCT_CUDA_IPC_NS_LEGACY_DIRECT_H

#include "cuda_ipc_ns_rkey.h"

#include <stddef.h>
#include <stdint.h>


typedef enum {
    /* copies made by the owner (docs/owner-copies.md) */
    UCT_CUDA_IPC_NS_LEGACY_PATH_OWNER,
    /* our own cuIpcOpenMemHandle; a failure is an error */
    UCT_CUDA_IPC_NS_LEGACY_PATH_DIRECT,
    /* our own cuIpcOpenMemHandle; a failure sends the peer's keys to the
     * owner's copies */
    UCT_CUDA_IPC_NS_LEGACY_PATH_DIRECT_OR_OWNER
} uct_cuda_ipc_ns_legacy_direct_path_t;


/** Set the mode: UCS_YES, UCS_NO, or UCS_AUTO (UCS_TRY counts as UCS_AUTO) */
void uct_cuda_ipc_ns_legacy_direct_configure(int mode);


/**
 * The path of legacy key @a key of another PID namespace than ours.
 * @a gpu_usable: its GPU is one this process can use.
 */
uct_cuda_ipc_ns_legacy_direct_path_t
uct_cuda_ipc_ns_legacy_direct_path(const uct_cuda_ipc_ns_rkey_info_t *key,
                                   int gpu_usable);


/**
 * Our open of @a key (a legacy key of another PID namespace) failed with
 * @a answer (the CUresult's name, or a status where the driver gave none).
 * With a fallback to the owner's copies (mode auto, a key naming a broker):
 * remembers the owner, so that its later keys go to its copies without
 * trying, and logs the first failure of each owner. Else logs an error.
 *
 * @return nonzero when the key falls back to the owner's copies.
 */
int uct_cuda_ipc_ns_legacy_direct_failed(const uct_cuda_ipc_ns_rkey_info_t *key,
                                         const char *answer);


/**
 * The failures logged so far (one per owner) and the driver's answer to the
 * last one (for the tests: the log line is at diag level)
 */
void uct_cuda_ipc_ns_legacy_direct_get_stats(uint64_t *logged_p,
                                             char *last_answer, size_t max);

#endif
