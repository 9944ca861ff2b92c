/*
 * cudasim: initialization, configuration, driver version, fault injection.
 */
#include "cudasim_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>


cudasim_config_t cudasim_cfg;

static pthread_mutex_t cudasim_init_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int    cudasim_init_done; /* 1 after a successful cuInit */
/* 1 in a fork()ed child of an initialized process: CUDA is refused there */
static volatile int    cudasim_fork_child;
static int             cudasim_debug;
static uint64_t        cudasim_buffer_salt;
static uint64_t        cudasim_buffer_seq;


/* ------------------------------------------------------------------ */
/* Fault injection                                                    */
/* ------------------------------------------------------------------ */

#define CUDASIM_MAX_FAULTS 64

typedef struct {
    char          func[64];  /* base name, e.g. "cuMemAlloc" */
    unsigned long nth;       /* 1-based call number; 0 = every call */
    CUresult      result;
    unsigned long count;     /* calls seen so far */
} cudasim_fault_t;

static pthread_mutex_t cudasim_fault_lock = PTHREAD_MUTEX_INITIALIZER;
static cudasim_fault_t cudasim_faults[CUDASIM_MAX_FAULTS];
static int             cudasim_num_faults;   /* guarded by the lock */
/* fast path check, read without the lock by every thread (atomics: a test
 * reloads the rules while the emulator's and the module's threads run) */
static int             cudasim_faults_armed;


/* Parse CUDASIM_FAULTS; returns the number of rules or -1 on error */
static int cudasim_fault_parse(void)
{
    const char *env = getenv("CUDASIM_FAULTS");
    const char *p, *end, *c1, *c2;
    cudasim_fault_t *f;
    char num[32];
    int n = 0, res;
    size_t len;

    memset(cudasim_faults, 0, sizeof(cudasim_faults));
    cudasim_num_faults = 0;
    if (env == NULL) {
        return 0;
    }

    for (p = env; *p != '\0'; p = (*end == ',') ? end + 1 : end) {
        while (isspace((unsigned char)*p)) {
            ++p;
        }
        end = strchr(p, ',');
        if (end == NULL) {
            end = p + strlen(p);
        }
        if (end == p) {
            continue;
        }
        if (n >= CUDASIM_MAX_FAULTS) {
            goto err;
        }
        c1 = memchr(p, ':', end - p);
        c2 = (c1 == NULL) ? NULL : memchr(c1 + 1, ':', end - c1 - 1);
        if ((c2 == NULL) || (c1 == p) || ((size_t)(c1 - p) >= sizeof(f->func))) {
            goto err;
        }
        f = &cudasim_faults[n];
        memcpy(f->func, p, c1 - p);
        f->func[c1 - p] = '\0';

        len = c2 - c1 - 1;
        if ((len == 1) && (c1[1] == '*')) {
            f->nth = 0;
        } else {
            if ((len == 0) || (len >= sizeof(num))) {
                goto err;
            }
            memcpy(num, c1 + 1, len);
            num[len] = '\0';
            f->nth = strtoul(num, NULL, 0);
            if (f->nth == 0) {
                goto err;
            }
        }

        len = end - c2 - 1;
        while ((len > 0) && isspace((unsigned char)c2[len])) {
            --len;
        }
        res = cudasim_error_parse(c2 + 1, len);
        if (res < 0) {
            goto err;
        }
        f->result = (CUresult)res;
        ++n;
    }

    cudasim_num_faults = n;
    return n;

err:
    fprintf(stderr, "cudasim: cannot parse CUDASIM_FAULTS='%s'\n", env);
    memset(cudasim_faults, 0, sizeof(cudasim_faults));
    cudasim_num_faults = 0;
    return -1;
}


/* CUDASIM_VMM_GRANULARITY, checked */
static size_t cudasim_granularity_read(void)
{
    uint64_t gran = cudasim_env_u64("CUDASIM_VMM_GRANULARITY", 2ull << 20);

    if ((gran < 4096) || (gran & (gran - 1))) {
        fprintf(stderr, "cudasim: CUDASIM_VMM_GRANULARITY=%llu is not a "
                "power of 2 >= 4096, using 2 MiB\n", (unsigned long long)gran);
        gran = 2ull << 20;
    }
    return gran;
}


/* Exported for tests: re-read CUDASIM_VMM_GRANULARITY (README.md) */
CUDASIM_API size_t cudasim_granularity_reload(void)
{
    size_t gran = cudasim_granularity_read();

    __atomic_store_n(&cudasim_cfg.vmm_granularity, gran, __ATOMIC_RELAXED);
    return gran;
}


/* Exported for tests: re-read CUDASIM_FAULTS and reset the counters */
CUDASIM_API int cudasim_fault_reload(void)
{
    int ret;

    pthread_mutex_lock(&cudasim_fault_lock);
    ret = cudasim_fault_parse();
    __atomic_store_n(&cudasim_faults_armed, cudasim_num_faults > 0,
                     __ATOMIC_RELEASE);
    pthread_mutex_unlock(&cudasim_fault_lock);
    return ret;
}


/* Exported for tests: tells the emulator from a real driver */
CUDASIM_API int cudasim_is_emulator(void)
{
    return 1;
}


CUresult cudasim_fault_check(const char *func)
{
    CUresult res = CUDA_SUCCESS;
    cudasim_fault_t *f;
    int i;

    if (!__atomic_load_n(&cudasim_faults_armed, __ATOMIC_ACQUIRE)) {
        return CUDA_SUCCESS;
    }

    pthread_mutex_lock(&cudasim_fault_lock);
    for (i = 0; i < cudasim_num_faults; ++i) {
        f = &cudasim_faults[i];
        if (strcmp(f->func, func)) {
            continue;
        }
        ++f->count;
        if ((res == CUDA_SUCCESS) && ((f->nth == 0) || (f->nth == f->count))) {
            res = f->result;
        }
    }
    pthread_mutex_unlock(&cudasim_fault_lock);

    if (res != CUDA_SUCCESS) {
        cudasim_log("fault injected: %s() -> %s", func,
                    cudasim_error_name(res));
    }
    return res;
}


/* ------------------------------------------------------------------ */
/* Configuration and helpers                                          */
/* ------------------------------------------------------------------ */

uint64_t cudasim_env_u64(const char *name, uint64_t dflt)
{
    const char *val = getenv(name);
    unsigned long long v;
    char *end;

    if ((val == NULL) || (*val == '\0')) {
        return dflt;
    }
    errno = 0;
    v     = strtoull(val, &end, 0);
    if (errno != 0) {
        return dflt;
    }
    /* optional binary suffix */
    switch (toupper((unsigned char)*end)) {
    case 'K': v <<= 10; break;
    case 'M': v <<= 20; break;
    case 'G': v <<= 30; break;
    case 'T': v <<= 40; break;
    default: break;
    }
    return v;
}


void cudasim_log(const char *fmt, ...)
{
    va_list ap;

    if (!cudasim_debug) {
        return;
    }
    va_start(ap, fmt);
    fprintf(stderr, "[cudasim %d] ", (int)getpid());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}


/*
 * A child of fork() gets the driver's state but not its threads nor the
 * device's view of the process: CUDA is undefined there until exec (NVIDIA's
 * CUDA C++ guidelines, rule 1.6), and the driver's calls fail with
 * CUDA_ERROR_NOT_INITIALIZED ("initialization error"). The emulator refuses
 * every call in such a child, cuInit too, so that no code relies on it.
 */
static void cudasim_atfork_child(void)
{
    if (cudasim_init_done) {
        cudasim_fork_child = 1;
    }
}


int cudasim_initialized(void)
{
    return __atomic_load_n(&cudasim_init_done, __ATOMIC_ACQUIRE) &&
           !cudasim_fork_child;
}


uint64_t cudasim_new_buffer_id(void)
{
    uint64_t seq = __atomic_add_fetch(&cudasim_buffer_seq, 1,
                                      __ATOMIC_RELAXED);

    return (cudasim_buffer_salt << 32) | (seq & 0xffffffffull);
}


/*
 * CUDASIM_NATIVE_ATOMICS: "0" (default: devices linked like PCIe peers),
 * "1"/"all" (every pair, like NVLink), or pairs "A-B,C-D" (symmetric)
 */
static void cudasim_native_atomics_read(void)
{
    const char *value = getenv("CUDASIM_NATIVE_ATOMICS");
    const char *p;
    char *end;
    unsigned long a, b;
    int i;

    memset(cudasim_cfg.native_atomics, 0, sizeof(cudasim_cfg.native_atomics));
    if ((value == NULL) || !strcmp(value, "") || !strcmp(value, "0")) {
        return;
    }
    if (!strcmp(value, "1") || !strcmp(value, "all")) {
        for (i = 0; i < CUDASIM_MAX_DEVICES; ++i) {
            cudasim_cfg.native_atomics[i] = ~(1ull << i);
        }
        return;
    }
    for (p = value; *p != '\0'; p = (*end == ',') ? end + 1 : end) {
        a = strtoul(p, &end, 0);
        if ((end == p) || (*end != '-')) {
            goto err;
        }
        p = end + 1;
        b = strtoul(p, &end, 0);
        if ((end == p) || ((*end != ',') && (*end != '\0')) ||
            (a >= CUDASIM_MAX_DEVICES) || (b >= CUDASIM_MAX_DEVICES) ||
            (a == b)) {
            goto err;
        }
        cudasim_cfg.native_atomics[a] |= 1ull << b;
        cudasim_cfg.native_atomics[b] |= 1ull << a;
    }
    return;

err:
    fprintf(stderr, "cudasim: CUDASIM_NATIVE_ATOMICS='%s' is malformed "
            "(0, 1, all or A-B,C-D...), using 0\n", value);
    memset(cudasim_cfg.native_atomics, 0, sizeof(cudasim_cfg.native_atomics));
}


/*
 * CUDASIM_VISIBLE_DEVICES, read as the driver reads CUDA_VISIBLE_DEVICES:
 * physical GPU indices separated by commas, ordinal i of this process being
 * the i-th; the list ends at the first entry that is not such an index (not
 * a decimal number, no such GPU, or one already listed), so "" or a bad first
 * entry leaves no device. Unset: every GPU, in order.
 */
static void cudasim_visible_devices_read(void)
{
    const char *value = getenv("CUDASIM_VISIBLE_DEVICES");
    uint64_t listed   = 0;
    const char *p;
    unsigned long index;
    char *end;
    int i;

    cudasim_cfg.device_count = 0;
    if (value == NULL) {
        for (i = 0; i < cudasim_cfg.physical_count; ++i) {
            cudasim_cfg.physical[cudasim_cfg.device_count++] = i;
        }
        return;
    }
    for (p = value; isdigit((unsigned char)*p); p = end + 1) {
        index = strtoul(p, &end, 10);
        if (((*end != ',') && (*end != '\0')) ||
            (index >= (unsigned long)cudasim_cfg.physical_count) ||
            (listed & (1ull << index))) {
            break;
        }
        listed |= 1ull << index;
        cudasim_cfg.physical[cudasim_cfg.device_count++] = (int)index;
        if (*end == '\0') {
            break;
        }
    }
}


static void cudasim_config_read(void)
{
    uint32_t salt = 0;

    cudasim_debug                = (int)cudasim_env_u64("CUDASIM_DEBUG", 0);
    cudasim_cfg.physical_count   = (int)cudasim_env_u64("CUDASIM_DEVICE_COUNT",
                                                        1);
    if (cudasim_cfg.physical_count > CUDASIM_MAX_DEVICES) {
        cudasim_cfg.physical_count = CUDASIM_MAX_DEVICES;
    }
    cudasim_visible_devices_read();
    cudasim_cfg.device_mem       = cudasim_env_u64("CUDASIM_DEVICE_MEM",
                                                   4ull << 30);
    cudasim_cfg.uuid_seed        = cudasim_env_u64("CUDASIM_UUID_SEED",
                                                   0x6375646173696dull);
    cudasim_cfg.copy_latency_us  = (unsigned)cudasim_env_u64(
                                           "CUDASIM_COPY_LATENCY_US", 0);
    cudasim_cfg.driver_version   = (int)cudasim_env_u64(
                                           "CUDASIM_DRIVER_VERSION",
                                           CUDA_VERSION);
    cudasim_cfg.peer_access      = (int)cudasim_env_u64("CUDASIM_PEER_ACCESS",
                                                        1);
    cudasim_native_atomics_read();
    cudasim_fabric_config_read();
    cudasim_cfg.vmm_granularity = cudasim_granularity_read();

    if (getrandom(&salt, sizeof(salt), 0) != sizeof(salt)) {
        salt = (uint32_t)getpid() ^ (uint32_t)time(NULL);
    }
    cudasim_buffer_salt = salt | 1; /* never 0 */
}


CUDASIM_API CUresult CUDAAPI cuInit(unsigned int Flags)
{
    static int config_done;
    CUresult res;

    if (cudasim_fork_child) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    pthread_mutex_lock(&cudasim_init_lock);
    if (!config_done) {
        cudasim_config_read();
        cudasim_fault_reload();
        pthread_atfork(NULL, NULL, cudasim_atfork_child);
        config_done = 1;
    }
    pthread_mutex_unlock(&cudasim_init_lock);

    res = cudasim_fault_check("cuInit");
    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (Flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (cudasim_cfg.device_count <= 0) {
        return CUDA_ERROR_NO_DEVICE;
    }

    pthread_mutex_lock(&cudasim_init_lock);
    if (!cudasim_init_done) {
        cudasim_devices_init();
        __atomic_store_n(&cudasim_init_done, 1, __ATOMIC_RELEASE);
        cudasim_log("initialized: %d device(s), %zu bytes each",
                    cudasim_cfg.device_count, cudasim_cfg.device_mem);
    }
    pthread_mutex_unlock(&cudasim_init_lock);
    return CUDA_SUCCESS;
}


/* Works before cuInit, like the real driver */
CUDASIM_API CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    if (driverVersion == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *driverVersion = (int)cudasim_env_u64("CUDASIM_DRIVER_VERSION",
                                          CUDA_VERSION);
    return CUDA_SUCCESS;
}
