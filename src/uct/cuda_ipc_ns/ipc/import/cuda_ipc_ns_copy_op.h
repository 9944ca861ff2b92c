/*
 * cuda_ipc_ns: what a copy by the owner is made of, on the importer's side
 * (docs/owner-copies.md): the ops of an endpoint, the COPY requests owed an
 * answer, the session with one owner they go through, and the buffers the
 * owner holds for it. The sessions (cuda_ipc_ns_copies.h) and the
 * staged ops (cuda_ipc_ns_staged.h) share them.
 */
#ifndef UCT_CUDA_IPC_NS_COPY_OP_H
#define UCT_CUDA_IPC_NS_COPY_OP_H

#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_broker_proto.h"
#include "cuda_ipc_ns_staging.h"
#include "cuda_ipc_ns_cq.h"
#include "cuda_ipc_ns_op.h"

#include <uct/api/uct.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/queue_types.h>


/*
 * Buffers we count on the owner holding for a session. The owner keeps the
 * UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX most recently named ones (in request
 * order, as we name them), so the fewer most recent ones we remember are
 * always among them: a request without the fd never finds its buffer gone.
 */
#define UCT_CUDA_IPC_NS_COPY_SENT_MAX  8

/* Local elements (iov entries times their count) of one put or get */
#define UCT_CUDA_IPC_NS_COPY_ELEMS_MAX 16


/* Called from progress with the op list of an endpoint that had copies
 * outstanding on a session that ended (its owner died or broke the
 * protocol), or whose op with no completion failed */
typedef void (*uct_cuda_ipc_ns_copy_op_failed_func_t)(uct_cuda_ipc_ns_op_list_t *ops);


/* The copy sessions of one interface */
typedef struct uct_cuda_ipc_ns_copy_op_sessions {
    ucs_list_link_t                                 sessions;
    /* requests owed answers, staged ops not completed, and sessions to
     * end (their socket broke): all */
    unsigned                                        outstanding;
    unsigned                                        max_requests; /* per session */
    unsigned                                        staging_slots; /* per session */
    size_t                                          staging_slot_size;
    uct_cuda_ipc_ns_staging_kind_t                  staging_kind;
    int                                             wakeup_fd;   /* epoll set */
    uct_cuda_ipc_ns_cq_t                            *cq;  /* runs the staging copies */
    const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx;
    uct_cuda_ipc_ns_copy_op_failed_func_t           ep_failed;
    ucs_mpool_t                                     op_mp; /* uct_cuda_ipc_ns_copy_op_t */
} uct_cuda_ipc_ns_copy_op_sessions_t;


/* A local element of an op */
typedef struct uct_cuda_ipc_ns_copy_op_elem {
    char   *ptr;
    size_t length;
} uct_cuda_ipc_ns_copy_op_elem_t;


/*
 * One put or get: one request per local element, or (staged) one chunk of
 * at most a slot at a time through a staging ring of its session. A staged
 * op remembers where its next chunk starts, and waits in its ring's queue
 * while it has chunks to issue and no slot is free.
 */
typedef struct uct_cuda_ipc_ns_copy_op {
    uct_cuda_ipc_ns_op_t           super;      /* of OWNER kind */
    /* requests owed an answer; staged: slots it holds */
    unsigned                       unanswered;
    ucs_status_t                   status;     /* first error */
    int                            is_put;
    uint64_t                       reg_id;     /* the key's, kept for later */
    uint8_t                        token[UCT_CUDA_IPC_NS_TOKEN_SIZE];
    uint8_t                        dev_uuid[UCT_CUDA_IPC_NS_UUID_SIZE];
    uint64_t                       offset;     /* remote; staged: next chunk's */
    unsigned                       num_elems;
    uct_cuda_ipc_ns_copy_op_elem_t elems[UCT_CUDA_IPC_NS_COPY_ELEMS_MAX];
    /* staged ops only */
    int                            posting;    /* its post has not returned */
    int                            in_queue;   /* in its ring's waiting ops */
    ucs_list_link_t                queue;
    size_t                         chunk;      /* bytes of a chunk, at most */
    /* put short/bcopy: the caller's buffer is copied into each slot before
     * the post returns */
    int                            copy_in_now;
    /* get bcopy: the data lands in @a bounce (ours), handed to unpack_cb
     * before the completion */
    void                           *bounce;
    uct_unpack_callback_t          unpack_cb;
    void                           *unpack_arg;
    unsigned                       elem;       /* of the next chunk */
    size_t                         elem_off;   /* in it */
} uct_cuda_ipc_ns_copy_op_t;


/* What a staging slot is doing */
typedef enum {
    UCT_CUDA_IPC_NS_SLOT_FREE,
    /* our copy runs: buffer -> slot for a put (first), slot -> buffer for a
     * get (after the owner's) */
    UCT_CUDA_IPC_NS_SLOT_COPY,
    UCT_CUDA_IPC_NS_SLOT_REQUEST,    /* the owner's copy: answer owed */
    UCT_CUDA_IPC_NS_SLOT_RETRY_COPY, /* our copy waits for a cq op */
    UCT_CUDA_IPC_NS_SLOT_RETRY_SEND  /* the request waits for socket room */
} uct_cuda_ipc_ns_copy_op_slot_state_t;


struct uct_cuda_ipc_ns_copy_op_session;
struct uct_cuda_ipc_ns_copy_op_ring;

/* One slot of a staging ring, and the chunk it carries */
typedef struct uct_cuda_ipc_ns_copy_op_slot {
    uct_completion_t                     comp;    /* of our copy */
    struct uct_cuda_ipc_ns_copy_op_ring  *ring;
    uct_cuda_ipc_ns_copy_op_t            *op;     /* NULL: free */
    unsigned                             index;
    uct_cuda_ipc_ns_copy_op_slot_state_t state;
    char                                 *local;  /* the chunk */
    size_t                               length;
    uint64_t                             offset;  /* in the registration */
} uct_cuda_ipc_ns_copy_op_slot_t;


/*
 * A staging ring of a session: one per kind of memory (device or pinned
 * host) and local device, opened by the first op that needs it, so that a
 * session serves buffers of every device and owners' memory on GPUs we can
 * and cannot use at once. Its staged ops wait for its slots in FIFO order.
 */
typedef struct uct_cuda_ipc_ns_copy_op_ring {
    ucs_list_link_t                        list;        /* in its session's */
    struct uct_cuda_ipc_ns_copy_op_session *session;
    uct_cuda_ipc_ns_staging_t              staging;     /* its memory */
    unsigned                               free_slots;
    unsigned                               retry_slots; /* RETRY_COPY or _SEND */
    ucs_list_link_t                        waiting;     /* staged ops, FIFO */
    uct_cuda_ipc_ns_op_list_t              ops;         /* our copies of it */
    uct_cuda_ipc_ns_cq_stream_t            *stream;
    uct_cuda_ipc_ns_copy_op_slot_t         slots[];     /* staging.num_slots */
} uct_cuda_ipc_ns_copy_op_ring_t;


/* A local buffer the owner holds (mapped for the key's device) */
typedef struct uct_cuda_ipc_ns_copy_op_sent {
    uint64_t buf_id;
    uint64_t buf_size;
    uint32_t flags;    /* its memory's (uct_cuda_ipc_ns_staging_ops_t) */
    uint8_t  dev_uuid[UCT_CUDA_IPC_NS_UUID_SIZE];
    uint64_t last_use;
} uct_cuda_ipc_ns_copy_op_sent_t;


/* One COPY request owed an answer */
typedef struct uct_cuda_ipc_ns_copy_op_req {
    ucs_list_link_t                list;    /* in its session's reqs */
    uint64_t                       seq;     /* on the wire, the session's */
    uint64_t                       reg_id;  /* the answer must name it */
    uct_cuda_ipc_ns_copy_op_t      *op;
    uct_cuda_ipc_ns_copy_op_slot_t *slot;   /* a staged chunk's, or NULL */
    /* the buffer it names, and whether its fd went with it: the owner
     * holds the buffer once such a request was answered OK (a refusal
     * before the buffer, a wrong token say, leaves it unmapped) */
    uct_cuda_ipc_ns_copy_op_sent_t buf;
    int                            carried_fd;
} uct_cuda_ipc_ns_copy_op_req_t;


/* A connection to one owner's broker */
typedef struct uct_cuda_ipc_ns_copy_op_session {
    ucs_list_link_t                    list;      /* in the iface's sessions */
    uint32_t                           pid;       /* the owner */
    uint64_t                           pid_ns;
    uint64_t                           start_time;
    uint8_t                            addr_len;  /* its broker */
    char                               addr[UCT_CUDA_IPC_NS_BROKER_ADDR_MAX];
    int                                sock;
    int                                in_wakeup; /* sock in the wakeup set */
    ucs_list_link_t                    reqs;      /* owed answers */
    unsigned                           num_reqs;
    uint64_t                           next_seq;
    uint64_t                           clock;     /* of the sent buffers' use */
    unsigned                           num_sent;
    uct_cuda_ipc_ns_copy_op_sent_t     sent[UCT_CUDA_IPC_NS_COPY_SENT_MAX];
    uct_cuda_ipc_ns_copy_op_sessions_t *copies;
    int                                closing;   /* no new staged chunk */
    /* its socket failed (a send): progress ends the session, which takes
     * no new op meanwhile; never ended from a post, which may run in a
     * completion callback of its ops (docs/owner-copies.md, "Failures") */
    ucs_status_t                       send_status;
    ucs_list_link_t                    rings;     /* uct_cuda_ipc_ns_copy_op_ring_t */
} uct_cuda_ipc_ns_copy_op_session_t;


/* A local element: its allocation as the owner maps it */
typedef struct uct_cuda_ipc_ns_copy_op_local {
    uint64_t base;
    uint64_t size;
    uint64_t buf_id;
    const uct_cuda_ipc_ns_staging_ops_t *ops;     /* its kind of memory */
    const uct_cuda_ipc_ns_staging_t     *staging; /* a ring's, or NULL */
} uct_cuda_ipc_ns_copy_op_local_t;


/* The local elements of @a iov (each entry's count, a stride apart; empty
 * ones skipped) into @a op: UCS_ERR_UNSUPPORTED past
 * UCT_CUDA_IPC_NS_COPY_ELEMS_MAX */
ucs_status_t uct_cuda_ipc_ns_copy_op_set_iov(uct_cuda_ipc_ns_copy_op_t *op,
                                             const uct_iov_t *iov,
                                             size_t iovcnt);

/* A new op on the registration of @a key, at @a offset in it, its local
 * elements still to set, not in a list yet; NULL when out of memory */
uct_cuda_ipc_ns_copy_op_t *
uct_cuda_ipc_ns_copy_op_new(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                            const uct_cuda_ipc_ns_rkey_info_t *key,
                            uint64_t offset, int is_put,
                            uct_completion_t *comp);

/* @a op back to the pool, never completed (its post failed) */
void uct_cuda_ipc_ns_copy_op_free(uct_cuda_ipc_ns_copy_op_t *op);

/* Complete @a op (uct_cuda_ipc_ns_op_complete) and free it. An op with no
 * completion (put short/bcopy returned UCS_OK; a zero-copy op posted with
 * none) that failed reports its endpoint failed: nothing else would tell
 * that its data was lost */
void uct_cuda_ipc_ns_copy_op_complete(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                      uct_cuda_ipc_ns_copy_op_t *op);

/* Add or remove the session's socket from the wakeup set: it is there while
 * answers are owed, so that an idle session (or one whose owner closed it)
 * never makes a waiter spin */
void uct_cuda_ipc_ns_copy_op_wakeup(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                                         uct_cuda_ipc_ns_copy_op_session_t *session,
                                         int in_wakeup);

/* The owner holds @a buf: no fd needed */
uct_cuda_ipc_ns_copy_op_sent_t *
uct_cuda_ipc_ns_copy_op_sent_find(uct_cuda_ipc_ns_copy_op_session_t *session,
                               const uct_cuda_ipc_ns_copy_op_sent_t *buf);

/* The owner mapped @a buf: remembered, replacing the least recently named
 * one */
void uct_cuda_ipc_ns_copy_op_sent_add(uct_cuda_ipc_ns_copy_op_session_t *session,
                                   const uct_cuda_ipc_ns_copy_op_sent_t *buf);

/* Send the request of one element of @a op (@a slot NULL) or of @a slot's
 * staged chunk, between [@a ptr, + @a length) of @a local and @a offset in
 * the op's registration: owed an answer on success (UCS_ERR_TIMED_OUT: no
 * room in the socket now) */
ucs_status_t
uct_cuda_ipc_ns_copy_op_send(uct_cuda_ipc_ns_copy_op_sessions_t *copies,
                          uct_cuda_ipc_ns_copy_op_session_t *session,
                          const uct_cuda_ipc_ns_copy_op_local_t *local,
                          const void *ptr, size_t length, uint64_t offset,
                          uct_cuda_ipc_ns_copy_op_t *op,
                          uct_cuda_ipc_ns_copy_op_slot_t *slot);

#endif
