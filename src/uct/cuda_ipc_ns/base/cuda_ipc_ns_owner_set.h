/*
 * cuda_ipc_ns: a small set of peer processes (owners of keys), each maybe
 * with a 16-byte tag (a GPU's UUID), so that something is said or decided
 * once per owner rather than once per key: the warnings about keys refused
 * and the legacy opens that failed. Bounded: a ring, the oldest forgotten
 * first, so that a process talking to many owners keeps the latest ones.
 * Never on a copy's path (a mutex).
 */
#ifndef UCT_CUDA_IPC_NS_OWNER_SET_H
#define UCT_CUDA_IPC_NS_OWNER_SET_H

#include <pthread.h>
#include <stdint.h>

#define UCT_CUDA_IPC_NS_OWNER_SET_MAX 64


typedef struct uct_cuda_ipc_ns_owner_set_entry {
    uint64_t pid_ns;
    uint64_t start_time;
    uint32_t pid;
    uint8_t  tag[16];    /* zero when the owner alone counts */
} uct_cuda_ipc_ns_owner_set_entry_t;


typedef struct uct_cuda_ipc_ns_owner_set {
    pthread_mutex_t                   lock;
    unsigned                          next;  /* where the next one goes */
    unsigned                          used;
    uct_cuda_ipc_ns_owner_set_entry_t entry[UCT_CUDA_IPC_NS_OWNER_SET_MAX];
} uct_cuda_ipc_ns_owner_set_t;


#define UCT_CUDA_IPC_NS_OWNER_SET_INITIALIZER \
    { .lock = PTHREAD_MUTEX_INITIALIZER }


/* The owner (pid, pid_ns, start_time) with @a tag (16 bytes, or NULL) */
void uct_cuda_ipc_ns_owner_set_entry(uct_cuda_ipc_ns_owner_set_entry_t *entry,
                                     uint32_t pid, uint64_t pid_ns,
                                     uint64_t start_time, const void *tag);

/* Whether @a entry is in the set */
int uct_cuda_ipc_ns_owner_set_contains(uct_cuda_ipc_ns_owner_set_t *set,
                                       const uct_cuda_ipc_ns_owner_set_entry_t *entry);

/* Add @a entry; nonzero when it was not in the set yet */
int uct_cuda_ipc_ns_owner_set_add(uct_cuda_ipc_ns_owner_set_t *set,
                                  const uct_cuda_ipc_ns_owner_set_entry_t *entry);

#endif
