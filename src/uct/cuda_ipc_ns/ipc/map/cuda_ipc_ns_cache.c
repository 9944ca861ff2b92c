/*
 * cuda_ipc_ns: remote mapping cache (see cuda_ipc_ns_cache.h).
 *
 * Locks, in the order they nest:
 *   cache.lock     peers table, LRU list, totals, table membership of
 *                  regions, peer liveness (cuda_ipc_ns_liveness.h);
 *   peer->lock     (rwlock) the peer's region table: read by hits, written
 *                  under cache.lock.
 * Region lifetime: one reference for the table and one per pin; whoever
 * drops the last reference unmaps, with no lock held.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_liveness.h"
#include "cuda_ipc_ns_fdx.h"

#include <ucs/datastruct/khash.h>
#include <ucs/debug/assert.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/compiler_def.h>

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>


typedef struct {
    uint64_t base;
    int      device;
} uct_cuda_ipc_ns_region_key_t;


/* Allocation bases are aligned (low bits zero) and khash indexes buckets by
 * the low bits of the hash: mix every bit into them (64-bit finalizer) */
static UCS_F_ALWAYS_INLINE khint32_t uct_cuda_ipc_ns_cache_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return (khint32_t)k;
}

#define uct_cuda_ipc_ns_region_key_hash(_k) \
    uct_cuda_ipc_ns_cache_hash((_k).base ^ ((uint64_t)(_k).device << 56))
#define uct_cuda_ipc_ns_region_key_equal(_a, _b) \
    (((_a).base == (_b).base) && ((_a).device == (_b).device))

KHASH_INIT(uct_cuda_ipc_ns_regions, uct_cuda_ipc_ns_region_key_t,
           uct_cuda_ipc_ns_cache_region_t*, 1, uct_cuda_ipc_ns_region_key_hash,
           uct_cuda_ipc_ns_region_key_equal)

#define uct_cuda_ipc_ns_identity_hash(_id) \
    uct_cuda_ipc_ns_cache_hash((_id).pid_ns ^ ((uint64_t)(_id).pid << 32) ^ \
                               ((_id).start_time * 31) ^ (_id).system_id)
#define uct_cuda_ipc_ns_identity_key_equal(_a, _b) \
    uct_cuda_ipc_ns_identity_equal(&(_a), &(_b))

KHASH_INIT(uct_cuda_ipc_ns_peers, uct_cuda_ipc_ns_nsid_identity_t,
           uct_cuda_ipc_ns_cache_peer_t*, 1, uct_cuda_ipc_ns_identity_hash,
           uct_cuda_ipc_ns_identity_key_equal)


struct uct_cuda_ipc_ns_cache_peer {
    uct_cuda_ipc_ns_nsid_identity_t   id;
    unsigned                          refcount;  /* users + regions, cache.lock */
    int                               dead;      /* atomic */
    int                               in_table;  /* in cache.peers */
    uct_cuda_ipc_ns_liveness_t        live;      /* cache.lock */
    pthread_rwlock_t                  lock;
    khash_t(uct_cuda_ipc_ns_regions)  regions;
};


static const uct_cuda_ipc_ns_liveness_ops_t uct_cuda_ipc_ns_peer_liveness_ops;


static struct {
    pthread_mutex_t                lock;
    unsigned                       refcount;
    uct_cuda_ipc_ns_cache_config_t config;
    khash_t(uct_cuda_ipc_ns_peers) peers;
    ucs_list_link_t                lru;       /* oldest first */
    /* the peers' watches: the last md's close and the module's unload take
     * them all off UCX's async loop */
    uct_cuda_ipc_ns_liveness_set_t live;
    uint64_t                       num_regions;
    uint64_t                       num_bytes;
    uint64_t                       num_peers;
    /* updated with atomics: hits never take cache.lock */
    uint64_t                       hits, misses, evictions, unmaps;
} uct_cuda_ipc_ns_cache = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .live = UCT_CUDA_IPC_NS_LIVENESS_SET_INITIALIZER(
                    uct_cuda_ipc_ns_cache.live, &uct_cuda_ipc_ns_cache.lock,
                    &uct_cuda_ipc_ns_peer_liveness_ops)
};


#define UCT_CUDA_IPC_NS_STAT_ADD(_name, _n) \
    __atomic_fetch_add(&uct_cuda_ipc_ns_cache._name, (_n), __ATOMIC_RELAXED)


ucs_status_t uct_cuda_ipc_ns_cache_get(const uct_cuda_ipc_ns_cache_config_t *config)
{
    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    if (uct_cuda_ipc_ns_cache.refcount++ == 0) {
        uct_cuda_ipc_ns_cache.config  = *config;
        kh_init_inplace(uct_cuda_ipc_ns_peers, &uct_cuda_ipc_ns_cache.peers);
        ucs_list_head_init(&uct_cuda_ipc_ns_cache.lru);
        ucs_debug("cuda_ipc_ns: mapping cache %s, at most %u regions and "
                  "%zu bytes", config->enable ? "enabled" : "disabled",
                  config->max_regions, config->max_size);
    } else if ((config->enable != uct_cuda_ipc_ns_cache.config.enable) ||
               (config->max_regions != uct_cuda_ipc_ns_cache.config.max_regions) ||
               (config->max_size != uct_cuda_ipc_ns_cache.config.max_size)) {
        ucs_diag("cuda_ipc_ns: the mapping cache is process-wide and already "
                 "configured; a different configuration is ignored");
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
    return UCS_OK;
}


static void uct_cuda_ipc_ns_region_unmap(uct_cuda_ipc_ns_cache_region_t *region)
{
    uct_cuda_ipc_ns_map_unmap(&region->mapping);
    UCT_CUDA_IPC_NS_STAT_ADD(unmaps, 1);
    uct_cuda_ipc_ns_cache_peer_put(region->peer);
    ucs_free(region);
}


/* Drop one reference; the last one unmaps. No lock may be held. */
static void uct_cuda_ipc_ns_region_put(uct_cuda_ipc_ns_cache_region_t *region)
{
    if (__atomic_sub_fetch(&region->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
        uct_cuda_ipc_ns_region_unmap(region);
    }
}


/*
 * Take a region out of its peer's table and the LRU. Called with cache.lock
 * and the peer's write lock. The table's reference moves to @a victims when
 * it is the last one (the caller unmaps after unlocking), else it is
 * dropped and the last unpin unmaps.
 */
static void uct_cuda_ipc_ns_region_detach(uct_cuda_ipc_ns_cache_region_t *region,
                                          khiter_t iter,
                                          ucs_list_link_t *victims)
{
    uct_cuda_ipc_ns_cache_peer_t *peer = region->peer;

    kh_del(uct_cuda_ipc_ns_regions, &peer->regions, iter);
    ucs_list_del(&region->lru);
    region->in_table = 0;
    --uct_cuda_ipc_ns_cache.num_regions;
    uct_cuda_ipc_ns_cache.num_bytes -= region->mapping.length;

    if (__atomic_sub_fetch(&region->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
        ucs_list_add_tail(victims, &region->lru);
    }
}


static khiter_t uct_cuda_ipc_ns_region_iter(uct_cuda_ipc_ns_cache_region_t *region)
{
    uct_cuda_ipc_ns_region_key_t rkey = {region->base,
                                         region->mapping.device};

    return kh_get(uct_cuda_ipc_ns_regions, &region->peer->regions, rkey);
}


/* Unmap collected victims; no lock held */
static void uct_cuda_ipc_ns_cache_unmap_victims(ucs_list_link_t *victims)
{
    uct_cuda_ipc_ns_cache_region_t *region, *tmp;

    ucs_list_for_each_safe(region, tmp, victims, lru) {
        ucs_list_del(&region->lru);
        uct_cuda_ipc_ns_region_unmap(region);
    }
}


/*
 * Evict least recently used, unpinned regions until the limits hold. Second
 * chance: a region hit since it was last looked at goes to the tail. Pinned
 * regions are skipped; when all are pinned the limits are exceeded until
 * their ops complete. Called with cache.lock.
 */
static void uct_cuda_ipc_ns_cache_evict(ucs_list_link_t *victims)
{
    uct_cuda_ipc_ns_cache_config_t *config = &uct_cuda_ipc_ns_cache.config;
    uct_cuda_ipc_ns_cache_region_t *region;
    uint64_t budget = 2 * uct_cuda_ipc_ns_cache.num_regions;
    uct_cuda_ipc_ns_cache_peer_t *peer;

    while (((uct_cuda_ipc_ns_cache.num_regions > config->max_regions) ||
            (uct_cuda_ipc_ns_cache.num_bytes > config->max_size)) &&
           (budget-- > 0) && !ucs_list_is_empty(&uct_cuda_ipc_ns_cache.lru)) {
        region = ucs_list_head(&uct_cuda_ipc_ns_cache.lru,
                               uct_cuda_ipc_ns_cache_region_t, lru);
        peer   = region->peer;

        pthread_rwlock_wrlock(&peer->lock);
        if (region->referenced ||
            (__atomic_load_n(&region->refcount, __ATOMIC_ACQUIRE) > 1)) {
            region->referenced = 0;
            ucs_list_del(&region->lru);
            ucs_list_add_tail(&uct_cuda_ipc_ns_cache.lru, &region->lru);
        } else {
            uct_cuda_ipc_ns_region_detach(region,
                                          uct_cuda_ipc_ns_region_iter(region),
                                          victims);
            UCT_CUDA_IPC_NS_STAT_ADD(evictions, 1);
        }
        pthread_rwlock_unlock(&peer->lock);
    }
}


static void uct_cuda_ipc_ns_peer_destroy(uct_cuda_ipc_ns_cache_peer_t *peer)
{
    ucs_debug("cuda_ipc_ns: forgetting peer pid %u (PID namespace %" PRIu64
              ")", peer->id.pid, peer->id.pid_ns);
    ucs_assert(kh_size(&peer->regions) == 0);
    uct_cuda_ipc_ns_liveness_close(&peer->live);
    kh_destroy_inplace(uct_cuda_ipc_ns_regions, &peer->regions);
    pthread_rwlock_destroy(&peer->lock);
    ucs_free(peer);
}


/* Called with cache.lock */
static void uct_cuda_ipc_ns_peer_unlink(uct_cuda_ipc_ns_cache_peer_t *peer)
{
    khiter_t iter;

    if (!peer->in_table) {
        return;
    }

    iter = kh_get(uct_cuda_ipc_ns_peers, &uct_cuda_ipc_ns_cache.peers,
                  peer->id);
    ucs_assert(iter != kh_end(&uct_cuda_ipc_ns_cache.peers));
    kh_del(uct_cuda_ipc_ns_peers, &uct_cuda_ipc_ns_cache.peers, iter);
    peer->in_table = 0;
    --uct_cuda_ipc_ns_cache.num_peers;
}


/*
 * Destroy the peers whose last reference went on UCX's async thread. Called
 * by application threads without cache.lock (cuda_ipc_ns_liveness.h).
 */
void uct_cuda_ipc_ns_cache_reap(void)
{
    uct_cuda_ipc_ns_liveness_reap(&uct_cuda_ipc_ns_cache.live);
}


void uct_cuda_ipc_ns_cache_unload(void)
{
    uct_cuda_ipc_ns_liveness_unwatch_all(&uct_cuda_ipc_ns_cache.live, NULL,
                                         "unloading");
}


static void uct_cuda_ipc_ns_peer_flush(uct_cuda_ipc_ns_cache_peer_t *peer,
                                       ucs_list_link_t *victims)
{
    uct_cuda_ipc_ns_cache_region_t *region;
    khiter_t iter;

    pthread_rwlock_wrlock(&peer->lock);
    for (iter = kh_begin(&peer->regions); iter != kh_end(&peer->regions);
         ++iter) {
        if (kh_exist(&peer->regions, iter)) {
            region = kh_val(&peer->regions, iter);
            uct_cuda_ipc_ns_region_detach(region, iter, victims);
        }
    }
    pthread_rwlock_unlock(&peer->lock);
}


void uct_cuda_ipc_ns_cache_put(void)
{
    uct_cuda_ipc_ns_cache_peer_t *peer;
    UCS_LIST_HEAD(victims);
    khiter_t iter;

    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    ucs_assert(uct_cuda_ipc_ns_cache.refcount > 0);
    if (--uct_cuda_ipc_ns_cache.refcount > 0) {
        pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
        return;
    }

    /* the last user is gone: so are its ops and pins */
    for (iter = kh_begin(&uct_cuda_ipc_ns_cache.peers);
         iter != kh_end(&uct_cuda_ipc_ns_cache.peers); ++iter) {
        if (kh_exist(&uct_cuda_ipc_ns_cache.peers, iter)) {
            peer = kh_val(&uct_cuda_ipc_ns_cache.peers, iter);
            uct_cuda_ipc_ns_peer_flush(peer, &victims);
        }
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);

    uct_cuda_ipc_ns_cache_unmap_victims(&victims);
    /* and no exit of a peer is dispatched to us any more: a peer an rkey
     * still holds, or whose exit is being handled now, would keep UCX's
     * async thread and the peer's pidfd until its release or its reaping */
    uct_cuda_ipc_ns_liveness_unwatch_all(&uct_cuda_ipc_ns_cache.live,
                                         &uct_cuda_ipc_ns_cache.refcount,
                                         "mapping cache closed");

    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    if (uct_cuda_ipc_ns_cache.refcount == 0) {
        if (kh_size(&uct_cuda_ipc_ns_cache.peers) > 0) {
            ucs_debug("cuda_ipc_ns: %u peers still referenced when the "
                      "mapping cache closed",
                      kh_size(&uct_cuda_ipc_ns_cache.peers));
        }
        kh_foreach_value(&uct_cuda_ipc_ns_cache.peers, peer, {
            peer->in_table = 0;
        });
        kh_destroy_inplace(uct_cuda_ipc_ns_peers, &uct_cuda_ipc_ns_cache.peers);
        uct_cuda_ipc_ns_cache.num_peers = 0;
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
}


ucs_status_t uct_cuda_ipc_ns_cache_peer_get(const uct_cuda_ipc_ns_nsid_identity_t *id,
                                            uct_cuda_ipc_ns_cache_peer_t **peer_p)
{
    int watched = 0;
    uct_cuda_ipc_ns_cache_peer_t *peer;
    khiter_t iter;
    int ret;

    uct_cuda_ipc_ns_cache_reap();
    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    iter = kh_get(uct_cuda_ipc_ns_peers, &uct_cuda_ipc_ns_cache.peers, *id);
    if (iter != kh_end(&uct_cuda_ipc_ns_cache.peers)) {
        peer = kh_val(&uct_cuda_ipc_ns_cache.peers, iter);
        ++peer->refcount;
        goto out;
    }

    peer = ucs_calloc(1, sizeof(*peer), "cuda_ipc_ns_peer");
    if (peer == NULL) {
        pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
        ucs_error("cuda_ipc_ns: failed to allocate a peer entry");
        return UCS_ERR_NO_MEMORY;
    }

    iter = kh_put(uct_cuda_ipc_ns_peers, &uct_cuda_ipc_ns_cache.peers, *id,
                  &ret);
    if (ret < 0) {
        pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
        ucs_free(peer);
        ucs_error("cuda_ipc_ns: failed to add a peer entry");
        return UCS_ERR_NO_MEMORY;
    }

    peer->id       = *id;
    peer->refcount = 1;
    peer->in_table = 1;
    uct_cuda_ipc_ns_liveness_init(&peer->live, &uct_cuda_ipc_ns_cache.live,
                                  &peer->id);
    pthread_rwlock_init(&peer->lock, NULL);
    kh_init_inplace(uct_cuda_ipc_ns_regions, &peer->regions);
    kh_val(&uct_cuda_ipc_ns_cache.peers, iter) = peer;
    ++uct_cuda_ipc_ns_cache.num_peers;
    watched = uct_cuda_ipc_ns_liveness_open(&peer->live);
    ucs_debug("cuda_ipc_ns: new peer pid %u (PID namespace %" PRIu64
              ", start time %" PRIu64 ")%s", id->pid, id->pid_ns,
              id->start_time, watched ? ", watched" : "");
out:
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
    if (watched) {
        uct_cuda_ipc_ns_liveness_start(&peer->live);
    }
    *peer_p = peer;
    return UCS_OK;
}


void uct_cuda_ipc_ns_cache_peer_put(uct_cuda_ipc_ns_cache_peer_t *peer)
{
    int destroy;

    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    ucs_assert(peer->refcount > 0);
    destroy = (--peer->refcount == 0);
    if (destroy) {
        uct_cuda_ipc_ns_peer_unlink(peer);
    }
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);

    if (destroy) {
        uct_cuda_ipc_ns_peer_destroy(peer);
    }
    uct_cuda_ipc_ns_cache_reap();
}


const uct_cuda_ipc_ns_nsid_identity_t *
uct_cuda_ipc_ns_cache_peer_id(const uct_cuda_ipc_ns_cache_peer_t *peer)
{
    return &peer->id;
}


int uct_cuda_ipc_ns_cache_peer_is_dead(const uct_cuda_ipc_ns_cache_peer_t *peer)
{
    return __atomic_load_n(&peer->dead, __ATOMIC_ACQUIRE);
}


void uct_cuda_ipc_ns_cache_peer_fail(uct_cuda_ipc_ns_cache_peer_t *peer)
{
    UCS_LIST_HEAD(victims);

    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    if (!__atomic_exchange_n(&peer->dead, 1, __ATOMIC_ACQ_REL)) {
        ucs_diag("cuda_ipc_ns: peer pid %u (PID namespace %" PRIu64 ") is "
                 "gone, releasing its %u mappings", peer->id.pid,
                 peer->id.pid_ns, kh_size(&peer->regions));
    }
    /* a later process with the same identity (base keys carry no start
     * time) gets a fresh entry */
    uct_cuda_ipc_ns_peer_unlink(peer);
    uct_cuda_ipc_ns_peer_flush(peer, &victims);
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);

    uct_cuda_ipc_ns_cache_unmap_victims(&victims);
}


static uct_cuda_ipc_ns_cache_peer_t *
uct_cuda_ipc_ns_peer_of(uct_cuda_ipc_ns_liveness_t *live)
{
    return ucs_container_of(live, uct_cuda_ipc_ns_cache_peer_t, live);
}


/* Called with cache.lock */
static int uct_cuda_ipc_ns_peer_live_hold(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_cache_peer_t *peer = uct_cuda_ipc_ns_peer_of(live);

    if (peer->refcount == 0) {
        return 0;
    }
    ++peer->refcount;
    return 1;
}


/* Called with cache.lock */
static int uct_cuda_ipc_ns_peer_live_drop(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_cache_peer_t *peer = uct_cuda_ipc_ns_peer_of(live);

    ucs_assert(peer->refcount > 0);
    if (--peer->refcount > 0) {
        return 0;
    }
    uct_cuda_ipc_ns_peer_unlink(peer);
    return 1;
}


static void uct_cuda_ipc_ns_peer_live_put(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_cache_peer_put(uct_cuda_ipc_ns_peer_of(live));
}


static void uct_cuda_ipc_ns_peer_live_exited(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_cache_peer_fail(uct_cuda_ipc_ns_peer_of(live));
}


static void uct_cuda_ipc_ns_peer_live_destroy(uct_cuda_ipc_ns_liveness_t *live)
{
    uct_cuda_ipc_ns_peer_destroy(uct_cuda_ipc_ns_peer_of(live));
}


static const uct_cuda_ipc_ns_liveness_ops_t uct_cuda_ipc_ns_peer_liveness_ops = {
    .hold    = uct_cuda_ipc_ns_peer_live_hold,
    .drop    = uct_cuda_ipc_ns_peer_live_drop,
    .put     = uct_cuda_ipc_ns_peer_live_put,
    .exited  = uct_cuda_ipc_ns_peer_live_exited,
    .destroy = uct_cuda_ipc_ns_peer_live_destroy
};


ucs_status_t uct_cuda_ipc_ns_cache_peer_check(uct_cuda_ipc_ns_cache_peer_t *peer)
{
    if (uct_cuda_ipc_ns_cache_peer_is_dead(peer)) {
        return UCS_ERR_CONNECTION_RESET;
    }

    if (uct_cuda_ipc_ns_liveness_exited(&peer->live)) {
        uct_cuda_ipc_ns_cache_peer_fail(peer);
        return UCS_ERR_CONNECTION_RESET;
    }
    return UCS_OK;
}


static int uct_cuda_ipc_ns_region_matches(const uct_cuda_ipc_ns_cache_region_t *region,
                                          const uct_cuda_ipc_ns_rkey_info_t *key)
{
    if ((region->mapping.handle_type != key->handle_type) ||
        (region->mapping.length != key->length)) {
        return 0;
    }

    return uct_cuda_ipc_ns_handle_is_opaque(key->handle_type) ?
           !memcmp(region->handle, key->handle.bytes, sizeof(region->handle)) :
           (region->alloc_id == key->handle.posix.alloc_id);
}


/* Hit path: the peer's read lock, an atomic pin, no driver call */
static uct_cuda_ipc_ns_cache_region_t *
uct_cuda_ipc_ns_cache_lookup(uct_cuda_ipc_ns_cache_peer_t *peer,
                             const uct_cuda_ipc_ns_rkey_info_t *key, int device)
{
    uct_cuda_ipc_ns_region_key_t rkey      = {key->base, device};
    uct_cuda_ipc_ns_cache_region_t *region = NULL;
    khiter_t iter;

    pthread_rwlock_rdlock(&peer->lock);
    iter = kh_get(uct_cuda_ipc_ns_regions, &peer->regions, rkey);
    if ((iter != kh_end(&peer->regions)) &&
        uct_cuda_ipc_ns_region_matches(kh_val(&peer->regions, iter), key)) {
        region = kh_val(&peer->regions, iter);
        __atomic_add_fetch(&region->refcount, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&region->referenced, 1, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&peer->lock);
    return region;
}


/* Insert a freshly mapped region, or return one another thread inserted
 * meanwhile (then @a region is unmapped by the caller) */
static uct_cuda_ipc_ns_cache_region_t *
uct_cuda_ipc_ns_cache_insert(uct_cuda_ipc_ns_cache_region_t *region,
                             const uct_cuda_ipc_ns_rkey_info_t *key,
                             ucs_list_link_t *victims)
{
    uct_cuda_ipc_ns_cache_peer_t *peer = region->peer;
    uct_cuda_ipc_ns_region_key_t rkey  = {region->base, region->mapping.device};
    uct_cuda_ipc_ns_cache_region_t *old;
    khiter_t iter;
    int ret;

    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    pthread_rwlock_wrlock(&peer->lock);
    iter = kh_get(uct_cuda_ipc_ns_regions, &peer->regions, rkey);
    if (iter != kh_end(&peer->regions)) {
        old = kh_val(&peer->regions, iter);
        if (uct_cuda_ipc_ns_region_matches(old, key)) {
            __atomic_add_fetch(&old->refcount, 1, __ATOMIC_RELAXED);
            pthread_rwlock_unlock(&peer->lock);
            pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
            return old;
        }

        ucs_debug("cuda_ipc_ns: peer pid %u reused address 0x%" PRIx64
                  " for another allocation: dropping the stale mapping",
                  peer->id.pid, region->base);
        uct_cuda_ipc_ns_region_detach(old, iter, victims);
    }

    if (peer->dead) {
        /* failed while we were mapping: keep nothing of it */
        pthread_rwlock_unlock(&peer->lock);
        pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
        return NULL;
    }

    iter = kh_put(uct_cuda_ipc_ns_regions, &peer->regions, rkey, &ret);
    if (ret < 0) {
        pthread_rwlock_unlock(&peer->lock);
        pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
        ucs_error("cuda_ipc_ns: failed to add a region to the mapping cache");
        return NULL;
    }

    kh_val(&peer->regions, iter) = region;
    region->in_table             = 1;
    region->refcount             = 2; /* the table and the caller */
    ++peer->refcount;                 /* held by the region */
    ucs_list_add_tail(&uct_cuda_ipc_ns_cache.lru, &region->lru);
    ++uct_cuda_ipc_ns_cache.num_regions;
    uct_cuda_ipc_ns_cache.num_bytes += region->mapping.length;
    pthread_rwlock_unlock(&peer->lock);

    uct_cuda_ipc_ns_cache_evict(victims);
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
    return region;
}


/* A region of @a peer for @a key, not mapped yet */
static uct_cuda_ipc_ns_cache_region_t *
uct_cuda_ipc_ns_cache_region_new(uct_cuda_ipc_ns_cache_peer_t *peer,
                                 const uct_cuda_ipc_ns_rkey_info_t *key)
{
    uct_cuda_ipc_ns_cache_region_t *region;

    region = ucs_calloc(1, sizeof(*region), "cuda_ipc_ns_region");
    if (region == NULL) {
        ucs_error("cuda_ipc_ns: failed to allocate a mapping cache region");
        return NULL;
    }

    region->peer     = peer;
    region->base     = key->base;
    region->alloc_id = key->handle.posix.alloc_id;
    if (uct_cuda_ipc_ns_handle_is_opaque(key->handle_type)) {
        memcpy(region->handle, key->handle.bytes, sizeof(region->handle));
    }
    return region;
}


/* Insert a region just mapped, pinned for the caller in *region_p: it, or
 * the one another thread inserted meanwhile (then it is unmapped) */
static ucs_status_t
uct_cuda_ipc_ns_cache_add(uct_cuda_ipc_ns_cache_region_t *region,
                          const uct_cuda_ipc_ns_rkey_info_t *key,
                          uct_cuda_ipc_ns_cache_region_t **region_p)
{
    uct_cuda_ipc_ns_cache_peer_t *peer = region->peer;
    uct_cuda_ipc_ns_cache_region_t *found;
    UCS_LIST_HEAD(victims);

    found = uct_cuda_ipc_ns_cache_insert(region, key, &victims);
    uct_cuda_ipc_ns_cache_unmap_victims(&victims);
    if (found != region) {
        /* not inserted: the region holds no peer reference yet */
        uct_cuda_ipc_ns_map_unmap(&region->mapping);
        UCT_CUDA_IPC_NS_STAT_ADD(unmaps, 1);
        ucs_free(region);
        if (found == NULL) {
            return uct_cuda_ipc_ns_cache_peer_is_dead(peer) ?
                   UCS_ERR_CONNECTION_RESET : UCS_ERR_NO_MEMORY;
        }
    }

    *region_p = found;
    return UCS_OK;
}


ucs_status_t uct_cuda_ipc_ns_cache_map(uct_cuda_ipc_ns_cache_peer_t *peer,
                                       const uct_cuda_ipc_ns_rkey_info_t *key,
                                       int device,
                                       const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                       uct_cuda_ipc_ns_cache_region_t **region_p)
{
    uct_cuda_ipc_ns_cache_region_t *region;
    ucs_status_t status;
    int owner_pidfd;

    region = uct_cuda_ipc_ns_cache_lookup(peer, key, device);
    if (ucs_likely(region != NULL)) {
        UCT_CUDA_IPC_NS_STAT_ADD(hits, 1);
        *region_p = region;
        return UCS_OK;
    }

    UCT_CUDA_IPC_NS_STAT_ADD(misses, 1);
    if (uct_cuda_ipc_ns_cache_peer_is_dead(peer)) {
        return UCS_ERR_CONNECTION_RESET;
    }

    region = uct_cuda_ipc_ns_cache_region_new(peer, key);
    if (region == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    /* no lock held: a fd exchange may wait for a slow broker */
    status = uct_cuda_ipc_ns_map(fdx, key, device, &region->mapping,
                                 &owner_pidfd);
    if (status != UCS_OK) {
        ucs_free(region);
        return status;
    }
    uct_cuda_ipc_ns_liveness_adopt(&peer->live, owner_pidfd);

    return uct_cuda_ipc_ns_cache_add(region, key, region_p);
}


/* Chunk @a index of the key of several allocations @a key (layout
 * @a chunks) as a key of one allocation of its own: its base in the owner
 * and its allocation id make it a region of its own */
static void uct_cuda_ipc_ns_cache_chunk_key(const uct_cuda_ipc_ns_rkey_info_t *key,
                                            const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                            uint32_t index,
                                            uct_cuda_ipc_ns_rkey_info_t *chunk_key)
{
    *chunk_key                       = *key;
    chunk_key->base                  = key->base + chunks[index].offset;
    chunk_key->length                = chunks[index].size;
    chunk_key->handle.posix.alloc_id = chunks[index].alloc_id;
}


/*
 * Import chunks @a first..first+count-1 (count <= the batch size), none of
 * them mapped here, with one request to the owner's broker; map each one and
 * close its fd at once, pinning its region in @a regions. On failure the
 * fds not imported yet are closed and regions[i] stays NULL from the chunk
 * that failed on.
 */
static ucs_status_t
uct_cuda_ipc_ns_cache_import_chunks(uct_cuda_ipc_ns_cache_peer_t *peer,
                                    const uct_cuda_ipc_ns_rkey_info_t *key,
                                    const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                    uint32_t first, uint32_t count, int device,
                                    const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                    uct_cuda_ipc_ns_cache_region_t **regions)
{
    int fds[UCT_CUDA_IPC_NS_BROKER_FDS_MAX];
    uct_cuda_ipc_ns_rkey_info_t chunk_key;
    uct_cuda_ipc_ns_cache_region_t *region;
    ucs_status_t status;
    int owner_pidfd, fd;
    uint32_t i;

    if (uct_cuda_ipc_ns_cache_peer_is_dead(peer)) {
        return UCS_ERR_CONNECTION_RESET;
    }

    /* no lock held: a fd exchange may wait for a slow broker */
    status = uct_cuda_ipc_ns_fdx_chunk_fds(fdx, key, chunks, first, count, fds,
                                           &owner_pidfd);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc_ns: cannot import the fds of chunks %u..%u of "
                  "0x%" PRIx64 " of pid %u (PID namespace %" PRIu64 "): %s",
                  first, first + count - 1, key->base, key->pid, key->pid_ns,
                  ucs_status_string(status));
        return status;
    }
    uct_cuda_ipc_ns_liveness_adopt(&peer->live, owner_pidfd);

    for (i = 0; (i < count) && (status == UCS_OK); ++i) {
        uct_cuda_ipc_ns_cache_chunk_key(key, chunks, first + i, &chunk_key);
        region = uct_cuda_ipc_ns_cache_region_new(peer, &chunk_key);
        if (region == NULL) {
            status = UCS_ERR_NO_MEMORY;
            break;
        }

        fd     = fds[i];
        fds[i] = -1; /* closed by the mapping, mapped or not */
        status = uct_cuda_ipc_ns_map_fd_of(&chunk_key, device, fd,
                                           &region->mapping);
        if (status != UCS_OK) {
            ucs_free(region);
            break;
        }

        status = uct_cuda_ipc_ns_cache_add(region, &chunk_key, &regions[i]);
    }

    /* the fds of the chunks after one that failed */
    for (i = 0; i < count; ++i) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return status;
}


ucs_status_t uct_cuda_ipc_ns_cache_map_chunks(uct_cuda_ipc_ns_cache_peer_t *peer,
                                              const uct_cuda_ipc_ns_rkey_info_t *key,
                                              const uct_cuda_ipc_ns_broker_proto_chunk_t *chunks,
                                              uint32_t first, uint32_t count,
                                              int device,
                                              const uct_cuda_ipc_ns_broker_proto_fdx_config_t *fdx,
                                              uct_cuda_ipc_ns_cache_region_t **regions)
{
    uct_cuda_ipc_ns_rkey_info_t chunk_key;
    ucs_status_t status;
    uint32_t i, batch;

    /* the hits first: only the chunks not mapped here cost a request */
    for (i = 0; i < count; ++i) {
        uct_cuda_ipc_ns_cache_chunk_key(key, chunks, first + i, &chunk_key);
        regions[i] = uct_cuda_ipc_ns_cache_lookup(peer, &chunk_key, device);
        if (regions[i] != NULL) {
            UCT_CUDA_IPC_NS_STAT_ADD(hits, 1);
        } else {
            UCT_CUDA_IPC_NS_STAT_ADD(misses, 1);
        }
    }

    /* each run of misses in batches of one round trip each */
    for (i = 0; i < count; i += batch) {
        batch = 1;
        if (regions[i] != NULL) {
            continue;
        }
        while ((i + batch < count) && (regions[i + batch] == NULL) &&
               (batch < UCT_CUDA_IPC_NS_BROKER_FDS_MAX)) {
            ++batch;
        }
        status = uct_cuda_ipc_ns_cache_import_chunks(peer, key, chunks,
                                                     first + i, batch, device,
                                                     fdx, regions + i);
        if (status != UCS_OK) {
            goto err_unpin;
        }
    }
    return UCS_OK;

err_unpin:
    for (i = 0; i < count; ++i) {
        if (regions[i] != NULL) {
            uct_cuda_ipc_ns_cache_unpin(regions[i]);
        }
    }
    return status;
}


void uct_cuda_ipc_ns_cache_unpin(uct_cuda_ipc_ns_cache_region_t *region)
{
    UCS_LIST_HEAD(victims);

    if (!uct_cuda_ipc_ns_cache.config.enable &&
        (__atomic_load_n(&region->refcount, __ATOMIC_ACQUIRE) == 2)) {
        /* caching disabled: our pin and the table's are the last ones */
        pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
        pthread_rwlock_wrlock(&region->peer->lock);
        if (region->in_table &&
            (__atomic_load_n(&region->refcount, __ATOMIC_ACQUIRE) == 2)) {
            uct_cuda_ipc_ns_region_detach(region,
                                          uct_cuda_ipc_ns_region_iter(region),
                                          &victims);
        }
        pthread_rwlock_unlock(&region->peer->lock);
        pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
    }

    uct_cuda_ipc_ns_region_put(region);
}


void uct_cuda_ipc_ns_cache_get_stats(uct_cuda_ipc_ns_cache_stats_t *stats)
{
    stats->hits      = __atomic_load_n(&uct_cuda_ipc_ns_cache.hits,
                                       __ATOMIC_RELAXED);
    stats->misses    = __atomic_load_n(&uct_cuda_ipc_ns_cache.misses,
                                       __ATOMIC_RELAXED);
    stats->evictions = __atomic_load_n(&uct_cuda_ipc_ns_cache.evictions,
                                       __ATOMIC_RELAXED);
    stats->unmaps    = __atomic_load_n(&uct_cuda_ipc_ns_cache.unmaps,
                                       __ATOMIC_RELAXED);

    pthread_mutex_lock(&uct_cuda_ipc_ns_cache.lock);
    stats->regions = uct_cuda_ipc_ns_cache.num_regions;
    stats->bytes   = uct_cuda_ipc_ns_cache.num_bytes;
    stats->peers   = uct_cuda_ipc_ns_cache.num_peers;
    pthread_mutex_unlock(&uct_cuda_ipc_ns_cache.lock);
}
