/*
 * cuda_ipc_ns: the GPUs this process can use, by UUID (cuda_ipc_ns_gpus.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_gpus.h"
#include "cuda_ipc_ns_driver.h"
#include "cuda_ipc_ns_md_base.h"
#include "cuda_ipc_ns_owner_set.h"

#include <ucs/debug/log.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define UCT_CUDA_IPC_NS_GPUS_MAX         64


/* The devices the driver lists; read once: they never change in a process */
static struct {
    pthread_mutex_t lock;
    int             read;
    ucs_status_t    status;
    unsigned        count;
    CUuuid          uuid[UCT_CUDA_IPC_NS_GPUS_MAX];
} uct_cuda_ipc_ns_gpus = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Peer processes and GPUs whose keys were refused with a warning */
static uct_cuda_ipc_ns_owner_set_t uct_cuda_ipc_ns_gpus_warned =
        UCT_CUDA_IPC_NS_OWNER_SET_INITIALIZER;


static ucs_status_t uct_cuda_ipc_ns_gpus_read(void)
{
    ucs_status_t status;
    CUdevice device;
    int i, count;

    status = uct_cuda_ipc_ns_md_base_driver_load();
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: no CUDA driver to list the GPUs this process "
                  "can use: %s", ucs_status_string(status));
        return status;
    }
    status = UCT_CUDA_IPC_NS_CU(cuDeviceGetCount, &count);
    if (status != UCS_OK) {
        return status;
    }
    if (count > UCT_CUDA_IPC_NS_GPUS_MAX) {
        /* more than the driver's own limit of visible devices */
        ucs_error("cuda_ipc_ns: the driver lists %d GPUs, more than %d",
                  count, UCT_CUDA_IPC_NS_GPUS_MAX);
        return UCS_ERR_UNSUPPORTED;
    }
    for (i = 0; i < count; ++i) {
        status = UCT_CUDA_IPC_NS_CU(cuDeviceGet, &device, i);
        if (status != UCS_OK) {
            return status;
        }
        status = UCT_CUDA_IPC_NS_CU(cuDeviceGetUuid,
                                    &uct_cuda_ipc_ns_gpus.uuid[i], device);
        if (status != UCS_OK) {
            return status;
        }
    }
    uct_cuda_ipc_ns_gpus.count = count;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_gpus_usable(const uint8_t *uuid, int *usable_p)
{
    ucs_status_t status;
    unsigned i;

    pthread_mutex_lock(&uct_cuda_ipc_ns_gpus.lock);
    if (!uct_cuda_ipc_ns_gpus.read) {
        uct_cuda_ipc_ns_gpus.status = uct_cuda_ipc_ns_gpus_read();
        uct_cuda_ipc_ns_gpus.read   = 1;
    }
    status = uct_cuda_ipc_ns_gpus.status;
    pthread_mutex_unlock(&uct_cuda_ipc_ns_gpus.lock);
    if (status != UCS_OK) {
        return status;
    }

    *usable_p = 0;
    for (i = 0; i < uct_cuda_ipc_ns_gpus.count; ++i) {
        if (!memcmp(&uct_cuda_ipc_ns_gpus.uuid[i], uuid, sizeof(CUuuid))) {
            *usable_p = 1;
            break;
        }
    }
    return UCS_OK;
}


const char *uct_cuda_ipc_ns_gpus_uuid_str(const uint8_t *uuid, char *buf,
                                          size_t max)
{
    snprintf(buf, max, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x", uuid[0], uuid[1], uuid[2], uuid[3],
             uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10],
             uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]);
    return buf;
}


const char *uct_cuda_ipc_ns_gpus_str(char *buf, size_t max)
{
    char one[UCT_CUDA_IPC_NS_GPU_UUID_STR_MAX];
    size_t len = 0;
    unsigned i;

    /* the list was read by uct_cuda_ipc_ns_gpus_usable() */
    snprintf(buf, max, "none");
    for (i = 0; (i < uct_cuda_ipc_ns_gpus.count) && (len < max); ++i) {
        len += snprintf(buf + len, max - len, "%s%s", (i == 0) ? "" : ", ",
                        uct_cuda_ipc_ns_gpus_uuid_str(
                                (const uint8_t*)uct_cuda_ipc_ns_gpus.uuid[i].bytes,
                                one,
                                sizeof(one)));
    }
    return buf;
}


int uct_cuda_ipc_ns_gpus_warn_first(const uint8_t *uuid, uint32_t pid,
                                    uint64_t pid_ns, uint64_t start_time)
{
    uct_cuda_ipc_ns_owner_set_entry_t owner;

    uct_cuda_ipc_ns_owner_set_entry(&owner, pid, pid_ns, start_time, uuid);
    return uct_cuda_ipc_ns_owner_set_add(&uct_cuda_ipc_ns_gpus_warned, &owner);
}
