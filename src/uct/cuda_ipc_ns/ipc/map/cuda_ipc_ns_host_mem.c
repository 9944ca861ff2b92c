/*
 * cuda_ipc_ns: shared, pinned host memory (see cuda_ipc_ns_host_mem.h,
 * docs/owner-copies.md, "The pinned host ring").
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_host_mem.h"
#include "cuda_ipc_ns_driver.h"

#include <ucs/debug/log.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>


/* Map @a size bytes of @a fd shared and register them with the driver */
static ucs_status_t
uct_cuda_ipc_ns_host_mem_pin(int fd, size_t size, const char *what,
                             uct_cuda_ipc_ns_host_mem_t *mem)
{
    ucs_status_t status;
    void *ptr;

    ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ptr == MAP_FAILED) {
        ucs_error("cuda_ipc_ns: mmap of %zu bytes of %s failed: %m", size,
                  what);
        return UCS_ERR_NO_MEMORY;
    }

    status = UCT_CUDA_IPC_NS_CU(cuMemHostRegister, ptr, size,
                                CU_MEMHOSTREGISTER_PORTABLE);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: cannot pin %s (%zu bytes at %p): %s", what,
                  size, ptr, ucs_status_string(status));
        munmap(ptr, size);
        return status;
    }

    mem->ptr  = ptr;
    mem->size = size;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_host_mem_create(size_t size,
                                             uct_cuda_ipc_ns_host_mem_t *mem)
{
    struct stat st;
    ucs_status_t status;
    int fd;

    memset(mem, 0, sizeof(*mem));
    mem->fd = -1;

    fd = memfd_create("cuda_ipc_ns_host_ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        ucs_error("cuda_ipc_ns: memfd_create failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    /* allocated now: no first-touch cost in a copy (and no SIGBUS later
     * when tmpfs runs out); the seals let the owner trust the size */
    if ((ftruncate(fd, size) != 0) ||
        (fallocate(fd, 0, 0, size) != 0) ||
        (fcntl(fd, F_ADD_SEALS,
               F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) ||
        (fstat(fd, &st) != 0)) {
        ucs_error("cuda_ipc_ns: cannot size and seal a memfd of %zu bytes: %m",
                  size);
        status = UCS_ERR_NO_MEMORY;
        goto err_close;
    }

    status = uct_cuda_ipc_ns_host_mem_pin(fd, size, "our host ring", mem);
    if (status != UCS_OK) {
        goto err_close;
    }

    mem->fd = fd;
    mem->id = st.st_ino;
    return UCS_OK;

err_close:
    close(fd);
    return status;
}


ucs_status_t uct_cuda_ipc_ns_host_mem_map(int fd, size_t size, const char *what,
                                          uct_cuda_ipc_ns_host_mem_t *mem)
{
    struct stat st;
    int seals;

    memset(mem, 0, sizeof(*mem));
    mem->fd = -1;

    if (fstat(fd, &st) != 0) {
        ucs_error("cuda_ipc_ns: fstat of %s failed: %m", what);
        return UCS_ERR_INVALID_PARAM;
    }
    if (!S_ISREG(st.st_mode) || (size == 0) || ((uint64_t)st.st_size != size)) {
        ucs_error("cuda_ipc_ns: %s is not host memory of %zu bytes (mode 0%o, "
                  "%" PRId64 " bytes): refused", what, size,
                  (unsigned)st.st_mode, (int64_t)st.st_size);
        return UCS_ERR_INVALID_PARAM;
    }

    /* its pages must be there already, allocated by the peer: pinning a
     * sparse file would make us allocate them (in our memory cgroup) */
    if ((uint64_t)st.st_blocks * 512 < size) {
        ucs_error("cuda_ipc_ns: %s has %" PRIu64 " of its %zu bytes "
                  "allocated: refused", what, (uint64_t)st.st_blocks * 512,
                  size);
        return UCS_ERR_INVALID_PARAM;
    }

    /* a peer that could shrink it would make our copies fault (SIGBUS) */
    seals = fcntl(fd, F_GET_SEALS);
    if ((seals < 0) || !(seals & F_SEAL_SHRINK)) {
        ucs_error("cuda_ipc_ns: %s is not sealed against shrinking (seals "
                  "0x%x): refused", what, (seals < 0) ? 0 : seals);
        return UCS_ERR_INVALID_PARAM;
    }

    mem->id = st.st_ino;
    return uct_cuda_ipc_ns_host_mem_pin(fd, size, what, mem);
}


void uct_cuda_ipc_ns_host_mem_free(uct_cuda_ipc_ns_host_mem_t *mem)
{
    if (mem->ptr != NULL) {
        (void)UCT_CUDA_IPC_NS_CU(cuMemHostUnregister, mem->ptr);
        munmap(mem->ptr, mem->size);
        mem->ptr = NULL;
    }
    if (mem->fd >= 0) {
        close(mem->fd);
        mem->fd = -1;
    }
}
