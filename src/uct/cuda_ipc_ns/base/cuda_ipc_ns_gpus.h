/*
 * cuda_ipc_ns: the GPUs this process can use, by UUID.
 *
 * A process sees some of the machine's GPUs (a pod gets its own, through
 * CUDA_VISIBLE_DEVICES or its device cgroup) under ordinals of its own; a
 * GPU's UUID is the same in every process. The driver refuses to import
 * memory of a GPU the process cannot use, so an importer refuses the key of
 * such memory before any import (docs/architecture.md, "GPU visibility").
 */
#ifndef UCT_CUDA_IPC_NS_GPUS_H
#define UCT_CUDA_IPC_NS_GPUS_H

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>

/* "GPU-" and 32 hex digits in five dash-separated groups, as nvidia-smi */
#define UCT_CUDA_IPC_NS_GPU_UUID_STR_MAX  41


/**
 * Whether this process can use the GPU whose CUuuid bytes are @a uuid: one of
 * the devices the driver lists. The list is read once per process
 * (cuDeviceGetCount, cuDeviceGetUuid).
 *
 * @return UCS_OK with *usable_p set, or the status of the driver call that
 *         failed (logged, naming it).
 */
ucs_status_t uct_cuda_ipc_ns_gpus_usable(const uint8_t *uuid, int *usable_p);


/** Print @a uuid (16 bytes) as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
const char *uct_cuda_ipc_ns_gpus_uuid_str(const uint8_t *uuid, char *buf,
                                          size_t max);


/** Print the UUIDs of the GPUs this process can use, comma-separated
 *  ("none" without any) */
const char *uct_cuda_ipc_ns_gpus_str(char *buf, size_t max);


/**
 * Nonzero the first time it is asked about the GPU @a uuid of the process
 * (@a pid, @a pid_ns, @a start_time) (remembered: a bounded set, the oldest
 * forgotten first), so that a refusal is warned about once per peer process
 * and GPU, not per key.
 */
int uct_cuda_ipc_ns_gpus_warn_first(const uint8_t *uuid, uint32_t pid,
                                    uint64_t pid_ns, uint64_t start_time);

#endif
