/*
 * cuda_ipc_ns: which path a legacy key of another PID namespace takes (see
 * cuda_ipc_ns_legacy_direct.h).
 *
 * Lock: uct_cuda_ipc_ns_legacy_failed.lock guards the ring of owners whose
 * memory did not open; taken at unpack and after a failed open, never on a
 * copy's path, and no other lock is taken under it.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_legacy_direct.h"
#include "cuda_ipc_ns_nsid.h"

#include <ucs/config/types.h>
#include <ucs/debug/log.h>
#include <ucs/sys/string.h>

#include <inttypes.h>
#include <pthread.h>


/* Owners whose legacy memory did not open here: a ring, so that a process
 * talking to many owners keeps the latest ones */
#define UCT_CUDA_IPC_NS_LEGACY_FAILED_MAX 64


static int uct_cuda_ipc_ns_legacy_direct_mode = UCS_AUTO;

static struct {
    pthread_mutex_t lock;
    unsigned        next;
    uint64_t        logged;          /* failures logged: one per owner */
    char            last_answer[64]; /* the driver's, of the last one */
    struct {
        uint64_t pid_ns;
        uint64_t start_time;
        uint32_t pid;
        int      used;
    } owners[UCT_CUDA_IPC_NS_LEGACY_FAILED_MAX];
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


/* Index of @a key's owner in the ring, or -1; with the lock held */
static int uct_cuda_ipc_ns_legacy_failed_find(const uct_cuda_ipc_ns_rkey_info_t *key)
{
    unsigned i;

    for (i = 0; i < UCT_CUDA_IPC_NS_LEGACY_FAILED_MAX; ++i) {
        if (uct_cuda_ipc_ns_legacy_failed.owners[i].used &&
            (uct_cuda_ipc_ns_legacy_failed.owners[i].pid == key->pid) &&
            (uct_cuda_ipc_ns_legacy_failed.owners[i].pid_ns == key->pid_ns) &&
            (uct_cuda_ipc_ns_legacy_failed.owners[i].start_time ==
             key->start_time)) {
            return (int)i;
        }
    }
    return -1;
}


/* Whether an open of @a key's owner's memory failed before */
static int uct_cuda_ipc_ns_legacy_failed_before(const uct_cuda_ipc_ns_rkey_info_t *key)
{
    int found;

    pthread_mutex_lock(&uct_cuda_ipc_ns_legacy_failed.lock);
    found = uct_cuda_ipc_ns_legacy_failed_find(key) >= 0;
    pthread_mutex_unlock(&uct_cuda_ipc_ns_legacy_failed.lock);
    return found;
}


/* Remember @a key's owner; nonzero when it was not remembered yet */
static int uct_cuda_ipc_ns_legacy_failed_add(const uct_cuda_ipc_ns_rkey_info_t *key)
{
    int first;
    unsigned i;

    pthread_mutex_lock(&uct_cuda_ipc_ns_legacy_failed.lock);
    first = uct_cuda_ipc_ns_legacy_failed_find(key) < 0;
    if (first) {
        i = uct_cuda_ipc_ns_legacy_failed.next++ %
            UCT_CUDA_IPC_NS_LEGACY_FAILED_MAX;
        uct_cuda_ipc_ns_legacy_failed.owners[i].pid        = key->pid;
        uct_cuda_ipc_ns_legacy_failed.owners[i].pid_ns     = key->pid_ns;
        uct_cuda_ipc_ns_legacy_failed.owners[i].start_time = key->start_time;
        uct_cuda_ipc_ns_legacy_failed.owners[i].used       = 1;
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_legacy_failed.lock);
    return first;
}


uct_cuda_ipc_ns_legacy_path_t
uct_cuda_ipc_ns_legacy_direct_path(const uct_cuda_ipc_ns_rkey_info_t *key,
                                   int gpu_usable)
{
    const uct_cuda_ipc_ns_identity_t *self = uct_cuda_ipc_ns_self();
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
