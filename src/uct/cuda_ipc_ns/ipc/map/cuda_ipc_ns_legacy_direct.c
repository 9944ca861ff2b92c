/*
 * cuda_ipc_ns: which path a legacy key of another PID namespace takes (see
 * cuda_ipc_ns_legacy_direct.h).
 *
 * The owners whose memory did not open are an owner set
 * (cuda_ipc_ns_owner_set.h), read at unpack and written after a failed
 * open, never on a copy's path.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_legacy_direct.h"
#include "cuda_ipc_ns_nsid.h"
#include "cuda_ipc_ns_owner_set.h"

#include <ucs/config/types.h>
#include <ucs/debug/log.h>
#include <ucs/sys/string.h>

#include <inttypes.h>
#include <pthread.h>


static int uct_cuda_ipc_ns_legacy_direct_mode = UCS_AUTO;

/* Owners whose legacy memory did not open here */
static uct_cuda_ipc_ns_owner_set_t uct_cuda_ipc_ns_legacy_failed_owners =
        UCT_CUDA_IPC_NS_OWNER_SET_INITIALIZER;

/* The failures logged, for the tests */
static struct {
    pthread_mutex_t lock;
    uint64_t        logged;          /* failures logged: one per owner */
    char            last_answer[64]; /* the driver's, of the last one */
} uct_cuda_ipc_ns_legacy_failed = {.lock = PTHREAD_MUTEX_INITIALIZER};


void uct_cuda_ipc_ns_legacy_direct_configure(int mode)
{
    __atomic_store_n(&uct_cuda_ipc_ns_legacy_direct_mode,
                     (mode == UCS_TRY) ? UCS_AUTO : mode, __ATOMIC_RELAXED);
}


static int uct_cuda_ipc_ns_legacy_direct_get_mode(void)
{
    return __atomic_load_n(&uct_cuda_ipc_ns_legacy_direct_mode,
                           __ATOMIC_RELAXED);
}


static void uct_cuda_ipc_ns_legacy_owner(const uct_cuda_ipc_ns_rkey_info_t *key,
                                         uct_cuda_ipc_ns_owner_set_entry_t *owner)
{
    uct_cuda_ipc_ns_owner_set_entry(owner, key->pid, key->pid_ns,
                                    key->start_time, NULL);
}


/* Whether an open of @a key's owner's memory failed before */
static int uct_cuda_ipc_ns_legacy_failed_before(const uct_cuda_ipc_ns_rkey_info_t *key)
{
    uct_cuda_ipc_ns_owner_set_entry_t owner;

    uct_cuda_ipc_ns_legacy_owner(key, &owner);
    return uct_cuda_ipc_ns_owner_set_contains(
            &uct_cuda_ipc_ns_legacy_failed_owners, &owner);
}


/* Remember @a key's owner; nonzero when it was not remembered yet */
static int uct_cuda_ipc_ns_legacy_failed_add(const uct_cuda_ipc_ns_rkey_info_t *key)
{
    uct_cuda_ipc_ns_owner_set_entry_t owner;

    uct_cuda_ipc_ns_legacy_owner(key, &owner);
    return uct_cuda_ipc_ns_owner_set_add(&uct_cuda_ipc_ns_legacy_failed_owners,
                                         &owner);
}


uct_cuda_ipc_ns_legacy_direct_path_t
uct_cuda_ipc_ns_legacy_direct_path(const uct_cuda_ipc_ns_rkey_info_t *key,
                                   int gpu_usable)
{
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    int has_broker = key->broker_addr_len > 0;
    const char *why;

    switch (uct_cuda_ipc_ns_legacy_direct_get_mode()) {
    case UCS_NO:
        return UCT_CUDA_IPC_NS_LEGACY_PATH_OWNER;
    case UCS_YES:
        return UCT_CUDA_IPC_NS_LEGACY_PATH_DIRECT;
    default:
        break;
    }

    if (key->pid == self->pid) {
        /* the driver would take us for the exporter */
        why = "its pid is ours";
    } else if (!gpu_usable) {
        why = "its GPU is not one we can use";
    } else if (uct_cuda_ipc_ns_legacy_failed_before(key)) {
        why = "an open of its memory failed before";
    } else {
        return has_broker ? UCT_CUDA_IPC_NS_LEGACY_PATH_DIRECT_OR_OWNER :
                            UCT_CUDA_IPC_NS_LEGACY_PATH_DIRECT;
    }

    ucs_debug("cuda_ipc_ns: legacy allocation 0x%" PRIx64 " of pid %u in PID "
              "namespace %" PRIu64 " (we are pid %u in %" PRIu64 "): not "
              "opened here, %s", key->base, key->pid, key->pid_ns, self->pid,
              self->pid_ns, why);
    return UCT_CUDA_IPC_NS_LEGACY_PATH_OWNER;
}


/* Count a failure logged, with the driver's @a answer (the tests read them:
 * uct_cuda_ipc_ns_legacy_direct_get_stats) */
static void uct_cuda_ipc_ns_legacy_failed_logged(const char *answer)
{
    pthread_mutex_lock(&uct_cuda_ipc_ns_legacy_failed.lock);
    ++uct_cuda_ipc_ns_legacy_failed.logged;
    ucs_strncpy_safe(uct_cuda_ipc_ns_legacy_failed.last_answer, answer,
                     sizeof(uct_cuda_ipc_ns_legacy_failed.last_answer));
    pthread_mutex_unlock(&uct_cuda_ipc_ns_legacy_failed.lock);
}


int uct_cuda_ipc_ns_legacy_direct_failed(const uct_cuda_ipc_ns_rkey_info_t *key,
                                         const char *answer)
{
    if ((uct_cuda_ipc_ns_legacy_direct_get_mode() == UCS_YES) ||
        (key->broker_addr_len == 0)) {
        ucs_error("cuda_ipc_ns: cuIpcOpenMemHandle() of legacy allocation 0x%"
                  PRIx64 " (%" PRIu64 " bytes) of pid %u in PID namespace %"
                  PRIu64 " failed: %s (%s)", key->base, key->length, key->pid,
                  key->pid_ns, answer,
                  (key->broker_addr_len == 0) ?
                  "its owner copies nothing for us" :
                  "UCX_CUDA_IPC_NS_LEGACY_DIRECT=y");
        return 0;
    }

    if (uct_cuda_ipc_ns_legacy_failed_add(key)) {
        uct_cuda_ipc_ns_legacy_failed_logged(answer);
        ucs_diag("cuda_ipc_ns: the driver does not open legacy memory of pid "
                 "%u in PID namespace %" PRIu64 " here (cuIpcOpenMemHandle: "
                 "%s): its memory goes through copies its owner makes (once "
                 "per peer process)", key->pid, key->pid_ns, answer);
    }
    return 1;
}


void uct_cuda_ipc_ns_legacy_direct_get_stats(uint64_t *logged_p,
                                             char *last_answer, size_t max)
{
    pthread_mutex_lock(&uct_cuda_ipc_ns_legacy_failed.lock);
    *logged_p = uct_cuda_ipc_ns_legacy_failed.logged;
    ucs_strncpy_safe(last_answer, uct_cuda_ipc_ns_legacy_failed.last_answer,
                     max);
    pthread_mutex_unlock(&uct_cuda_ipc_ns_legacy_failed.lock);
}
