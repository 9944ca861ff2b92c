/*
 * cuda_ipc_ns: the broker's registry of exported fds (see
 * cuda_ipc_ns_broker_registry.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker_registry.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <sys/random.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>


/* What a registration holds, and so which requests it answers */
typedef enum {
    UCT_CUDA_IPC_NS_REG_FD,     /* an fd: GET_FD */
    UCT_CUDA_IPC_NS_REG_CHUNKS, /* a layout: LAYOUT, GET_CHUNK_FDS */
    UCT_CUDA_IPC_NS_REG_RANGE   /* memory the owner copies: COPY */
} uct_cuda_ipc_ns_broker_reg_kind_t;


struct uct_cuda_ipc_ns_broker_reg {
    uct_cuda_ipc_ns_broker_registry_reg_t *next;    /* same alloc_id */
    uct_cuda_ipc_ns_broker_reg_kind_t kind;
    uint64_t                     alloc_id;
    int                          fd;       /* borrowed from the caller */
    uint8_t                      token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    /* a registration of several allocations: fd is -1 */
    uint64_t                     base;
    uct_cuda_ipc_ns_broker_proto_chunk_t      *chunks;
    uint32_t                     num_chunks;
    /* a range the owner copies: base, length, where it lives, and the
     * copies in flight (removal waits for them) */
    uint64_t                     length;
    CUcontext                    ctx;
    int                          device;
    unsigned                     copies;
};


/* Compare tokens in time independent of where they differ */
static int uct_cuda_ipc_ns_broker_token_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    int i;

    for (i = 0; i < UCT_CUDA_IPC_NS_TOKEN_SIZE; ++i) {
        diff |= a[i] ^ b[i];
    }
    /* no early exit above; this only turns the result into a boolean */
    return ((diff - 1) >> 8) & 1;
}


ucs_status_t uct_cuda_ipc_ns_broker_registry_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    ssize_t ret;

    while (len > 0) {
        ret = getrandom(p, len, 0);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            }
            ucs_error("cuda_ipc_ns: getrandom(%zu) failed: %m", len);
            return UCS_ERR_IO_ERROR;
        }
        p   += ret;
        len -= ret;
    }
    return UCS_OK;
}


void uct_cuda_ipc_ns_broker_registry_init(uct_cuda_ipc_ns_broker_registry_t *registry)
{
    pthread_mutex_init(&registry->lock, NULL);
    pthread_cond_init(&registry->copies_done, NULL);
    kh_init_inplace(uct_cuda_ipc_ns_broker_regs, &registry->regs);
}


void uct_cuda_ipc_ns_broker_registry_cleanup(uct_cuda_ipc_ns_broker_registry_t *registry,
                                             const char *name)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *reg, *next;

    /* registrations left behind by the caller: their fds are not ours */
    if (kh_size(&registry->regs) > 0) {
        ucs_debug("cuda_ipc_ns: broker %s: %u allocation ids still registered "
                  "at shutdown", name, kh_size(&registry->regs));
    }
    kh_foreach_value(&registry->regs, reg, {
        for (; reg != NULL; reg = next) {
            next = reg->next;
            ucs_free(reg->chunks);
            ucs_free(reg);
        }
    })
    kh_destroy_inplace(uct_cuda_ipc_ns_broker_regs, &registry->regs);
    pthread_cond_destroy(&registry->copies_done);
    pthread_mutex_destroy(&registry->lock);
}


/* Give @a reg a fresh token and link it under its id */
static ucs_status_t
uct_cuda_ipc_ns_broker_registry_link(uct_cuda_ipc_ns_broker_registry_t *registry,
                                     uct_cuda_ipc_ns_broker_registry_reg_t *reg,
                                     uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE])
{
    ucs_status_t status;
    khiter_t iter;
    int ret;

    status = uct_cuda_ipc_ns_broker_registry_random(reg->token, sizeof(reg->token));
    if (status != UCS_OK) {
        return status;
    }

    pthread_mutex_lock(&registry->lock);
    iter = kh_put(uct_cuda_ipc_ns_broker_regs, &registry->regs, reg->alloc_id,
                  &ret);
    if (ret < 0) {
        pthread_mutex_unlock(&registry->lock);
        ucs_error("cuda_ipc_ns: failed to register alloc_id 0x%" PRIx64
                  " with the broker", reg->alloc_id);
        return UCS_ERR_NO_MEMORY;
    }
    reg->next                      = (ret == 0) ? kh_val(&registry->regs, iter) :
                                                  NULL;
    kh_val(&registry->regs, iter)  = reg;
    pthread_mutex_unlock(&registry->lock);

    memcpy(token, reg->token, sizeof(reg->token));
    return UCS_OK;
}


/* A registration of @a kind under @a id, no fd: the caller fills in what
 * its kind holds, then publishes it */
static uct_cuda_ipc_ns_broker_registry_reg_t *
uct_cuda_ipc_ns_broker_reg_alloc(uct_cuda_ipc_ns_broker_reg_kind_t kind,
                                 uint64_t id)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;

    reg = ucs_calloc(1, sizeof(*reg), "cuda_ipc_ns_broker_reg");
    if (reg == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a broker registration");
        return NULL;
    }

    reg->kind     = kind;
    reg->alloc_id = id;
    reg->fd       = -1;
    return reg;
}


/* Link @a reg under a fresh token; on failure free it (not its fd: the
 * caller's until this succeeds) */
static ucs_status_t
uct_cuda_ipc_ns_broker_registry_publish(uct_cuda_ipc_ns_broker_registry_t *registry,
                                        uct_cuda_ipc_ns_broker_registry_reg_t *reg,
                                        uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                        uct_cuda_ipc_ns_broker_registry_reg_t **reg_p)
{
    ucs_status_t status;

    status = uct_cuda_ipc_ns_broker_registry_link(registry, reg, token);
    if (status != UCS_OK) {
        ucs_free(reg->chunks);
        ucs_free(reg);
        return status;
    }

    *reg_p = reg;
    return UCS_OK;
}


ucs_status_t
uct_cuda_ipc_ns_broker_registry_add(uct_cuda_ipc_ns_broker_registry_t *registry,
                                    int fd, uint64_t alloc_id,
                                    uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                    uct_cuda_ipc_ns_broker_registry_reg_t **reg_p)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;

    reg = uct_cuda_ipc_ns_broker_reg_alloc(UCT_CUDA_IPC_NS_REG_FD, alloc_id);
    if (reg == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    reg->fd = fd;
    return uct_cuda_ipc_ns_broker_registry_publish(registry, reg, token, reg_p);
}


ucs_status_t
uct_cuda_ipc_ns_broker_registry_add_chunks(uct_cuda_ipc_ns_broker_registry_t *registry,
                                           uint64_t reg_id, uint64_t base,
                                           const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                           uint32_t num_chunks,
                                           uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                           uct_cuda_ipc_ns_broker_registry_reg_t **reg_p)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;

    reg = uct_cuda_ipc_ns_broker_reg_alloc(UCT_CUDA_IPC_NS_REG_CHUNKS, reg_id);
    if (reg == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    reg->chunks = ucs_malloc(sizeof(*chunks) * num_chunks,
                             "cuda_ipc_ns_broker_chunks");
    if (reg->chunks == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate the layout of %u chunks",
                  num_chunks);
        ucs_free(reg);
        return UCS_ERR_NO_MEMORY;
    }

    memcpy(reg->chunks, chunks, sizeof(*chunks) * num_chunks);
    reg->num_chunks = num_chunks;
    reg->base       = base;
    return uct_cuda_ipc_ns_broker_registry_publish(registry, reg, token, reg_p);
}


ucs_status_t
uct_cuda_ipc_ns_broker_registry_add_range(uct_cuda_ipc_ns_broker_registry_t *registry,
                                          uint64_t reg_id, uint64_t base,
                                          uint64_t length, CUcontext ctx,
                                          int device,
                                          uint8_t token[UCT_CUDA_IPC_NS_TOKEN_SIZE],
                                          uct_cuda_ipc_ns_broker_registry_reg_t **reg_p)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;

    reg = uct_cuda_ipc_ns_broker_reg_alloc(UCT_CUDA_IPC_NS_REG_RANGE, reg_id);
    if (reg == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    reg->base   = base;
    reg->length = length;
    reg->ctx    = ctx;
    reg->device = device;
    return uct_cuda_ipc_ns_broker_registry_publish(registry, reg, token, reg_p);
}


void uct_cuda_ipc_ns_broker_registry_remove(uct_cuda_ipc_ns_broker_registry_t *registry,
                                            uct_cuda_ipc_ns_broker_registry_reg_t *reg)
{
    uct_cuda_ipc_ns_broker_registry_reg_t **pp;
    khiter_t iter;

    pthread_mutex_lock(&registry->lock);
    iter = kh_get(uct_cuda_ipc_ns_broker_regs, &registry->regs, reg->alloc_id);
    if (iter != kh_end(&registry->regs)) {
        for (pp = &kh_val(&registry->regs, iter); *pp != NULL;
             pp = &(*pp)->next) {
            if (*pp == reg) {
                *pp = reg->next;
                break;
            }
        }
        if (kh_val(&registry->regs, iter) == NULL) {
            kh_del(uct_cuda_ipc_ns_broker_regs, &registry->regs, iter);
        }
    }
    /* unlinked: no new copy starts; the ones running still use it */
    while (reg->copies > 0) {
        pthread_cond_wait(&registry->copies_done, &registry->lock);
    }
    pthread_mutex_unlock(&registry->lock);

    ucs_trace("cuda_ipc_ns: unregistered fd %d alloc_id 0x%" PRIx64, reg->fd,
              reg->alloc_id);
    /* wipe the secret before the memory goes back to the heap */
    memset(reg->token, 0, sizeof(reg->token));
    ucs_free(reg->chunks);
    ucs_free(reg);
}


/*
 * The registration of (@a id, @a token) of @a kind; with the lock held.
 * Every entry of the chain is compared: timing tells nothing of tokens.
 */
static uct_cuda_ipc_ns_broker_registry_reg_t *
uct_cuda_ipc_ns_broker_registry_find(uct_cuda_ipc_ns_broker_registry_t *registry,
                                     uint64_t id, const uint8_t *token,
                                     uct_cuda_ipc_ns_broker_reg_kind_t kind)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *reg, *found = NULL;
    khiter_t iter;

    iter = kh_get(uct_cuda_ipc_ns_broker_regs, &registry->regs, id);
    if (iter == kh_end(&registry->regs)) {
        return NULL;
    }

    for (reg = kh_val(&registry->regs, iter); reg != NULL; reg = reg->next) {
        if (uct_cuda_ipc_ns_broker_token_equal(reg->token, token) &&
            (reg->kind == kind) && (found == NULL)) {
            found = reg;
        }
    }
    return found;
}


int uct_cuda_ipc_ns_broker_registry_hand_out(uct_cuda_ipc_ns_broker_registry_t *registry,
                                             uint64_t alloc_id,
                                             const uint8_t *token,
                                             uct_cuda_ipc_ns_broker_registry_send_fd_func_t send,
                                             void *arg)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *found;

    pthread_mutex_lock(&registry->lock);
    found = uct_cuda_ipc_ns_broker_registry_find(registry, alloc_id, token,
                                                 UCT_CUDA_IPC_NS_REG_FD);
    if (found != NULL) {
        send(arg, found->fd);
    }
    pthread_mutex_unlock(&registry->lock);
    return found != NULL;
}


int uct_cuda_ipc_ns_broker_registry_layout(uct_cuda_ipc_ns_broker_registry_t *registry,
                                           uint64_t reg_id, const uint8_t *token,
                                           uint32_t first,
                                           uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                           uint32_t *count_p, uint32_t *total_p)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *found;

    pthread_mutex_lock(&registry->lock);
    found = uct_cuda_ipc_ns_broker_registry_find(registry, reg_id, token,
                                                 UCT_CUDA_IPC_NS_REG_CHUNKS);
    if ((found != NULL) && (first < found->num_chunks)) {
        *total_p = found->num_chunks;
        *count_p = ucs_min(found->num_chunks - first,
                           UCT_CUDA_IPC_NS_BROKER_LAYOUT_MAX);
        memcpy(chunks, found->chunks + first, sizeof(*chunks) * *count_p);
    } else {
        found = NULL;
    }
    pthread_mutex_unlock(&registry->lock);
    return found != NULL;
}


int uct_cuda_ipc_ns_broker_registry_hand_out_chunks(uct_cuda_ipc_ns_broker_registry_t *registry,
                                                    uint64_t reg_id,
                                                    const uint8_t *token,
                                                    uint32_t first,
                                                    uint32_t count,
                                                    uct_cuda_ipc_ns_broker_registry_export_chunk_func_t export_chunk,
                                                    void *arg)
{
    uct_cuda_ipc_ns_broker_registry_reg_t *found;
    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunk;
    uint32_t i;

    pthread_mutex_lock(&registry->lock);
    found = uct_cuda_ipc_ns_broker_registry_find(registry, reg_id, token,
                                                 UCT_CUDA_IPC_NS_REG_CHUNKS);
    if ((found != NULL) && (first < found->num_chunks) &&
        (count <= found->num_chunks - first)) {
        for (i = 0; i < count; ++i) {
            chunk = &found->chunks[first + i];
            export_chunk(arg, found->base + chunk->offset, chunk->size,
                   chunk->alloc_id);
        }
    } else {
        found = NULL;
    }
    pthread_mutex_unlock(&registry->lock);
    return found != NULL;
}


uct_cuda_ipc_ns_broker_proto_status_t
uct_cuda_ipc_ns_broker_registry_copy_begin(uct_cuda_ipc_ns_broker_registry_t *registry,
                                           uint64_t reg_id, const uint8_t *token,
                                           uint64_t offset, uint64_t length,
                                           uct_cuda_ipc_ns_broker_registry_range_t *range)
{
    uct_cuda_ipc_ns_broker_proto_status_t status;
    uct_cuda_ipc_ns_broker_registry_reg_t *found;

    pthread_mutex_lock(&registry->lock);
    found = uct_cuda_ipc_ns_broker_registry_find(registry, reg_id, token,
                                                 UCT_CUDA_IPC_NS_REG_RANGE);
    if (found == NULL) {
        status = UCT_CUDA_IPC_NS_BROKER_STATUS_NO_ENTRY;
    } else if ((offset > found->length) || (length > found->length - offset)) {
        status = UCT_CUDA_IPC_NS_BROKER_STATUS_RANGE;
    } else {
        ++found->copies;
        range->reg    = found;
        range->addr   = found->base + offset;
        range->ctx    = found->ctx;
        range->device = found->device;
        status        = UCT_CUDA_IPC_NS_BROKER_STATUS_OK;
    }
    pthread_mutex_unlock(&registry->lock);
    return status;
}


void uct_cuda_ipc_ns_broker_registry_copy_end(uct_cuda_ipc_ns_broker_registry_t *registry,
                                              const uct_cuda_ipc_ns_broker_registry_range_t *range)
{
    pthread_mutex_lock(&registry->lock);
    if (--range->reg->copies == 0) {
        pthread_cond_broadcast(&registry->copies_done);
    }
    pthread_mutex_unlock(&registry->lock);
}
