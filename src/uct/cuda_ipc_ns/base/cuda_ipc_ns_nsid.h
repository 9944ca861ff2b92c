/*
 * cuda_ipc_ns: identity of a process across PID namespaces.
 *
 * A pid alone names a process only inside one PID namespace, and only until
 * the pid is reused. Peers are therefore identified by (system id, PID
 * namespace, pid, start time).
 */
#ifndef UCT_CUDA_IPC_NS_NSID_H
#define UCT_CUDA_IPC_NS_NSID_H

#include <ucs/type/status.h>
#include <stdint.h>
#include <sys/types.h>


/* Inode of the initial PID namespace (the kernel's PROC_PID_INIT_INO): the
 * namespace of a peer whose key carries no extension */
#define UCT_CUDA_IPC_NS_INIT_PID_NS  0xEFFFFFFCull


typedef struct uct_cuda_ipc_ns_nsid_identity {
    uint64_t system_id;  /* boot-id based, as ucs_get_system_id() */
    uint64_t pid_ns;     /* inode of /proc/self/ns/pid */
    uint64_t start_time; /* process start, clock ticks after boot */
    uint32_t pid;        /* pid in pid_ns */
} uct_cuda_ipc_ns_nsid_identity_t;


/**
 * Identity of the calling process. Computed on first use and again in a
 * child of fork() (a fork handler), so it is always this process's; after
 * the first call no lock and no system call.
 */
const uct_cuda_ipc_ns_nsid_identity_t *uct_cuda_ipc_ns_nsid_self(void);


/**
 * Read a small /proc file (one read) into @a buf of @a max bytes,
 * NUL-terminated. @return UCS_OK, or UCS_ERR_NO_ELEM when it cannot be read.
 */
ucs_status_t uct_cuda_ipc_ns_nsid_read_proc_file(const char *path, char *buf,
                                                 size_t max);


/**
 * Read the start time of process @a pid ("self" for pid 0) as seen from our
 * PID namespace (field 22 of /proc/<pid>/stat).
 *
 * @return UCS_OK, or UCS_ERR_NO_ELEM when there is no such process.
 */
ucs_status_t uct_cuda_ipc_ns_nsid_start_time(pid_t pid, uint64_t *start_time_p);


/**
 * Inode of the PID namespace of process @a pid ("self" for pid 0).
 */
ucs_status_t uct_cuda_ipc_ns_nsid_pid_ns(pid_t pid, uint64_t *pid_ns_p);


/** @return nonzero when both identities name the same process */
static inline int
uct_cuda_ipc_ns_identity_equal(const uct_cuda_ipc_ns_nsid_identity_t *a,
                               const uct_cuda_ipc_ns_nsid_identity_t *b)
{
    return (a->system_id == b->system_id) && (a->pid_ns == b->pid_ns) &&
           (a->pid == b->pid) && (a->start_time == b->start_time);
}

#endif
