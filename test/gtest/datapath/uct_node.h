/*
 * Data-path tests: one process's side of cu_ipc_ns through the UCT API — the
 * MD, an iface, its worker, CUDA buffers registered with the MD, endpoints
 * and blocking copies. Used by the tests and by their peer agents.
 */
#ifndef TEST_DATAPATH_UCT_NODE_H
#define TEST_DATAPATH_UCT_NODE_H

#include "common/cuda_alloc.h"
#include "common/hang_guard.h"
#include "common/uct_util.h"

extern "C" {
#include <uct/api/uct.h>
#include <uct/api/v2/uct_v2.h>
#include <ucs/async/async.h>
#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_addr.h"
#include "cuda_ipc_ns_cache.h"
}

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>


namespace test {

typedef std::vector<uint8_t> bytes_t;

enum buffer_kind : uint32_t {
    BUF_LEGACY = 1, /* cuMemAlloc: legacy IPC handle */
    BUF_VMM    = 2, /* cuMemCreate with POSIX fd handles */
    /* cuda_vmm_chunks: allocations of the minimal granularity back to back
     * (size: their number times the granularity) */
    BUF_VMM_CHUNKS = 3,
    /* cuMemCreate without a shareable handle type (vLLM's cumem allocator):
     * only its owner copies it (docs/owner-copies.md) */
    BUF_VMM_NO_FD  = 4,
    /* memory of a stream-ordered pool with POSIX-fd handles
     * (cuda_pool_buffer): exported through its pool */
    BUF_POOL       = 5,
    /* memory of a device's default pool (cuMemAllocAsync, cudaMallocAsync):
     * no shareable handle, only its owner copies it */
    BUF_POOL_DEFAULT = 6
};

/* Byte i of the pattern of @a seed */
static inline uint8_t pattern_byte(uint32_t seed, size_t i)
{
    return (uint8_t)(seed * 131u + i * 7u + (i >> 12));
}

bytes_t pattern(uint32_t seed, size_t size);


class uct_node {
public:
    struct buffer {
        std::unique_ptr<cuda_legacy_buffer> legacy;
        std::unique_ptr<cuda_vmm_buffer>    vmm;
        std::unique_ptr<cuda_vmm_chunks>    chunks;
        std::unique_ptr<cuda_pool_buffer>   pool;
        void                                *ptr;
        size_t                              size;
        uct_mem_h                           memh;
    };

    /* @a md_config: MD variables (without prefix) to set, e.g. CACHE=n;
     * @a thread_mode: the worker's */
    explicit uct_node(const config_changes_t &md_config = {},
                      const config_changes_t &iface_config = {},
                      ucs_thread_mode_t thread_mode = UCS_THREAD_MODE_SINGLE);
    ~uct_node();

    bool ok() const { return m_iface != nullptr; }
    uct_iface_h iface() const { return m_iface; }
    uct_component_h component() const { return m_component; }
    bytes_t dev_addr() const;
    bytes_t iface_addr() const;

    /* endpoint to a peer's iface; the error handler counts failures */
    uct_ep_h connect(const bytes_t &dev_addr, const bytes_t &iface_addr);
    unsigned ep_errors() const { return m_ep_errors; }

    /* a registered buffer on @a device; returns its index. @a hint: wanted
     * address */
    int alloc(buffer_kind kind, size_t size, CUdeviceptr hint = 0,
              int device = 0);
    void free(int index);
    /* BUF_VMM_CHUNKS: replace chunk @a chunk by a new allocation */
    void replace_chunk(int index, size_t chunk);
    /* deregister and register the buffer again (a new key) */
    bool reregister(int index);
    buffer &buf(int index) { return *m_buffers.at(index); }
    bytes_t rkey(int index);

    void fill(int index, uint32_t seed, size_t offset = 0, size_t size = 0);
    /* whether bytes [offset, offset + size) hold the pattern of @a seed */
    bool check(int index, uint32_t seed, size_t offset = 0, size_t size = 0);

    unsigned progress() { return uct_worker_progress(m_worker); }

    /* post a put/get of @a size bytes at @a local to @a remote_addr and
     * progress until it completes (or @a timeout_ms); returns its status */
    ucs_status_t copy(uct_ep_h ep, bool is_put, void *local, size_t size,
                      uint64_t remote_addr, uct_rkey_t rkey,
                      int timeout_ms = 60000);

    /* progress until @a cond() or @a timeout_ms; returns cond() */
    template <typename F> bool progress_until(F cond, int timeout_ms = 60000);

private:
    static ucs_status_t ep_error(void *arg, uct_ep_h ep, ucs_status_t status);

    uct_component_h      m_component = nullptr;
    uct_md_h             m_md        = nullptr;
    ucs_async_context_t  *m_async    = nullptr;
    uct_worker_h         m_worker    = nullptr;
    uct_iface_h          m_iface     = nullptr;
    std::vector<uct_ep_h> m_eps;
    std::map<int, std::unique_ptr<buffer>> m_buffers;
    int                  m_next_index = 0;
    unsigned             m_ep_errors  = 0;
};


/* Completion that records its status */
struct completion {
    uct_completion_t comp;
    bool             done   = false;
    ucs_status_t     status = UCS_OK;

    explicit completion(int count = 1);
    static void cb(uct_completion_t *comp);
};


/* Whether every completion of @a comps was called */
bool all_done(const std::vector<completion> &comps);

/* Current cache counters */
uct_cuda_ipc_ns_cache_stats_t cache_stats();

/* Load CUDASIM_FAULTS again from the environment (emulator only) */
bool fault_reload(const char *faults);

/* The emulator's copy-engine hold (test/cudasim/README.md): false on a real
 * driver. hold_copies(device or -1, hold); wait_copy_engine_quiescent()
 * returns when every stream is idle, at a held copy, or waiting for an
 * event not reached yet. */
bool copy_engine_hold_supported();
bool hold_copies(int device, bool hold);
bool wait_copy_engine_quiescent();

/* Holds the copy engine of a device for its lifetime: released on every
 * exit path, so that a failing test does not hang the next one */
class copy_engine_hold {
public:
    explicit copy_engine_hold(int device = -1) : m_device(device)
    {
        m_held = hold_copies(device, true);
    }
    ~copy_engine_hold() { release(); }
    bool ok() const { return m_held; }
    void release()
    {
        if (m_held) {
            hold_copies(m_device, false);
            m_held = false;
        }
    }
private:
    int  m_device;
    bool m_held;
};


uint64_t now_ms();


template <typename F> bool uct_node::progress_until(F cond, int timeout_ms)
{
    uint64_t deadline = now_ms() + hang_guard_ms(timeout_ms);

    while (!cond()) {
        if (now_ms() > deadline) {
            return cond();
        }
        progress();
    }
    return true;
}

} // namespace test

#endif
