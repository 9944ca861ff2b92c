/*
 * cudasim: a CPU emulator of the CUDA driver API (test instrument).
 * Internal declarations shared by the emulator's translation units.
 */
#ifndef CUDASIM_INTERNAL_H
#define CUDASIM_INTERNAL_H

#ifndef _GNU_SOURCE
#  define _GNU_SOURCE
#endif

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every exported driver entry point carries this */
#define CUDASIM_API         __attribute__((visibility("default")))

#define CUDASIM_MAX_DEVICES 64
#define CUDASIM_CTX_MAGIC   0x43747853u /* "Ctxs" */

/* Process-wide configuration, read from the environment at cuInit */
typedef struct cudasim_config {
    /* devices this process sees (its ordinals 0..device_count-1) */
    int      device_count;
    /* GPUs of the emulated machine (CUDASIM_DEVICE_COUNT); what crosses
     * processes (UUIDs, PCI bus ids, IPC handles, VMM fds) names these */
    int      physical_count;
    /* physical GPU of each ordinal (CUDASIM_VISIBLE_DEVICES) */
    int      physical[CUDASIM_MAX_DEVICES];
    size_t   device_mem;
    uint64_t uuid_seed;
    unsigned copy_latency_us;
    size_t   vmm_granularity;
    int      driver_version;
    int      peer_access;
    /* native atomics between physical GPUs i and j: bit j of
     * native_atomics[i] */
    uint64_t native_atomics[CUDASIM_MAX_DEVICES];
} cudasim_config_t;

extern cudasim_config_t cudasim_cfg;

/* A context; only primary contexts exist (one per device) */
struct CUctx_st {
    uint32_t magic;
    int      device;
    int      refcount; /* primary context retain count; 0: inactive */
    CUresult sticky;   /* a fatal error that poisoned it, until it is
                        * released to 0 (a new context then) */
    unsigned long long id; /* cuCtxGetId: a new one each time the primary
                            * context is made (retained from 0) */
    unsigned flags;        /* cuCtxSetFlags (CU_CTX_SYNC_MEMOPS: every
                            * synchronous memory operation of the context
                            * returns once done) */
};

/* A fatal error (an illegal address in a stream) poisons the whole context
 * on a GPU: every later call in it returns that error */
void     cudasim_ctx_poison(CUcontext ctx, CUresult error);

/* --- core --- */
int      cudasim_initialized(void);
CUresult cudasim_fault_check(const char *func);
uint64_t cudasim_new_buffer_id(void);
/* a copy as a copy engine makes it: to memory, not to a CPU cache */
void cudasim_dma_copy(void *dst, const void *src, size_t len);

uint64_t cudasim_env_u64(const char *name, uint64_t dflt);
void     cudasim_log(const char *fmt, ...)
         __attribute__((format(printf, 1, 2)));

/*
 * Prologue of every entry point except cuInit, cuDriverGetVersion,
 * cuGetErrorName/String and cuGetProcAddress: initialization check, then
 * fault injection.
 */
#define CUDASIM_ENTER(_name) \
    do { \
        CUresult _enter_res; \
        if (!cudasim_initialized()) { \
            return CUDA_ERROR_NOT_INITIALIZED; \
        } \
        _enter_res = cudasim_fault_check(_name); \
        if (_enter_res != CUDA_SUCCESS) { \
            return _enter_res; \
        } \
    } while (0)

/* --- errors --- */
const char *cudasim_error_name(CUresult res);
int         cudasim_error_parse(const char *str, size_t len);

/* --- devices and contexts --- */
void     cudasim_devices_init(void);
int      cudasim_device_valid(int ordinal);
/* physical GPU of a valid ordinal of this process */
int      cudasim_device_physical(int ordinal);
/* this process's ordinal of physical GPU @a physical; -1 when it does not
 * see that GPU (or there is no such GPU) */
int      cudasim_device_ordinal(int physical);
CUcontext cudasim_primary_ctx(int ordinal);
/* current context of the calling thread, must be active */
CUresult cudasim_current_ctx(CUcontext *ctx_p);
int      cudasim_ctx_valid(CUcontext ctx);
/* device memory accounting */
CUresult cudasim_mem_reserve(int device, size_t size);
void     cudasim_mem_unreserve(int device, size_t size);
/* Device memory is resident from its allocation on, as on a GPU: commit the
 * pages of a new allocation's file (0, or -1 with errno, e.g. ENOSPC), and
 * set up a mapping's page tables when access is granted (best effort) */
int      cudasim_mem_commit(int fd, off_t offset, size_t size);
void     cudasim_mem_populate(void *addr, size_t size, int prot);
/* Device memory of file @a fd at @a offset: the application's mapping, with
 * no CPU access, at *addr_p, and the emulator's read-write alias of it
 * (populated); 0, or -1 with errno */
int      cudasim_mem_map_device(int fd, off_t offset, size_t size,
                                void **addr_p, void **alias_p);

/* --- memory registry --- */
typedef enum {
    CUDASIM_REGION_LEGACY,      /* cuMemAlloc */
    CUDASIM_REGION_IPC_IMPORT,  /* cuIpcOpenMemHandle */
    CUDASIM_REGION_VMM_MAP,     /* cuMemMap */
    CUDASIM_REGION_VMM_RESERVE, /* cuMemAddressReserve */
    CUDASIM_REGION_HOST         /* cuMemHostRegister: host memory, in its own
                                 * table (cudasim_mem.c), never in the
                                 * registry: copies see it as host memory */
} cudasim_region_kind_t;

typedef struct cudasim_region {
    uintptr_t              base;
    size_t                 size;     /* size visible to the user */
    size_t                 map_size; /* size of the mmap() */
    cudasim_region_kind_t  kind;
    int                    device;
    CUcontext              ctx;
    uint64_t               buffer_id;
    unsigned               handle_types;
    int                    access;   /* CUmemAccess_flags for VMM maps */
    uint64_t               access_devices; /* VMM maps: bit d: device d
                                            * was granted access */
    void                   *owner;   /* kind-specific object */
    /* device memory: the emulator's own mapping of the same bytes, the one
     * its copies use. The application's address is PROT_NONE: on a GPU a
     * CPU load or store of device memory faults (docs/driver-contract.md) */
    void                   *alias;
    CUmemoryPool           pool;     /* VMM maps: the stream-ordered pool
                                      * the memory is of (cudasim_pool.c) */
    /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (cuPointerSetAttribute): the
     * synchronous memory operations on this memory return once done */
    int                    sync_memops;
    struct cudasim_region  *next;
} cudasim_region_t;

void cudasim_registry_rdlock(void);
void cudasim_registry_wrlock(void);
void cudasim_registry_unlock(void);
/* lookups with the lock held; find() skips reservations, returns the
 * mapping/allocation containing addr */
cudasim_region_t *cudasim_region_find(uintptr_t addr);
cudasim_region_t *cudasim_region_find_kind(uintptr_t addr,
                                           cudasim_region_kind_t kind);
/* the emulator's view of device address addr (lock held): its region's
 * alias, with *avail cut to the bytes left in that region; NULL for host
 * memory */
void *cudasim_region_alias(uintptr_t addr, size_t *avail);
void cudasim_region_insert(cudasim_region_t *region);
void cudasim_region_remove(cudasim_region_t *region);
/* iterate all regions (lock held) */
cudasim_region_t *cudasim_region_first(void);

/*
 * Check that [addr, addr+len) lies in one known device region with the
 * needed access (lock held). Returns 1 if it does, 0 if addr is inside a
 * region but the range is not valid, -1 if addr is unknown (host memory).
 * @a device >= 0: VMM mappings must have granted access to that device (the
 * device whose context runs the copy); -1: any device's access will do.
 */
int cudasim_range_check(uintptr_t addr, size_t len, int need_write,
                        int device);

/* --- streams --- */
/* wait for the work queued on the legacy default stream of the current
 * context (and its blocking streams), as cuStreamSynchronize(NULL) */
CUresult cudasim_default_stream_sync(void);
/* wait for all streams of all contexts to drain (like cuCtxSynchronize) */
void cudasim_streams_sync_all(void);

/* The descriptor @a fd moved above the application's range where the limit
 * allows (cudasim_vmm.c); returns the descriptor to keep */
int cudasim_fd_out_of_range(int fd);

/* Whether @a fd is a memfd the emulator named @a name (/proc may be absent:
 * then yes, and the caller's header check decides) */
int cudasim_memfd_name_ok(int fd, const char *name);

/* A VMM allocation handle of @a size bytes of @a fd at @a offset, holding
 * them through a mapping of its own and no descriptor, as an imported
 * allocation (its memory is not counted against the device here) */
CUresult cudasim_vmm_wrap(int fd, off_t offset, size_t size, int device,
                          unsigned handle_types, uint64_t buffer_id,
                          CUmemGenericAllocationHandle *handle);

/* --- fabric handles, IMEX channels and domains, nodes (cudasim_fabric.c) --- */
typedef struct cudasim_fabric cudasim_fabric_t;

typedef struct {
    int      device;       /* this process's ordinal of the memory */
    uint64_t size;
    uint64_t buffer_id;
    unsigned handle_types;
    off_t    offset;       /* of the bytes in the file */
} cudasim_fabric_info_t;

/* CUDASIM_NODE, at cuInit */
void     cudasim_fabric_config_read(void);
/* the emulated node this process is on: 0 for the machine itself */
uint64_t cudasim_fabric_node_id(void);
/* CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED of a valid ordinal */
int      cudasim_fabric_supported(int ordinal);
/* may cuMemCreate request FABRIC on this device, in this process */
CUresult cudasim_fabric_create_check(int ordinal);
/* the backing file, @a total bytes, of a new fabric allocation in the
 * domain's directory: its fd (or -1 with errno) and *fabric_p, published
 * once its VMM header is written, or discarded */
int      cudasim_fabric_create_file(size_t total, cudasim_fabric_t **fabric_p);
void     cudasim_fabric_publish(cudasim_fabric_t *fabric, uint64_t size,
                                uint64_t buffer_id, int physical,
                                unsigned handle_types);
void     cudasim_fabric_discard(cudasim_fabric_t *fabric);
/* an allocation handle gone: the last one of all processes frees it */
void     cudasim_fabric_put(cudasim_fabric_t *fabric);
/* one more handle on fabric memory @a fd: 1, 0 if no fabric memory, -1 if
 * freed */
int      cudasim_fabric_attach_fd(int fd, cudasim_fabric_t **fabric_p);
/* @a fd is a fabric allocation's file (a POSIX-fd export of it) */
int      cudasim_fabric_fd_ok(int fd);
/* the 64-byte CUmemFabricHandle into @a out */
CUresult cudasim_fabric_export(const cudasim_fabric_t *fabric, void *out);
/* the memory a CUmemFabricHandle names: its file (the caller closes it)
 * and one more handle on it */
CUresult cudasim_fabric_open(const void *os_handle, int *fd_p,
                             cudasim_fabric_t **fabric_p,
                             cudasim_fabric_info_t *info);

/* cuMemFree of memory of a stream-ordered pool (cudasim_pool.c):
 * CUDA_ERROR_INVALID_VALUE when @a dptr is no pool allocation's start */
CUresult cudasim_pool_free(CUdeviceptr dptr);

#endif
