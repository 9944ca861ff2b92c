/*
 * cuda_ipc_ns: process-wide cache of peers' allocations mapped here
 * (docs/architecture.md, "Remote mapping cache").
 *
 * Two levels: peers, keyed by identity (system id, PID namespace, pid, start
 * time), and in each peer its regions, keyed by (allocation base in the
 * owner, local device). A region whose allocation id (VMM) or IPC handle
 * (legacy) differs from the key's at the same base is stale: it is replaced,
 * never reused.
 *
 * Concurrency: a hit takes only its peer's read lock (no global lock, no
 * driver call, no syscall) and pins the region with an atomic reference. A
 * miss maps with no lock held, then inserts under the cache lock. Eviction
 * (LRU approximated by a second-chance clock) never unmaps a pinned region:
 * the last unpin does.
 */
#ifndef UCT_CUDA_IPC_NS_CACHE_H
#define UCT_CUDA_IPC_NS_CACHE_H

#include "cuda_ipc_ns_map.h"
#include "cuda_ipc_ns_nsid.h"

#include <ucs/datastruct/list.h>
#include <stddef.h>
#include <stdint.h>


typedef struct uct_cuda_ipc_ns_cache_config {
    int      enable;      /* keep mappings once their last op completed */
    unsigned max_regions; /* UINT_MAX: no limit */
    size_t   max_size;    /* bytes mapped; SIZE_MAX: no limit */
} uct_cuda_ipc_ns_cache_config_t;


typedef struct uct_cuda_ipc_ns_cache_stats {
    uint64_t hits;
    uint64_t misses;
    uint64_t evictions;   /* regions dropped to honour the limits */
    uint64_t unmaps;      /* mappings released, for any reason */
    uint64_t regions;     /* mapped now */
    uint64_t bytes;       /* mapped now */
    uint64_t peers;       /* known now */
} uct_cuda_ipc_ns_cache_stats_t;


typedef struct uct_cuda_ipc_ns_cache_peer   uct_cuda_ipc_ns_cache_peer_t;
typedef struct uct_cuda_ipc_ns_cache_region uct_cuda_ipc_ns_cache_region_t;


/* A mapped allocation of a peer; valid while pinned. What a hit reads and
 * writes comes first, in one cache line. */
struct uct_cuda_ipc_ns_cache_region {
    uint32_t                     refcount;   /* pins + 1 while in the table */
    uint8_t                      referenced; /* clock bit, set by hits */
    uint8_t                      in_table;   /* under the cache lock */
    uint64_t                     alloc_id;   /* VMM keys */
    uct_cuda_ipc_ns_map_t        mapping;
    uct_cuda_ipc_ns_cache_peer_t *peer;
    uint64_t                     base;       /* allocation base in the owner */
    ucs_list_link_t              lru;        /* cache LRU, while in the table */
    uint8_t                      handle[UCT_CUDA_IPC_NS_HANDLE_SIZE]; /* legacy, pool */
};


/**
 * Take a reference on the process-wide cache, creating it on first use with
 * @a config (later callers share the first configuration; a differing one is
 * logged).
 */
ucs_status_t uct_cuda_ipc_ns_cache_get(const uct_cuda_ipc_ns_cache_config_t *config);

/* Drop the reference; the last one unmaps everything and takes every
 * peer's pidfd off UCX's async loop, waiting for a dispatch in progress */
void uct_cuda_ipc_ns_cache_put(void);


/**
 * A referenced peer entry for @a id (created when unknown). A peer of our
 * PID namespace is watched (pidfd) from here on when its start time is known.
 */
ucs_status_t uct_cuda_ipc_ns_cache_peer_get(const uct_cuda_ipc_ns_nsid_identity_t *id,
                                            uct_cuda_ipc_ns_cache_peer_t **peer_p);

void uct_cuda_ipc_ns_cache_peer_put(uct_cuda_ipc_ns_cache_peer_t *peer);

const uct_cuda_ipc_ns_nsid_identity_t *
uct_cuda_ipc_ns_cache_peer_id(const uct_cuda_ipc_ns_cache_peer_t *peer);

/** Whether the peer was found dead (by a check or a failed import) */
int uct_cuda_ipc_ns_cache_peer_is_dead(const uct_cuda_ipc_ns_cache_peer_t *peer);


/**
 * Check whether the peer is alive. A peer of another PID namespace becomes
 * checkable once an fd was imported from its broker (the import's checked
 * pidfd of the owner becomes its watch). A dead peer's mappings are
 * released (once unpinned). No syscall but a poll of the watch.
 *
 * @return UCS_OK (alive or not checkable), UCS_ERR_CONNECTION_RESET (dead).
 */
ucs_status_t uct_cuda_ipc_ns_cache_peer_check(uct_cuda_ipc_ns_cache_peer_t *peer);


/** Mark the peer dead and release its mappings (once unpinned) */
void uct_cuda_ipc_ns_cache_peer_fail(uct_cuda_ipc_ns_cache_peer_t *peer);


/**
 * The region of @a peer holding @a key's allocation (one allocation: legacy
 * or POSIX fd), mapped for @a device, pinned for the caller; imports
 * (through @a fdx) and maps it on a miss.
 */
ucs_status_t uct_cuda_ipc_ns_cache_map(uct_cuda_ipc_ns_cache_peer_t *peer,
                                       const uct_cuda_ipc_ns_rkey_info_t *key,
                                       int device,
                                       const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                       uct_cuda_ipc_ns_cache_region_t **region_p);

/**
 * The regions of chunks @a first..first+count-1 of the key of several
 * allocations @a key, whose checked layout is @a chunks, each mapped for
 * @a device as a region of its own (its allocation id is its staleness
 * guard) and pinned for the caller in @a regions (count entries). The chunks
 * not mapped here are imported with one request to the owner's broker per
 * run of up to UCT_CUDA_IPC_NS_BROKER_FDS_MAX consecutive ones, each fd
 * closed once mapped (docs/framework-memory.md). On failure nothing stays
 * pinned.
 */
ucs_status_t uct_cuda_ipc_ns_cache_map_chunks(uct_cuda_ipc_ns_cache_peer_t *peer,
                                              const uct_cuda_ipc_ns_rkey_info_t *key,
                                              const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                              uint32_t first, uint32_t count,
                                              int device,
                                              const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                              uct_cuda_ipc_ns_cache_region_t **regions);

/** Unpin; with the cache disabled (or the region stale) this may unmap */
void uct_cuda_ipc_ns_cache_unpin(uct_cuda_ipc_ns_cache_region_t *region);


void uct_cuda_ipc_ns_cache_get_stats(uct_cuda_ipc_ns_cache_stats_t *stats);

/**
 * Destroy now the peers that died with no reference but UCX's async
 * handler's: they wait for an application thread's next use of the cache
 * (docs/architecture.md, "Peer failure"), holding their pidfd and UCX's async
 * thread. Every use of the cache calls it; so do the tests, before counting
 * descriptors. Not from UCX's async thread.
 */
void uct_cuda_ipc_ns_cache_reap(void);

/**
 * The module goes (process exit, dlclose): take every peer's pidfd off UCX's
 * async loop, stopping its thread when ours were its last handlers. libucs's
 * destructor, which runs after the module's, frees that loop's handler table
 * but leaves its thread running: a peer's exit dispatched then would read
 * freed memory. Dead peers are destroyed; live ones stay, unwatched (their
 * next use still checks them). Called by the module's destructor.
 */
void uct_cuda_ipc_ns_cache_unload(void);

#endif
