/*
 * cudasim: fabric handles (CU_MEM_HANDLE_TYPE_FABRIC), IMEX channels and
 * domains, and emulated nodes.
 *
 * A fabric handle names memory to any process of the same IMEX domain,
 * whatever its PID or network namespace, even on another node: it cannot
 * rest on a pid, /proc or fd passing. So the memory of an allocation that
 * requested FABRIC is a file in the domain's directory (CUDASIM_IMEX_DOMAIN,
 * one directory on a filesystem all its processes see), under a name made
 * of 16 random bytes that only its 64-byte handle carries. The file starts
 * with the VMM header page (cudasim_vmm.c), which holds at
 * CUDASIM_FABRIC_HDR_OFFSET the fabric header: how many allocation handles,
 * in all processes, hold the memory. The last one to go unlinks the file
 * (its mappings keep the pages until unmapped), as the driver frees the
 * memory once the exporter's and every importer's handle are released; an
 * import takes a reference only while the count is above 0, so freed memory
 * is never brought back.
 *
 * IMEX channels (cuda.h, cuMemCreate): a process may use fabric handles
 * when it can read and write a channel<N> file of CUDASIM_IMEX_CHANNELS,
 * standing for /dev/nvidia-caps-imex-channels.
 */
#include "cudasim_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define CUDASIM_FABRIC_CHANNELS_DEFAULT "/dev/nvidia-caps-imex-channels"
#define CUDASIM_FABRIC_DOMAIN_DEFAULT   "/dev/shm/cudasim-imex"
#define CUDASIM_FABRIC_FILE_PREFIX      "cudasim-fabric-"
#define CUDASIM_FABRIC_HDR_MAGIC        "cudasim-fabric1"
#define CUDASIM_FABRIC_HANDLE_MAGIC     0x48424146u /* "FABH" */
#define CUDASIM_FABRIC_HDR_OFFSET       2048
#define CUDASIM_FABRIC_PAGE             4096

/* in the header page of the backing file, shared by every process that
 * maps it */
typedef struct {
    char     magic[16];
    uint32_t refs;     /* allocation handles holding the memory, in all
                        * processes; 0: freed, never raised again */
    uint32_t pad;
    char     path[1024];
} cudasim_fabric_hdr_t;

/* CUmemFabricHandle: 64 bytes (CU_IPC_HANDLE_SIZE) */
typedef struct {
    uint32_t magic;
    uint16_t channel;      /* the exporter's IMEX channel */
    uint16_t device;       /* the exporter's GPU, of its node */
    uint64_t domain;       /* the IMEX domain (its directory) */
    uint64_t node;         /* the exporter's node (CUDASIM_NODE) */
    uint64_t size;
    uint64_t buffer_id;
    uint32_t handle_types;
    uint32_t reserved;
    uint8_t  secret[16];   /* the backing file's name */
} cudasim_fabric_handle_t;

typedef char cudasim_fabric_handle_size_check
        [(sizeof(cudasim_fabric_handle_t) == sizeof(CUmemFabricHandle)) ?
         1 : -1];
typedef char cudasim_fabric_hdr_size_check
        [(CUDASIM_FABRIC_HDR_OFFSET + sizeof(cudasim_fabric_hdr_t) <=
          CUDASIM_FABRIC_PAGE) ? 1 : -1];

/* one allocation handle's reference to fabric memory */
struct cudasim_fabric {
    void                    *page; /* the file's header page, shared */
    cudasim_fabric_handle_t handle;
};

static uint64_t cudasim_fabric_node;


static uint64_t cudasim_fabric_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

    for (; *s != '\0'; ++s) {
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    }
    return h;
}


void cudasim_fabric_config_read(void)
{
    const char *node = getenv("CUDASIM_NODE");

    cudasim_fabric_node = ((node == NULL) || (*node == '\0')) ? 0 :
                          (cudasim_fabric_hash(node) | 1);
}


uint64_t cudasim_fabric_node_id(void)
{
    return cudasim_fabric_node;
}


/*
 * CUDASIM_FABRIC: the GPUs whose CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_-
 * SUPPORTED is 1, a mask of the machine's GPUs (bit i: GPU i; "all": every
 * one; unset or 0: none). Read at each call.
 */
int cudasim_fabric_supported(int ordinal)
{
    static int warned;
    const char *value = getenv("CUDASIM_FABRIC");
    int physical      = cudasim_device_physical(ordinal);
    unsigned long long mask;
    char *end;

    if ((value == NULL) || (*value == '\0')) {
        return 0;
    }
    if (!strcmp(value, "all")) {
        return 1;
    }
    mask = strtoull(value, &end, 0);
    if (*end != '\0') {
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
            fprintf(stderr, "cudasim: CUDASIM_FABRIC='%s' is malformed (a mask "
                    "of GPUs or all), using 0\n", value);
        }
        return 0;
    }
    return (physical >= 0) && (physical < 64) && ((mask >> physical) & 1);
}


static const char *cudasim_fabric_channels_dir(void)
{
    const char *dir = getenv("CUDASIM_IMEX_CHANNELS");

    return ((dir == NULL) || (*dir == '\0')) ?
           CUDASIM_FABRIC_CHANNELS_DEFAULT : dir;
}


/* channel<N>, N a decimal number, without anything after it */
static int cudasim_fabric_channel_number(const char *name)
{
    unsigned long n;
    char *end;

    if (strncmp(name, "channel", 7) || !isdigit((unsigned char)name[7])) {
        return -1;
    }
    n = strtoul(name + 7, &end, 10);
    return ((*end != '\0') || (n > 0xffff)) ? -1 : (int)n;
}


/* the process may use IMEX channel @a n: it can read and write its file,
 * as the module and UCX check it */
static int cudasim_fabric_channel_ok(int n)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/channel%d", cudasim_fabric_channels_dir(),
             n);
    return access(path, R_OK | W_OK) == 0;
}


/* the process's IMEX channel: the lowest-numbered one it may use (the
 * emulator's choice), -1 without any */
static int cudasim_fabric_channel(void)
{
    DIR *dir = opendir(cudasim_fabric_channels_dir());
    struct dirent *entry;
    int n, best = -1;

    if (dir == NULL) {
        return -1;
    }
    while ((entry = readdir(dir)) != NULL) {
        n = cudasim_fabric_channel_number(entry->d_name);
        if ((n >= 0) && ((best < 0) || (n < best)) &&
            cudasim_fabric_channel_ok(n)) {
            best = n;
        }
    }
    closedir(dir);
    return best;
}


static const char *cudasim_fabric_domain_dir(void)
{
    const char *dir = getenv("CUDASIM_IMEX_DOMAIN");

    return ((dir == NULL) || (*dir == '\0')) ?
           CUDASIM_FABRIC_DOMAIN_DEFAULT : dir;
}


/* the domain's identity: its directory, created open to every uid (the
 * channel, not the uid, is what grants access: cuda.h); 0 when it cannot
 * be made */
static uint64_t cudasim_fabric_domain(int create)
{
    const char *dir = cudasim_fabric_domain_dir();
    struct stat st;

    if (stat(dir, &st) != 0) {
        if (!create ||
            ((mkdir(dir, 0700) != 0) && (errno != EEXIST))) {
            return 0;
        }
        /* write and search for all, no listing: a file's name is a secret */
        chmod(dir, 01733);
        if (stat(dir, &st) != 0) {
            return 0;
        }
    }
    if (!S_ISDIR(st.st_mode)) {
        return 0;
    }
    return (((uint64_t)st.st_dev * 0x9e3779b97f4a7c15ull) ^
            (uint64_t)st.st_ino) | 1;
}


static void cudasim_fabric_path(char *path, size_t max, const uint8_t *secret)
{
    int len, i;

    len = snprintf(path, max, "%s/" CUDASIM_FABRIC_FILE_PREFIX,
                   cudasim_fabric_domain_dir());
    for (i = 0; (i < 16) && (len + 3 <= (int)max); ++i) {
        len += snprintf(path + len, max - len, "%02x", secret[i]);
    }
}


CUresult cudasim_fabric_create_check(int ordinal)
{
    /* the attribute says the device can request it with cuMemCreate
     * (cuda.h, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) */
    if (!cudasim_fabric_supported(ordinal)) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* cuda.h, cuMemCreate: fabric sharing needs "at least one IMEX channel
     * file accessible"; without one, cuMemCreate answers
     * CUDA_ERROR_NOT_PERMITTED (docs/driver-contract.md) */
    if (cudasim_fabric_channel() < 0) {
        cudasim_log("cuMemCreate(FABRIC): no IMEX channel in %s",
                    cudasim_fabric_channels_dir());
        return CUDA_ERROR_NOT_PERMITTED;
    }
    /* no domain to export into: as a node whose IMEX service is down */
    if (cudasim_fabric_domain(1) == 0) {
        fprintf(stderr, "cudasim: CUDASIM_IMEX_DOMAIN %s is no directory "
                "and cannot be made one\n", cudasim_fabric_domain_dir());
        return CUDA_ERROR_NOT_PERMITTED;
    }
    return CUDA_SUCCESS;
}


int cudasim_fabric_create_file(size_t total, cudasim_fabric_t **fabric_p)
{
    cudasim_fabric_t *fabric;
    char path[PATH_MAX];
    uint64_t domain;
    int channel, fd;

    channel = cudasim_fabric_channel();
    domain  = cudasim_fabric_domain(1);
    if ((channel < 0) || (domain == 0)) {
        cudasim_log("fabric: no channel (%d) or domain %s", channel,
                    cudasim_fabric_domain_dir());
        errno = EPERM;
        return -1;
    }
    fabric = calloc(1, sizeof(*fabric));
    if (fabric == NULL) {
        return -1;
    }
    if (getrandom(fabric->handle.secret, sizeof(fabric->handle.secret), 0) !=
        sizeof(fabric->handle.secret)) {
        free(fabric);
        return -1;
    }
    fabric->handle.magic   = CUDASIM_FABRIC_HANDLE_MAGIC;
    fabric->handle.channel = (uint16_t)channel;
    fabric->handle.domain  = domain;
    fabric->handle.node    = cudasim_fabric_node;
    cudasim_fabric_path(path, sizeof(path), fabric->handle.secret);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        cudasim_log("fabric: creating %s failed: %m", path);
        free(fabric);
        return -1;
    }
    /* any process with the channel maps it, whatever its uid (cuda.h: the
     * channel grants access) */
    if ((fchmod(fd, 0666) != 0) || (ftruncate(fd, total) != 0)) {
        goto err;
    }
    fabric->page = mmap(NULL, CUDASIM_FABRIC_PAGE, PROT_READ | PROT_WRITE,
                        MAP_SHARED, fd, 0);
    if (fabric->page == MAP_FAILED) {
        goto err;
    }
    *fabric_p = fabric;
    return fd;

err:
    close(fd);
    unlink(path);
    free(fabric);
    return -1;
}


static cudasim_fabric_hdr_t *cudasim_fabric_hdr(void *page)
{
    return (cudasim_fabric_hdr_t*)((char*)page + CUDASIM_FABRIC_HDR_OFFSET);
}


void cudasim_fabric_publish(cudasim_fabric_t *fabric, uint64_t size,
                            uint64_t buffer_id, int physical,
                            unsigned handle_types)
{
    cudasim_fabric_hdr_t *hdr = cudasim_fabric_hdr(fabric->page);

    fabric->handle.size         = size;
    fabric->handle.buffer_id    = buffer_id;
    fabric->handle.device       = (uint16_t)physical;
    fabric->handle.handle_types = handle_types;
    cudasim_fabric_path(hdr->path, sizeof(hdr->path), fabric->handle.secret);
    memcpy(hdr->magic, CUDASIM_FABRIC_HDR_MAGIC, sizeof(hdr->magic));
    __atomic_store_n(&hdr->refs, 1, __ATOMIC_RELEASE);
}


/* a file given up before its publication (a failed cuMemCreate) */
void cudasim_fabric_discard(cudasim_fabric_t *fabric)
{
    char path[PATH_MAX];

    cudasim_fabric_path(path, sizeof(path), fabric->handle.secret);
    unlink(path);
    munmap(fabric->page, CUDASIM_FABRIC_PAGE);
    free(fabric);
}


void cudasim_fabric_put(cudasim_fabric_t *fabric)
{
    cudasim_fabric_hdr_t *hdr = cudasim_fabric_hdr(fabric->page);
    const char *base;

    if (__atomic_sub_fetch(&hdr->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        /* the last handle of all processes: the memory is freed, its
         * mappings keep the pages until they go */
        hdr->path[sizeof(hdr->path) - 1] = '\0';
        base = strrchr(hdr->path, '/');
        if ((base != NULL) && !strncmp(base + 1, CUDASIM_FABRIC_FILE_PREFIX,
                                       strlen(CUDASIM_FABRIC_FILE_PREFIX))) {
            unlink(hdr->path);
        }
        cudasim_log("fabric memory %#llx freed",
                    (unsigned long long)fabric->handle.buffer_id);
    }
    munmap(fabric->page, CUDASIM_FABRIC_PAGE);
    free(fabric);
}


/* one more handle on the memory of @a fd, unless it was freed: 1 and
 * *fabric_p, 0 if @a fd is no fabric memory, -1 if freed */
int cudasim_fabric_attach_fd(int fd, cudasim_fabric_t **fabric_p)
{
    cudasim_fabric_hdr_t *hdr;
    cudasim_fabric_t *fabric;
    uint32_t refs;

    fabric = calloc(1, sizeof(*fabric));
    if (fabric == NULL) {
        return -1;
    }
    fabric->page = mmap(NULL, CUDASIM_FABRIC_PAGE, PROT_READ | PROT_WRITE,
                        MAP_SHARED, fd, 0);
    if (fabric->page == MAP_FAILED) {
        free(fabric);
        return 0;
    }
    hdr = cudasim_fabric_hdr(fabric->page);
    if (memcmp(hdr->magic, CUDASIM_FABRIC_HDR_MAGIC, sizeof(hdr->magic))) {
        munmap(fabric->page, CUDASIM_FABRIC_PAGE);
        free(fabric);
        return 0;
    }
    refs = __atomic_load_n(&hdr->refs, __ATOMIC_ACQUIRE);
    do {
        if (refs == 0) {
            munmap(fabric->page, CUDASIM_FABRIC_PAGE);
            free(fabric);
            return -1;
        }
    } while (!__atomic_compare_exchange_n(&hdr->refs, &refs, refs + 1, 0,
                                          __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE));
    *fabric_p = fabric;
    return 1;
}


/* a regular file of the emulator's fabric memory (for a POSIX-fd import of
 * an allocation that requested both types) */
int cudasim_fabric_fd_ok(int fd)
{
    char path[64], target[PATH_MAX];
    const char *base;
    ssize_t len;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    len = readlink(path, target, sizeof(target) - 1);
    if (len < 0) {
        return 0;
    }
    target[len] = '\0';
    base = strrchr(target, '/');
    return (base != NULL) &&
           !strncmp(base + 1, CUDASIM_FABRIC_FILE_PREFIX,
                    strlen(CUDASIM_FABRIC_FILE_PREFIX));
}


CUresult cudasim_fabric_export(const cudasim_fabric_t *fabric, void *out)
{
    /* cuda.h lists CUDA_ERROR_NOT_PERMITTED: a process without a channel
     * cannot share fabric memory */
    if (cudasim_fabric_channel() >= 0) {
        memcpy(out, &fabric->handle, sizeof(fabric->handle));
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_PERMITTED;
}


CUresult cudasim_fabric_open(const void *os_handle, int *fd_p,
                             cudasim_fabric_t **fabric_p,
                             cudasim_fabric_info_t *info)
{
    cudasim_fabric_handle_t h;
    cudasim_fabric_t *fabric;
    char path[PATH_MAX];
    struct stat st;
    int fd, ret;

    if (os_handle == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&h, os_handle, sizeof(h));
    if (h.magic != CUDASIM_FABRIC_HANDLE_MAGIC) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* cuda.h, cuMemImportFromShareableHandle: "If shHandleType is
     * CU_MEM_HANDLE_TYPE_FABRIC and the importer process has not been
     * granted access to the same IMEX channel as the exporter process, this
     * API will error as CUDA_ERROR_NOT_PERMITTED". A channel is of its
     * domain: another domain's export is refused the same way. */
    if (!cudasim_fabric_channel_ok(h.channel)) {
        cudasim_log("fabric import: no access to IMEX channel %u",
                    (unsigned)h.channel);
        return CUDA_ERROR_NOT_PERMITTED;
    }
    if (cudasim_fabric_domain(0) != h.domain) {
        cudasim_log("fabric import: handle of another IMEX domain than %s",
                    cudasim_fabric_domain_dir());
        return CUDA_ERROR_NOT_PERMITTED;
    }
    /* cuda.h: "If the current process cannot support the memory described
     * by this shareable handle, this API will error as
     * CUDA_ERROR_NOT_SUPPORTED": a GPU of this node it does not see, or a
     * device of its own without fabric support */
    if (h.node == cudasim_fabric_node) {
        info->device = cudasim_device_ordinal(h.device);
    } else {
        /* another node's memory, reached over the fabric from device 0 */
        info->device = cudasim_device_valid(0) ? 0 : -1;
    }
    if ((info->device < 0) || !cudasim_fabric_supported(info->device)) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }

    cudasim_fabric_path(path, sizeof(path), h.secret);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        /* freed (the emulator's choice: undocumented) */
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((fstat(fd, &st) != 0) ||
        ((uint64_t)st.st_size != CUDASIM_FABRIC_PAGE + h.size)) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    ret = cudasim_fabric_attach_fd(fd, &fabric);
    if (ret <= 0) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    info->size         = h.size;
    info->buffer_id    = h.buffer_id;
    info->handle_types = h.handle_types;
    info->offset       = CUDASIM_FABRIC_PAGE;
    *fd_p              = fd;
    *fabric_p          = fabric;
    return CUDA_SUCCESS;
}
