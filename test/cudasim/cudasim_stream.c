/*
 * cudasim: streams (one worker thread each, executing its queue in order),
 * events, host functions, memory copies and memset.
 *
 * The default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) are one
 * stream per context and process, with a worker thread like the others: the
 * legacy default stream. Its work is asynchronous as on a GPU (cuMemcpyDtoD,
 * cuMemsetD8 and pageable cuMemcpyHtoD return before the copy lands) and is
 * ordered with the blocking streams of its context as the driver orders it:
 * an operation queued on the legacy stream waits for the work already queued
 * on every blocking stream, and an operation queued on a blocking stream
 * waits for the work already queued on the legacy stream (an internal event
 * recorded on the one and waited for on the other). What the driver
 * documents as synchronous with the host stays so: a copy to host memory
 * returns when it is done, a host-to-host copy too, and a pageable
 * cuMemcpyHtoD first synchronizes the stream and returns once the source
 * was staged.
 */
#include "cudasim_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CUDASIM_STREAM_MAGIC 0x5374726du /* "Strm" */
#define CUDASIM_EVENT_MAGIC  0x45766e74u /* "Evnt" */

typedef enum {
    CUDASIM_OP_COPY,
    CUDASIM_OP_MEMSET,
    CUDASIM_OP_HOSTFN,
    CUDASIM_OP_CALLBACK,
    CUDASIM_OP_RECORD,
    CUDASIM_OP_WAIT
} cudasim_op_type_t;

/* which side(s) of a copy are device memory, re-validated at execution */
#define CUDASIM_DST_DEV 1
#define CUDASIM_SRC_DEV 2

typedef struct cudasim_op {
    cudasim_op_type_t  type;
    struct cudasim_op  *next;
    void               *dst;
    const void         *src;
    size_t             len;
    int                dev_sides;
    int                device;  /* whose access VMM memory needs; -1: any */
    unsigned char      value;
    CUhostFn           fn;
    CUstreamCallback   cb;
    void               *arg;
    CUevent            event;
    uint64_t           seq;
    CUstream           user_stream; /* the handle a callback gets */
    void               *staging;    /* freed when the op is done */
} cudasim_op_t;

struct CUstream_st {
    uint32_t           magic;
    CUcontext          ctx;
    unsigned           flags;
    cudasim_op_t       *head, *tail;
    int                destroyed;
    int                legacy;  /* the context's legacy default stream */
    pid_t              pid;     /* process that created it (fork) */
    uint64_t           enq_count;  /* operations queued so far */
    uint64_t           done_count; /* operations completed so far */
    CUresult           error;   /* sticky: an illegal access happened */
    pthread_cond_t     work_cond;
    pthread_t          thread;
    struct CUstream_st *next;
};

struct CUevent_st {
    uint32_t           magic;
    CUcontext          ctx;
    unsigned           flags;
    uint64_t           record_seq; /* number of cuEventRecord calls */
    uint64_t           done_seq;   /* highest completed record */
    int                refs;       /* user handle + queued operations */
    int                destroyed;
    struct CUevent_st  *next;
};

/* One lock and one "progress" condition for all streams and events */
static pthread_mutex_t cudasim_lock          = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  cudasim_progress_cond = PTHREAD_COND_INITIALIZER;
static CUstream        cudasim_streams;  /* including draining destroyed */
static CUevent         cudasim_events;   /* live (not destroyed) */
/* test hook: devices whose copy engine is held (bit = ordinal) */
static uint64_t        cudasim_held_devices;


/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static int cudasim_is_default_stream(CUstream s)
{
    return (s == NULL) || (s == CU_STREAM_LEGACY) ||
           (s == CU_STREAM_PER_THREAD);
}


/* with cudasim_lock held */
static int cudasim_stream_live(CUstream s)
{
    CUstream p;

    for (p = cudasim_streams; p != NULL; p = p->next) {
        if (p == s) {
            return !s->destroyed;
        }
    }
    return 0;
}


/* with cudasim_lock held */
static int cudasim_event_live(CUevent e)
{
    CUevent p;

    for (p = cudasim_events; p != NULL; p = p->next) {
        if (p == e) {
            return !e->destroyed;
        }
    }
    return 0;
}


/* with cudasim_lock held */
static void cudasim_event_put(CUevent e)
{
    CUevent *p;

    if (--e->refs > 0) {
        return;
    }
    for (p = &cudasim_events; *p != NULL; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            break;
        }
    }
    e->magic = 0;
    free(e);
}


static void cudasim_copy_delay(void)
{
    if (cudasim_cfg.copy_latency_us > 0) {
        usleep(cudasim_cfg.copy_latency_us);
    }
}


/* The error a stream's host functions and callbacks see: its own sticky
 * error, else its context's (an illegal address on another stream of the
 * context poisons it too) */
static CUresult cudasim_stream_error(CUstream s)
{
    if (s->error != CUDA_SUCCESS) {
        return s->error;
    }
    return (s->ctx != NULL) ? __atomic_load_n(&s->ctx->sticky, __ATOMIC_ACQUIRE) :
           CUDA_SUCCESS;
}


/* With the registry lock held: the copy engine's view of @a addr, a device
 * address when @a dev (its region's alias, *len cut to what is left of that
 * region), else host memory as it is */
static char *cudasim_engine_ptr(const void *addr, int dev, size_t *len)
{
    size_t avail;
    char *alias;

    if (!dev) {
        return (char*)addr;
    }
    alias = cudasim_region_alias((uintptr_t)addr, &avail);
    *len  = (avail < *len) ? avail : *len;
    return alias;
}


/* With the registry lock held and the op's ranges checked: run a copy or
 * memset, region by region (a range may span VMM mappings mapped back to
 * back), through the emulator's aliases of device memory */
static void cudasim_engine_run(const cudasim_op_t *op)
{
    const char *src = op->src;
    char *dst       = op->dst;
    size_t left     = op->len, n_dst, n_src;
    char *d, *s;

    while (left > 0) {
        n_dst = n_src = left;
        d     = cudasim_engine_ptr(dst, op->dev_sides & CUDASIM_DST_DEV, &n_dst);
        if (op->type == CUDASIM_OP_COPY) {
            s = cudasim_engine_ptr(src, op->dev_sides & CUDASIM_SRC_DEV,
                                   &n_src);
            n_dst = (n_src < n_dst) ? n_src : n_dst;
            cudasim_dma_copy(d, s, n_dst);
        } else {
            memset(d, op->value, n_dst);
        }
        dst  += n_dst;
        src   = (src != NULL) ? src + n_dst : NULL;
        left -= n_dst;
    }
}


/* Run a copy or memset; revalidates the device side(s) under the registry
 * lock, so memory cannot be unmapped underneath. */
static CUresult cudasim_exec_mem_op(const cudasim_op_t *op)
{
    CUresult res = CUDA_SUCCESS;

    cudasim_copy_delay();
    /* CUDASIM_FAULTS "stream-copy": the copy fails as the stream runs it,
     * as an illegal address does on a GPU (asynchronous, sticky) */
    res = cudasim_fault_check("stream-copy");
    if (res != CUDA_SUCCESS) {
        cudasim_log("injected failure of a stream operation: %d", (int)res);
        return res;
    }
    cudasim_registry_rdlock();
    if (((op->dev_sides & CUDASIM_DST_DEV) &&
         (cudasim_range_check((uintptr_t)op->dst, op->len, 1,
                              op->device) != 1)) ||
        ((op->dev_sides & CUDASIM_SRC_DEV) &&
         (cudasim_range_check((uintptr_t)op->src, op->len, 0,
                              op->device) != 1))) {
        res = CUDA_ERROR_ILLEGAL_ADDRESS;
    } else {
        cudasim_engine_run(op);
    }
    cudasim_registry_unlock();
    if (res != CUDA_SUCCESS) {
        cudasim_log("illegal address in stream operation: dst %p src %p "
                    "len %zu", op->dst, op->src, op->len);
    }
    return res;
}


/* with cudasim_lock held: op, at the head of s, is a copy or memset that the
 * copy-engine hold keeps from starting */
static int cudasim_op_held(CUstream s, const cudasim_op_t *op)
{
    return ((op->type == CUDASIM_OP_COPY) || (op->type == CUDASIM_OP_MEMSET)) &&
           !s->legacy && (s->ctx != NULL) && (s->ctx->device >= 0) && (s->ctx->device < 64) &&
           (cudasim_held_devices & (1ull << s->ctx->device));
}


/* Exported for tests: hold (hold != 0) or release the copy engine of device
 * @ordinal (-1: of every device). While held, no copy or memset starts on a
 * non-default stream of that device's context (one already running ends);
 * the stream waits at that op, so the ops after it wait too. Returns 0, or
 * -1 for a bad ordinal. */
CUDASIM_API int cudasim_hold_copies(int ordinal, int hold)
{
    uint64_t mask;

    if ((ordinal < -1) || (ordinal >= 64)) {
        return -1;
    }
    mask = (ordinal == -1) ? ~0ull : (1ull << ordinal);
    pthread_mutex_lock(&cudasim_lock);
    if (hold) {
        cudasim_held_devices |= mask;
    } else {
        cudasim_held_devices &= ~mask;
    }
    pthread_cond_broadcast(&cudasim_progress_cond);
    pthread_mutex_unlock(&cudasim_lock);
    return 0;
}


/* Whether stream @a s cannot make progress now: it is empty, or waits at a
 * held copy, or waits for an event not yet reached. Called with the lock. */
static int cudasim_stream_stalled(CUstream s)
{
    cudasim_op_t *op = s->head;

    return (op == NULL) || cudasim_op_held(s, op) ||
           ((op->type == CUDASIM_OP_WAIT) &&
            (op->event->done_seq < op->seq));
}


/* Exported for tests: wait until no stream can make progress (each one
 * stalled). Work that can run has run. Returns 0. (A host function or
 * callback that blocks forever keeps this from returning.) */
CUDASIM_API int cudasim_wait_quiescent(void)
{
    CUstream s;

    pthread_mutex_lock(&cudasim_lock);
again:
    for (s = cudasim_streams; s != NULL; s = s->next) {
        if (!cudasim_stream_stalled(s)) {
            pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
            goto again;
        }
    }
    pthread_mutex_unlock(&cudasim_lock);
    return 0;
}


/* Exported for tests: wait until stream @a stream cannot make progress, the
 * others as they are (one may be blocked in a host function). Returns 0, or
 * -1 for a handle that is no live stream. */
CUDASIM_API int cudasim_wait_stream_stalled(CUstream stream)
{
    pthread_mutex_lock(&cudasim_lock);
    if (!cudasim_stream_live(stream)) {
        pthread_mutex_unlock(&cudasim_lock);
        return -1;
    }
    while (!cudasim_stream_stalled(stream)) {
        pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
    }
    pthread_mutex_unlock(&cudasim_lock);
    return 0;
}


static void *cudasim_stream_worker(void *arg)
{
    CUstream s = arg;
    cudasim_op_t *op;
    CUstream *p;
    CUresult res;

    pthread_mutex_lock(&cudasim_lock);
    for (;;) {
        while ((s->head == NULL) && !s->destroyed) {
            pthread_cond_wait(&s->work_cond, &cudasim_lock);
        }
        if (s->head == NULL) {
            break; /* destroyed and drained */
        }
        op = s->head; /* stays queued while running: cuStreamQuery sees it */
        if (cudasim_op_held(s, op)) {
            /* the copy engine is held (test hook): wait for the release */
            pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
            continue;
        }

        switch (op->type) {
        case CUDASIM_OP_WAIT:
            while (op->event->done_seq < op->seq) {
                pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
            }
            cudasim_event_put(op->event);
            break;
        case CUDASIM_OP_RECORD:
            if (op->event->done_seq < op->seq) {
                op->event->done_seq = op->seq;
            }
            cudasim_event_put(op->event);
            break;
        case CUDASIM_OP_COPY:
        case CUDASIM_OP_MEMSET:
            pthread_mutex_unlock(&cudasim_lock);
            res = cudasim_exec_mem_op(op);
            pthread_mutex_lock(&cudasim_lock);
            if ((res != CUDA_SUCCESS) && (s->error == CUDA_SUCCESS)) {
                s->error = res;
                cudasim_ctx_poison(s->ctx, res);
            }
            break;
        case CUDASIM_OP_HOSTFN:
            /* cuda.h, cuLaunchHostFunc: "in contrast to
             * ::cuStreamAddCallback, the function will not be called in
             * the event of an error in the CUDA context" */
            if (cudasim_stream_error(s) != CUDA_SUCCESS) {
                break;
            }
            pthread_mutex_unlock(&cudasim_lock);
            op->fn(op->arg);
            pthread_mutex_lock(&cudasim_lock);
            break;
        case CUDASIM_OP_CALLBACK:
            /* cuda.h, CUstreamCallback: called with the error "of the
             * stream", also after a device error */
            res = cudasim_stream_error(s);
            pthread_mutex_unlock(&cudasim_lock);
            op->cb(op->user_stream, res, op->arg);
            pthread_mutex_lock(&cudasim_lock);
            break;
        }

        s->head = op->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        ++s->done_count;
        free(op->staging);
        free(op);
        pthread_cond_broadcast(&cudasim_progress_cond);
    }

    for (p = &cudasim_streams; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    pthread_cond_broadcast(&cudasim_progress_cond);
    pthread_mutex_unlock(&cudasim_lock);

    pthread_cond_destroy(&s->work_cond);
    s->magic = 0;
    free(s);
    return NULL;
}


/* with cudasim_lock held: wait until every stream matching is drained */
static void cudasim_wait_streams(CUcontext ctx, int blocking_only)
{
    CUstream s;

again:
    for (s = cudasim_streams; s != NULL; s = s->next) {
        if ((ctx != NULL) && (s->ctx != ctx)) {
            continue;
        }
        if (blocking_only && (s->flags & CU_STREAM_NON_BLOCKING)) {
            continue;
        }
        if (s->head != NULL) {
            pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
            goto again;
        }
    }
}


void cudasim_streams_sync_all(void)
{
    pthread_mutex_lock(&cudasim_lock);
    cudasim_wait_streams(NULL, 0);
    pthread_mutex_unlock(&cudasim_lock);
}


/* with cudasim_lock held: a new stream with its worker thread, or NULL */
static CUstream cudasim_stream_new(CUcontext ctx, unsigned flags, int legacy)
{
    pthread_attr_t attr;
    CUstream s;
    int ret;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->magic  = CUDASIM_STREAM_MAGIC;
    s->ctx    = ctx;
    s->flags  = flags;
    s->legacy = legacy;
    s->pid    = getpid();
    s->error  = CUDA_SUCCESS;
    pthread_cond_init(&s->work_cond, NULL);

    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    ret = pthread_create(&s->thread, &attr, cudasim_stream_worker, s);
    pthread_attr_destroy(&attr);
    if (ret != 0) {
        pthread_cond_destroy(&s->work_cond);
        free(s);
        return NULL;
    }
    s->next         = cudasim_streams;
    cudasim_streams = s;
    return s;
}


/* with cudasim_lock held: the legacy default stream of @ctx in this process,
 * created when @create (NULL when there is none or it cannot be created) */
static CUstream cudasim_legacy_stream(CUcontext ctx, int create)
{
    pid_t pid = getpid();
    CUstream s;

    for (s = cudasim_streams; s != NULL; s = s->next) {
        /* a fork()ed child has the structure but not the worker thread */
        if (s->legacy && (s->ctx == ctx) && (s->pid == pid)) {
            return s;
        }
    }
    return create ? cudasim_stream_new(ctx, 0, 1) : NULL;
}


/*
 * Resolve the stream of an operation: a default stream handle (NULL,
 * CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) gives the current context's legacy
 * default stream, another handle must be a live stream.
 */
static CUresult cudasim_stream_get(CUstream hStream, CUstream *s_p)
{
    CUcontext ctx;
    CUresult res;

    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    if (cudasim_is_default_stream(hStream)) {
        *s_p = cudasim_legacy_stream(ctx, 1);
        res  = (*s_p != NULL) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *s_p = hStream;
        res  = cudasim_stream_live(hStream) ? CUDA_SUCCESS :
                                              CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_unlock(&cudasim_lock);
    return res;
}


/* with cudasim_lock held: append op to s */
static uint64_t cudasim_append(CUstream s, cudasim_op_t *op)
{
    if ((op->type == CUDASIM_OP_WAIT) || (op->type == CUDASIM_OP_RECORD)) {
        ++op->event->refs;
    }
    op->next = NULL;
    if (s->tail == NULL) {
        s->head = op;
    } else {
        s->tail->next = op;
    }
    s->tail = op;
    pthread_cond_signal(&s->work_cond);
    return ++s->enq_count;
}


/* with cudasim_lock held: make @waiter wait for the work queued on @target
 * so far (an internal event recorded on @target and waited for on @waiter) */
static CUresult cudasim_stream_order(CUstream target, CUstream waiter)
{
    cudasim_op_t *rec, *wait;
    CUevent e;

    e    = calloc(1, sizeof(*e));
    rec  = calloc(1, sizeof(*rec));
    wait = calloc(1, sizeof(*wait));
    if ((e == NULL) || (rec == NULL) || (wait == NULL)) {
        free(e);
        free(rec);
        free(wait);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->magic    = CUDASIM_EVENT_MAGIC;
    e->ctx      = target->ctx;
    e->flags    = CU_EVENT_DISABLE_TIMING;
    e->refs     = 1;
    e->destroyed = 1; /* never a user's handle: not in cudasim_events */
    rec->type   = CUDASIM_OP_RECORD;
    rec->event  = e;
    rec->seq    = ++e->record_seq;
    wait->type  = CUDASIM_OP_WAIT;
    wait->event = e;
    wait->seq   = rec->seq;
    cudasim_append(target, rec);
    cudasim_append(waiter, wait);
    cudasim_event_put(e);
    return CUDA_SUCCESS;
}


/* with cudasim_lock held: the implicit synchronization of the legacy default
 * stream, before an operation is queued on s */
static CUresult cudasim_implicit_sync(CUstream s)
{
    CUstream t, legacy;
    CUresult res;

    if (s->legacy) {
        /* waits for all work queued on the blocking streams of its context */
        for (t = cudasim_streams; t != NULL; t = t->next) {
            if ((t != s) && !t->legacy && (t->ctx == s->ctx) &&
                !(t->flags & CU_STREAM_NON_BLOCKING) && (t->head != NULL)) {
                res = cudasim_stream_order(t, s);
                if (res != CUDA_SUCCESS) {
                    return res;
                }
            }
        }
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        /* a blocking stream waits for the work queued on the legacy one */
        legacy = cudasim_legacy_stream(s->ctx, 0);
        if ((legacy != NULL) && (legacy->head != NULL)) {
            return cudasim_stream_order(legacy, s);
        }
    }
    return CUDA_SUCCESS;
}


/* Queue op on s (resolved by cudasim_stream_get); takes ownership of op and
 * its staging buffer. *seq_p (when not NULL): the op's sequence number on
 * s, for cudasim_stream_wait_seq. */
static CUresult cudasim_enqueue(CUstream s, cudasim_op_t *op, uint64_t *seq_p)
{
    CUresult res;
    uint64_t seq;

    pthread_mutex_lock(&cudasim_lock);
    if (!s->legacy && !cudasim_stream_live(s)) {
        res = CUDA_ERROR_INVALID_HANDLE;
        goto err;
    }
    res = cudasim_implicit_sync(s);
    if (res != CUDA_SUCCESS) {
        goto err;
    }
    seq = cudasim_append(s, op);
    pthread_mutex_unlock(&cudasim_lock);
    if (seq_p != NULL) {
        *seq_p = seq;
    }
    return CUDA_SUCCESS;

err:
    pthread_mutex_unlock(&cudasim_lock);
    free(op->staging);
    free(op);
    return res;
}


/* Wait until the op numbered @seq on s (and all before it) completed; returns
 * the stream's sticky error */
static CUresult cudasim_stream_wait_seq(CUstream s, uint64_t seq)
{
    CUresult res;

    pthread_mutex_lock(&cudasim_lock);
    while (s->done_count < seq) {
        pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
    }
    res = s->error;
    pthread_mutex_unlock(&cudasim_lock);
    return res;
}


/* ------------------------------------------------------------------ */
/* Streams                                                            */
/* ------------------------------------------------------------------ */

CUDASIM_API CUresult CUDAAPI cuStreamCreate(CUstream *phStream,
                                            unsigned int Flags)
{
    CUcontext ctx;
    CUresult res;
    CUstream s;

    CUDASIM_ENTER("cuStreamCreate");
    if ((phStream == NULL) || (Flags & ~CU_STREAM_NON_BLOCKING)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    s = cudasim_stream_new(ctx, Flags, 0);
    pthread_mutex_unlock(&cudasim_lock);
    if (s == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }

    *phStream = s;
    return CUDA_SUCCESS;
}


static CUresult cudasim_stream_destroy(CUstream hStream)
{
    CUresult res;

    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (cudasim_is_default_stream(hStream)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&cudasim_lock);
    if (!cudasim_stream_live(hStream)) {
        pthread_mutex_unlock(&cudasim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* returns at once; queued work completes, then the worker frees it */
    hStream->destroyed = 1;
    pthread_cond_signal(&hStream->work_cond);
    pthread_mutex_unlock(&cudasim_lock);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    CUDASIM_ENTER("cuStreamDestroy");
    return cudasim_stream_destroy(hStream);
}


CUresult CUDAAPI cudasim_cuStreamDestroy_v1(CUstream hStream)
{
    CUDASIM_ENTER("cuStreamDestroy");
    return cudasim_stream_destroy(hStream);
}


CUDASIM_API CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    CUresult res;
    CUstream s;

    CUDASIM_ENTER("cuStreamQuery");
    res = cudasim_stream_get(hStream, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    res = (s->head != NULL) ? CUDA_ERROR_NOT_READY : s->error;
    pthread_mutex_unlock(&cudasim_lock);
    return res;
}


CUresult cudasim_default_stream_sync(void)
{
    CUresult res;
    CUstream s;

    res = cudasim_stream_get(NULL, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    cudasim_wait_streams(s->ctx, 1);
    res = s->error;
    pthread_mutex_unlock(&cudasim_lock);
    return res;
}


CUDASIM_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    CUresult res;
    CUstream s;

    CUDASIM_ENTER("cuStreamSynchronize");
    res = cudasim_stream_get(hStream, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    if (s->legacy) {
        /* the legacy stream and the blocking streams of its context */
        cudasim_wait_streams(s->ctx, 1);
    } else {
        while (s->head != NULL) {
            pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
        }
    }
    res = s->error;
    pthread_mutex_unlock(&cudasim_lock);
    return res;
}


/*
 * cuda.h, cuCtxSynchronize: "Blocks until the device has completed all
 * preceding requested tasks", those of every stream of the current context,
 * non-blocking ones too; "returns an error if one of the preceding tasks
 * failed" (the context's sticky error).
 */
static int cudasim_sync_op_waiters;  /* threads in a synchronous memop */
static int cudasim_ctx_sync_waiters; /* threads in cuCtxSynchronize */

CUDASIM_API CUresult CUDAAPI cuCtxSynchronize(void)
{
    CUcontext ctx;
    CUresult res;

    CUDASIM_ENTER("cuCtxSynchronize");
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    __atomic_add_fetch(&cudasim_ctx_sync_waiters, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&cudasim_lock);
    cudasim_wait_streams(ctx, 0);
    pthread_mutex_unlock(&cudasim_lock);
    __atomic_sub_fetch(&cudasim_ctx_sync_waiters, 1, __ATOMIC_RELEASE);
    return __atomic_load_n(&ctx->sticky, __ATOMIC_ACQUIRE);
}


/* Exported for tests: the threads in cuCtxSynchronize now */
CUDASIM_API int cudasim_ctx_sync_waiting(void)
{
    return __atomic_load_n(&cudasim_ctx_sync_waiters, __ATOMIC_ACQUIRE);
}


CUDASIM_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream,
                                               CUevent hEvent,
                                               unsigned int Flags)
{
    cudasim_op_t *op;
    CUresult res;
    uint64_t seq;
    CUstream s;

    CUDASIM_ENTER("cuStreamWaitEvent");
    if (Flags & ~CU_EVENT_WAIT_EXTERNAL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_stream_get(hStream, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }

    pthread_mutex_lock(&cudasim_lock);
    if (!cudasim_event_live(hEvent)) {
        pthread_mutex_unlock(&cudasim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* waits for the most recent cuEventRecord at the time of this call */
    seq = hEvent->record_seq;
    if (hEvent->done_seq >= seq) {
        pthread_mutex_unlock(&cudasim_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cudasim_lock);

    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->type  = CUDASIM_OP_WAIT;
    op->event = hEvent;
    op->seq   = seq;
    return cudasim_enqueue(s, op, NULL);
}


CUDASIM_API CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                              void *userData)
{
    cudasim_op_t *op;
    CUresult res;
    CUstream s;

    CUDASIM_ENTER("cuLaunchHostFunc");
    if (fn == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_stream_get(hStream, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->type = CUDASIM_OP_HOSTFN;
    op->fn   = fn;
    op->arg  = userData;
    return cudasim_enqueue(s, op, NULL);
}


CUDASIM_API CUresult CUDAAPI cuStreamAddCallback(CUstream hStream,
                                                 CUstreamCallback callback,
                                                 void *userData,
                                                 unsigned int flags)
{
    cudasim_op_t *op;
    CUresult res;
    CUstream s;

    CUDASIM_ENTER("cuStreamAddCallback");
    if ((callback == NULL) || (flags != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_stream_get(hStream, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->type        = CUDASIM_OP_CALLBACK;
    op->cb          = callback;
    op->arg         = userData;
    op->user_stream = hStream;
    return cudasim_enqueue(s, op, NULL);
}


/* ------------------------------------------------------------------ */
/* Copies and memset                                                  */
/* ------------------------------------------------------------------ */

/* Whether a copy or memset returns only once it is done */
static int cudasim_op_waits(cudasim_op_type_t type, int dev_sides,
                            int host_sync)
{
    if ((type != CUDASIM_OP_COPY) || (dev_sides & CUDASIM_DST_DEV)) {
        return 0; /* to device memory: asynchronous */
    }
    if (!(dev_sides & CUDASIM_SRC_DEV)) {
        return 1; /* host to host: synchronous */
    }
    return host_sync; /* device to host: cuMemcpyDtoH, not ...Async */
}


/* whether device memory @a p (@a is_dev) has SYNC_MEMOPS set (registry
 * lock held) */
static int cudasim_op_sync_memops(const void *p, int is_dev)
{
    const cudasim_region_t *r;

    if (!is_dev) {
        return 0;
    }
    r = cudasim_region_find((uintptr_t)p);
    return (r != NULL) && r->sync_memops;
}


/*
 * Validate and queue a copy or memset. need_dev: sides that must be device
 * memory; other sides are classified (unknown = host memory). host_sync: a
 * call without a stream argument (cuMemcpy, cuMemcpyDtoD, cuMemsetD8, ...),
 * whose synchronization with the host the driver documents ("API
 * synchronization behavior"): device to device and memset return at once, to
 * host memory when the copy is done, pageable host to device once the source
 * was staged (after a synchronization of the stream). A copy from host to
 * host memory is synchronous with either kind of call.
 */
static CUresult cudasim_mem_op(cudasim_op_type_t type, void *dst,
                               const void *src, size_t len,
                               unsigned char value, int need_dev,
                               CUstream hStream, int host_sync)
{
    int chk, dev_sides = 0, device, wait, sync_memops;
    cudasim_op_t *op;
    uint64_t seq;
    CUresult res;
    CUstream s;

    res = cudasim_stream_get(hStream, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (len == 0) {
        return CUDA_SUCCESS;
    }
    /* a copy on a stream runs on its context's device: VMM memory must have
     * granted that device access (cuMemSetAccess); the default stream (the
     * tests' helpers) accepts any device's access */
    device = s->legacy ? -1 : s->ctx->device;

    cudasim_registry_rdlock();
    chk = cudasim_range_check((uintptr_t)dst, len, 1, device);
    if ((chk == 0) || ((chk < 0) && (need_dev & CUDASIM_DST_DEV))) {
        cudasim_registry_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    dev_sides |= (chk > 0) ? CUDASIM_DST_DEV : 0;
    if (type == CUDASIM_OP_COPY) {
        chk = cudasim_range_check((uintptr_t)src, len, 0, device);
        if ((chk == 0) || ((chk < 0) && (need_dev & CUDASIM_SRC_DEV))) {
            cudasim_registry_unlock();
            return CUDA_ERROR_INVALID_VALUE;
        }
        dev_sides |= (chk > 0) ? CUDASIM_SRC_DEV : 0;
    }
    /* a synchronous call in a context with CU_CTX_SYNC_MEMOPS
     * (cuCtxSetFlags, cudasim_device.c), or on memory with
     * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (cuPointerSetAttribute,
     * cudasim_mem.c), returns once done */
    sync_memops = host_sync &&
                  ((__atomic_load_n(&s->ctx->flags, __ATOMIC_ACQUIRE) &
                    CU_CTX_SYNC_MEMOPS) ||
                   cudasim_op_sync_memops(dst, dev_sides & CUDASIM_DST_DEV) ||
                   cudasim_op_sync_memops(src, dev_sides & CUDASIM_SRC_DEV));
    cudasim_registry_unlock();

    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->type      = type;
    op->dst       = dst;
    op->src       = src;
    op->len       = len;
    op->value     = value;
    op->dev_sides = dev_sides;
    op->device    = device;

    wait = cudasim_op_waits(type, dev_sides, host_sync) || sync_memops;
    if (host_sync && (type == CUDASIM_OP_COPY) &&
        (dev_sides == CUDASIM_DST_DEV)) {
        /* pageable host to device: a stream synchronization, then the source
         * is staged and the call returns before the copy lands */
        pthread_mutex_lock(&cudasim_lock);
        seq = s->enq_count;
        pthread_mutex_unlock(&cudasim_lock);
        (void)cudasim_stream_wait_seq(s, seq);
        op->staging = malloc(len);
        if (op->staging == NULL) {
            free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(op->staging, src, len);
        op->src = op->staging;
    }

    res = cudasim_enqueue(s, op, &seq);
    if ((res != CUDA_SUCCESS) || !wait) {
        return res;
    }
    __atomic_add_fetch(&cudasim_sync_op_waiters, 1, __ATOMIC_RELEASE);
    res = cudasim_stream_wait_seq(s, seq);
    __atomic_sub_fetch(&cudasim_sync_op_waiters, 1, __ATOMIC_RELEASE);
    return res;
}


/* Exported for tests: the threads waiting in a synchronous copy or memset
 * for it to land */
CUDASIM_API int cudasim_sync_op_waiting(void)
{
    return __atomic_load_n(&cudasim_sync_op_waiters, __ATOMIC_ACQUIRE);
}


#define CUDASIM_DEV(_p) ((void*)(uintptr_t)(_p))

CUDASIM_API CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src,
                                      size_t ByteCount)
{
    CUDASIM_ENTER("cuMemcpy");
    return cudasim_mem_op(CUDASIM_OP_COPY, CUDASIM_DEV(dst), CUDASIM_DEV(src),
                          ByteCount, 0, 0, NULL, 1);
}


CUDASIM_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src,
                                           size_t ByteCount, CUstream hStream)
{
    CUDASIM_ENTER("cuMemcpyAsync");
    return cudasim_mem_op(CUDASIM_OP_COPY, CUDASIM_DEV(dst), CUDASIM_DEV(src),
                          ByteCount, 0, 0, hStream, 0);
}


CUDASIM_API CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice,
                                          CUdeviceptr srcDevice,
                                          size_t ByteCount)
{
    CUDASIM_ENTER("cuMemcpyDtoD");
    return cudasim_mem_op(CUDASIM_OP_COPY, CUDASIM_DEV(dstDevice),
                          CUDASIM_DEV(srcDevice), ByteCount, 0,
                          CUDASIM_DST_DEV | CUDASIM_SRC_DEV, NULL, 1);
}


CUDASIM_API CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice,
                                               CUdeviceptr srcDevice,
                                               size_t ByteCount,
                                               CUstream hStream)
{
    CUDASIM_ENTER("cuMemcpyDtoDAsync");
    return cudasim_mem_op(CUDASIM_OP_COPY, CUDASIM_DEV(dstDevice),
                          CUDASIM_DEV(srcDevice), ByteCount, 0,
                          CUDASIM_DST_DEV | CUDASIM_SRC_DEV, hStream, 0);
}


CUDASIM_API CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice,
                                          const void *srcHost,
                                          size_t ByteCount)
{
    CUDASIM_ENTER("cuMemcpyHtoD");
    return cudasim_mem_op(CUDASIM_OP_COPY, CUDASIM_DEV(dstDevice), srcHost,
                          ByteCount, 0, CUDASIM_DST_DEV, NULL, 1);
}


CUDASIM_API CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice,
                                               const void *srcHost,
                                               size_t ByteCount,
                                               CUstream hStream)
{
    CUDASIM_ENTER("cuMemcpyHtoDAsync");
    return cudasim_mem_op(CUDASIM_OP_COPY, CUDASIM_DEV(dstDevice), srcHost,
                          ByteCount, 0, CUDASIM_DST_DEV, hStream, 0);
}


CUDASIM_API CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice,
                                          size_t ByteCount)
{
    CUDASIM_ENTER("cuMemcpyDtoH");
    return cudasim_mem_op(CUDASIM_OP_COPY, dstHost, CUDASIM_DEV(srcDevice),
                          ByteCount, 0, CUDASIM_SRC_DEV, NULL, 1);
}


CUDASIM_API CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost,
                                               CUdeviceptr srcDevice,
                                               size_t ByteCount,
                                               CUstream hStream)
{
    CUDASIM_ENTER("cuMemcpyDtoHAsync");
    return cudasim_mem_op(CUDASIM_OP_COPY, dstHost, CUDASIM_DEV(srcDevice),
                          ByteCount, 0, CUDASIM_SRC_DEV, hStream, 0);
}


CUDASIM_API CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice,
                                        unsigned char uc, size_t N)
{
    CUDASIM_ENTER("cuMemsetD8");
    return cudasim_mem_op(CUDASIM_OP_MEMSET, CUDASIM_DEV(dstDevice), NULL, N,
                          uc, CUDASIM_DST_DEV, NULL, 1);
}


CUDASIM_API CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice,
                                             unsigned char uc, size_t N,
                                             CUstream hStream)
{
    CUDASIM_ENTER("cuMemsetD8Async");
    return cudasim_mem_op(CUDASIM_OP_MEMSET, CUDASIM_DEV(dstDevice), NULL, N,
                          uc, CUDASIM_DST_DEV, hStream, 0);
}


/* ------------------------------------------------------------------ */
/* Events                                                             */
/* ------------------------------------------------------------------ */

CUDASIM_API CUresult CUDAAPI cuEventCreate(CUevent *phEvent,
                                           unsigned int Flags)
{
    const unsigned all = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                         CU_EVENT_INTERPROCESS;
    CUcontext ctx;
    CUresult res;
    CUevent e;

    CUDASIM_ENTER("cuEventCreate");
    if ((phEvent == NULL) || (Flags & ~all) ||
        ((Flags & CU_EVENT_INTERPROCESS) &&
         !(Flags & CU_EVENT_DISABLE_TIMING))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    res = cudasim_current_ctx(&ctx);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->magic = CUDASIM_EVENT_MAGIC;
    e->ctx   = ctx;
    e->flags = Flags;
    e->refs  = 1;

    pthread_mutex_lock(&cudasim_lock);
    e->next        = cudasim_events;
    cudasim_events = e;
    pthread_mutex_unlock(&cudasim_lock);

    *phEvent = e;
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    cudasim_op_t *op;
    CUresult res;
    CUstream s;

    CUDASIM_ENTER("cuEventRecord");
    res = cudasim_stream_get(hStream, &s);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }

    pthread_mutex_lock(&cudasim_lock);
    /* cuda.h: "hEvent and hStream must be from the same context otherwise
     * CUDA_ERROR_INVALID_HANDLE is returned" */
    if (!cudasim_event_live(hEvent) || (hEvent->ctx != s->ctx)) {
        pthread_mutex_unlock(&cudasim_lock);
        free(op);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    op->type  = CUDASIM_OP_RECORD;
    op->event = hEvent;
    op->seq   = ++hEvent->record_seq;
    pthread_mutex_unlock(&cudasim_lock);
    /* a record can only overtake another record of the same event across
     * streams; done_seq keeps the maximum, as the real driver's semantics
     * ("the most recent record") need; cudasim_enqueue checks the stream */
    return cudasim_enqueue(s, op, NULL);
}


CUDASIM_API CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    CUresult res;

    CUDASIM_ENTER("cuEventQuery");
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    if (!cudasim_event_live(hEvent)) {
        res = CUDA_ERROR_INVALID_HANDLE;
    } else if (hEvent->done_seq < hEvent->record_seq) {
        res = CUDA_ERROR_NOT_READY;
    } else {
        res = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cudasim_lock);
    return res;
}


CUDASIM_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    CUresult res;
    uint64_t seq;

    CUDASIM_ENTER("cuEventSynchronize");
    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    if (!cudasim_event_live(hEvent)) {
        pthread_mutex_unlock(&cudasim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    seq = hEvent->record_seq;
    ++hEvent->refs;
    while (hEvent->done_seq < seq) {
        pthread_cond_wait(&cudasim_progress_cond, &cudasim_lock);
    }
    cudasim_event_put(hEvent);
    pthread_mutex_unlock(&cudasim_lock);
    return CUDA_SUCCESS;
}


static CUresult cudasim_event_destroy(CUevent hEvent)
{
    CUresult res;

    res = cudasim_current_ctx(NULL);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    pthread_mutex_lock(&cudasim_lock);
    if (!cudasim_event_live(hEvent)) {
        pthread_mutex_unlock(&cudasim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* resources go once queued records/waits are done with it */
    hEvent->destroyed = 1;
    cudasim_event_put(hEvent);
    pthread_mutex_unlock(&cudasim_lock);
    return CUDA_SUCCESS;
}


CUDASIM_API CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    CUDASIM_ENTER("cuEventDestroy");
    return cudasim_event_destroy(hEvent);
}


CUresult CUDAAPI cudasim_cuEventDestroy_v1(CUevent hEvent)
{
    CUDASIM_ENTER("cuEventDestroy");
    return cudasim_event_destroy(hEvent);
}
