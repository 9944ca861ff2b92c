/*
 * cuda_ipc_ns: identity of a process across PID namespaces.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_nsid.h"

#include <ucs/debug/log.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/sys/uid.h>
#include <sys/stat.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>


static pthread_mutex_t uct_cuda_ipc_ns_self_lock = PTHREAD_MUTEX_INITIALIZER;
static uct_cuda_ipc_ns_nsid_identity_t uct_cuda_ipc_ns_self_id;
static int uct_cuda_ipc_ns_self_valid;  /* self_id is this process's */
static int uct_cuda_ipc_ns_self_atfork; /* the fork handler is installed */


ucs_status_t uct_cuda_ipc_ns_nsid_read_proc_file(const char *path, char *buf,
                                                 size_t max)
{
    ssize_t len;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ucs_debug("cuda_ipc_ns: open(%s) failed: %m", path);
        return UCS_ERR_NO_ELEM;
    }
    len = read(fd, buf, max - 1);
    close(fd);
    if (len <= 0) {
        return UCS_ERR_NO_ELEM;
    }
    buf[len] = '\0';
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_nsid_start_time(pid_t pid, uint64_t *start_time_p)
{
    char path[64], buf[1024], *p;
    unsigned long long start_time;
    ucs_status_t status;
    int field;

    if (pid == 0) {
        snprintf(path, sizeof(path), "/proc/self/stat");
    } else {
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    }
    status = uct_cuda_ipc_ns_nsid_read_proc_file(path, buf, sizeof(buf));
    if (status != UCS_OK) {
        return status;
    }

    /* comm (field 2) may hold spaces and ')': fields resume after the last ')' */
    p = strrchr(buf, ')');
    if (p == NULL) {
        return UCS_ERR_IO_ERROR;
    }
    /* p+2 is field 3 (state); start time is field 22 */
    p += 2;
    for (field = 3; (field < 22) && (p != NULL); ++field) {
        p = strchr(p, ' ');
        if (p != NULL) {
            ++p;
        }
    }
    if ((p == NULL) || (sscanf(p, "%llu", &start_time) != 1)) {
        ucs_debug("cuda_ipc_ns: cannot parse start time in %s", path);
        return UCS_ERR_IO_ERROR;
    }

    *start_time_p = start_time;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_nsid_pid_ns(pid_t pid, uint64_t *pid_ns_p)
{
    char path[64];
    struct stat st;

    if (pid == 0) {
        snprintf(path, sizeof(path), "/proc/self/ns/pid");
    } else {
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
    }
    if (stat(path, &st) < 0) {
        ucs_debug("cuda_ipc_ns: stat(%s) failed: %m", path);
        return UCS_ERR_NO_ELEM;
    }

    *pid_ns_p = st.st_ino;
    return UCS_OK;
}


/* A forked child is another process: its identity is read again */
static void uct_cuda_ipc_ns_self_atfork_child(void)
{
    __atomic_store_n(&uct_cuda_ipc_ns_self_valid, 0, __ATOMIC_RELEASE);
}


const uct_cuda_ipc_ns_nsid_identity_t *uct_cuda_ipc_ns_nsid_self(void)
{
    uct_cuda_ipc_ns_nsid_identity_t id;

    /* read once per process: no lock, no system call after the first
     * (rkey_unpack calls it for every key) */
    if (ucs_likely(__atomic_load_n(&uct_cuda_ipc_ns_self_valid,
                                   __ATOMIC_ACQUIRE))) {
        return &uct_cuda_ipc_ns_self_id;
    }

    pthread_mutex_lock(&uct_cuda_ipc_ns_self_lock);
    if (!uct_cuda_ipc_ns_self_valid) {
        if (!uct_cuda_ipc_ns_self_atfork) {
            uct_cuda_ipc_ns_self_atfork =
                    (pthread_atfork(NULL, NULL,
                                    uct_cuda_ipc_ns_self_atfork_child) == 0);
        }
        id.system_id  = ucs_get_system_id();
        id.pid        = getpid();
        id.pid_ns     = 0;
        id.start_time = 0;
        if (uct_cuda_ipc_ns_nsid_pid_ns(0, &id.pid_ns) != UCS_OK) {
            ucs_warn("cuda_ipc_ns: cannot read own PID namespace");
        }
        /* /proc/self names us even when /proc belongs to another pid ns,
         * where /proc/<getpid()> would name someone else */
        if (uct_cuda_ipc_ns_nsid_start_time(0, &id.start_time) != UCS_OK) {
            ucs_warn("cuda_ipc_ns: cannot read own start time");
        }
        uct_cuda_ipc_ns_self_id = id;
        /* without the fork handler (ENOMEM), each call reads it again */
        __atomic_store_n(&uct_cuda_ipc_ns_self_valid,
                         uct_cuda_ipc_ns_self_atfork, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_self_lock);
    return &uct_cuda_ipc_ns_self_id;
}
