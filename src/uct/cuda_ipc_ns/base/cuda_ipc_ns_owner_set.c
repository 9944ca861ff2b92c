/*
 * cuda_ipc_ns: a small set of peer processes (see cuda_ipc_ns_owner_set.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_owner_set.h"

#include <string.h>


void uct_cuda_ipc_ns_owner_set_entry(uct_cuda_ipc_ns_owner_set_entry_t *entry,
                                     uint32_t pid, uint64_t pid_ns,
                                     uint64_t start_time, const void *tag)
{
    memset(entry, 0, sizeof(*entry));
    entry->pid        = pid;
    entry->pid_ns     = pid_ns;
    entry->start_time = start_time;
    if (tag != NULL) {
        memcpy(entry->tag, tag, sizeof(entry->tag));
    }
}


/* With the lock held */
static int uct_cuda_ipc_ns_owner_set_find(const uct_cuda_ipc_ns_owner_set_t *set,
                                          const uct_cuda_ipc_ns_owner_set_entry_t *entry)
{
    const uct_cuda_ipc_ns_owner_set_entry_t *e;
    unsigned i;

    for (i = 0; i < set->used; ++i) {
        e = &set->entry[i];
        if ((e->pid == entry->pid) && (e->pid_ns == entry->pid_ns) &&
            (e->start_time == entry->start_time) &&
            !memcmp(e->tag, entry->tag, sizeof(e->tag))) {
            return 1;
        }
    }
    return 0;
}


int uct_cuda_ipc_ns_owner_set_contains(uct_cuda_ipc_ns_owner_set_t *set,
                                       const uct_cuda_ipc_ns_owner_set_entry_t *entry)
{
    int found;

    pthread_mutex_lock(&set->lock);
    found = uct_cuda_ipc_ns_owner_set_find(set, entry);
    pthread_mutex_unlock(&set->lock);
    return found;
}


int uct_cuda_ipc_ns_owner_set_add(uct_cuda_ipc_ns_owner_set_t *set,
                                  const uct_cuda_ipc_ns_owner_set_entry_t *entry)
{
    int added;

    pthread_mutex_lock(&set->lock);
    added = !uct_cuda_ipc_ns_owner_set_find(set, entry);
    if (added) {
        set->entry[set->next++ % UCT_CUDA_IPC_NS_OWNER_SET_MAX] = *entry;
        if (set->used < UCT_CUDA_IPC_NS_OWNER_SET_MAX) {
            ++set->used;
        }
    }
    pthread_mutex_unlock(&set->lock);
    return added;
}
