/*
 * cuda_ipc_ns: the staging ring of a copy session (docs/owner-copies.md,
 * "The staging ring").
 *
 * When the importer's own buffer is not VMM memory the owner can map
 * (legacy cuMemAlloc memory, host memory), the owner copies into or out of
 * a ring of slots the importer allocates: one VMM allocation, created with
 * the POSIX-fd handle type on the importer's device and mapped here, whose
 * fd goes to the owner as an ordinary COPY buffer. When the owner's GPU is
 * not one the importer can use (pods with GPUs of their own), the ring is
 * pinned host memory instead: a sealed memfd both sides register with the
 * driver ("The pinned host ring"). The importer copies between its buffer
 * and a slot on its own stream. This file allocates and frees the ring; the
 * staged ops (cuda_ipc_ns_staged.c) drive its slots.
 *
 * Each kind of memory a local buffer the owner copies can be is a small
 * ops table (uct_cuda_ipc_ns_staging_ops_t), as sm/mm's memory kinds are:
 * VMM device memory (the importer's own buffers and the device ring) and
 * pinned host memory (the host ring). Nothing outside the tables asks which
 * kind a buffer is.
 */
#ifndef UCT_CUDA_IPC_NS_STAGING_H
#define UCT_CUDA_IPC_NS_STAGING_H

#include "cuda_ipc_ns_host_mem.h"

#include <ucs/type/status.h>
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>


/* Bounds of UCX_CUDA_IPC_NS_OWNER_COPY_STAGING_SLOTS and _SLOT_SIZE */
#define UCT_CUDA_IPC_NS_STAGING_SLOTS_MAX     64
#define UCT_CUDA_IPC_NS_STAGING_SLOT_SIZE_MAX (1ul << 30)


/* Where a session's ring lives (UCX_CUDA_IPC_NS_OWNER_COPY_STAGING) */
typedef enum {
    /* host memory when the owner's GPU is not one we can use, else device */
    UCT_CUDA_IPC_NS_STAGING_AUTO,
    UCT_CUDA_IPC_NS_STAGING_DEVICE,
    UCT_CUDA_IPC_NS_STAGING_HOST,
    UCT_CUDA_IPC_NS_STAGING_LAST
} uct_cuda_ipc_ns_staging_kind_t;


/* "auto", "device", "host", NULL: for a UCS_CONFIG_TYPE_ENUM config field */
extern const char *uct_cuda_ipc_ns_staging_kind_names[];


struct uct_cuda_ipc_ns_staging;


/* One kind of memory the owner's copies reach */
typedef struct uct_cuda_ipc_ns_staging_ops {
    const char *name;         /* for log lines */
    /* the owner can map the importer's own (VMM) buffers beside a ring of
     * this kind: else every op stages */
    int        owner_maps_buffers;
    uint32_t   buf_flags;     /* of a COPY request naming such memory */
    /* a ring of @a num_slots of @a slot_size (rounded up), the device's
     * primary context current */
    ucs_status_t (*alloc)(unsigned num_slots, size_t slot_size, int device,
                          struct uct_cuda_ipc_ns_staging *staging);
    void         (*free)(struct uct_cuda_ipc_ns_staging *staging);
    /* the fd the owner maps the memory at @a base by (a ring's: @a staging,
     * else NULL), the caller's to close */
    ucs_status_t (*export_fd)(const struct uct_cuda_ipc_ns_staging *staging,
                              uint64_t base, int *fd_p);
} uct_cuda_ipc_ns_staging_ops_t;


/* VMM device memory: the importer's exportable buffers, the device ring */
extern const uct_cuda_ipc_ns_staging_ops_t uct_cuda_ipc_ns_staging_vmm_ops;

/* Pinned host memory of a sealed memfd: the host ring */
extern const uct_cuda_ipc_ns_staging_ops_t uct_cuda_ipc_ns_staging_host_ops;


/* The ring's memory */
typedef struct uct_cuda_ipc_ns_staging {
    const uct_cuda_ipc_ns_staging_ops_t *ops; /* its kind */
    int                          device;    /* ordinal */
    CUcontext                    ctx;       /* its primary context */
    uct_cuda_ipc_ns_host_mem_t   host;      /* pinned host memory, or none */
    CUmemGenericAllocationHandle handle;    /* device memory */
    CUdeviceptr                  base;      /* 0: not allocated */
    size_t                       size;      /* num_slots * slot_size */
    size_t                       slot_size; /* rounded to the granularity */
    unsigned                     num_slots;
    uint64_t                     buf_id;    /* as the owner names it */
} uct_cuda_ipc_ns_staging_t;


/**
 * Check the configured ring: @a num_slots and @a slot_size within bounds,
 * else an error line naming the variable and UCS_ERR_INVALID_PARAM.
 */
ucs_status_t uct_cuda_ipc_ns_staging_check_config(unsigned num_slots,
                                                  size_t slot_size);


/**
 * Allocate @a num_slots slots of @a slot_size bytes (rounded up to the
 * allocation granularity) of the memory of @a ops for @a device, in its
 * primary context: VMM memory mapped read-write for it, or pinned host
 * memory registered in it. Errors name the driver call and its CUresult.
 */
ucs_status_t uct_cuda_ipc_ns_staging_alloc(const uct_cuda_ipc_ns_staging_ops_t *ops,
                                           int device, unsigned num_slots,
                                           size_t slot_size,
                                           uct_cuda_ipc_ns_staging_t *staging);


/* Undo uct_cuda_ipc_ns_staging_alloc(); nothing may still copy to it */
void uct_cuda_ipc_ns_staging_free(uct_cuda_ipc_ns_staging_t *staging);


static inline const char *
uct_cuda_ipc_ns_staging_kind_str(const uct_cuda_ipc_ns_staging_t *staging)
{
    return staging->ops->name;
}


static inline CUdeviceptr
uct_cuda_ipc_ns_staging_slot(const uct_cuda_ipc_ns_staging_t *staging,
                             unsigned index)
{
    return staging->base + (CUdeviceptr)index * staging->slot_size;
}

#endif
