/*
 * NIXL the way vLLM and Dynamo run it (docs/testing.md, "NIXL"): an agent
 * with the UCX backend and NIXL's progress thread, VRAM_SEG registrations of
 * device memory the application allocated through the CUDA driver, metadata
 * blobs exchanged out of band, transfers of descriptor lists with a
 * notification. Shared by the test (test_nixl_pods.cc) and the benchmark
 * (bench_nixl.cc); the module is never linked: UCX loads it from
 * UCX_PLUGIN_PATH, as in a pod, or from a wheel's nixl.libs/ucx/.
 */
#ifndef TEST_NIXL_NIXL_SIDE_H
#define TEST_NIXL_NIXL_SIDE_H

#include "common/cuda_alloc.h"

extern "C" {
#include "cuda_ipc_ns_cache.h"
}

#include <nixl.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>


namespace nixl_side {

/* The kinds of device memory a side transfers: VMM memory (cuMemCreate with
 * POSIX-fd handles) in one allocation, and in the expandable-segments layout
 * (allocations of the granularity mapped back to back, registered as one
 * range: docs/framework-memory.md); legacy cuMemAlloc memory (PyTorch's
 * default allocator), opened by the importer itself between pods whose
 * pid numbers differ (docs/owner-copies.md, "Which path a legacy key
 * takes"); memory of a stream-ordered pool of the POSIX-fd handle type
 * (docs/driver-contract.md) */
enum mem_kind : int32_t {
    MEM_VMM        = 0,
    MEM_VMM_CHUNKS = 1,
    MEM_LEGACY     = 2,
    MEM_POOL       = 3
};

const char *mem_kind_name(mem_kind kind);

/* Device memory of @a kind, @a size bytes: throws when it cannot be had */
class device_buffer {
public:
    device_buffer(mem_kind kind, size_t size);
    void *ptr() const;
    size_t size() const { return m_size; }
private:
    size_t                                   m_size;
    std::unique_ptr<test::cuda_vmm_memory>   m_vmm;
    std::unique_ptr<test::cuda_legacy_buffer> m_legacy;
    std::unique_ptr<test::cuda_pool_buffer>  m_pool;
};


/* @a count descriptors of @a size bytes each, @a stride apart (gaps in
 * between, so NIXL cannot merge them into one); descriptor i of the local
 * list is the remote list's count-1-i */
struct layout {
    size_t count;
    size_t size;
    size_t stride;

    static layout of(size_t count, size_t size) { return {count, size, 2 * size}; }
    size_t span() const { return count * stride; }
    size_t local_offset(size_t i) const { return i * stride; }
    size_t remote_offset(size_t i) const { return (count - 1 - i) * stride; }

    nixl_xfer_dlist_t local_list(const void *base) const;
    nixl_xfer_dlist_t remote_list(uint64_t base) const;
};


/* A nixlAgent with the UCX backend and NIXL's progress thread */
class agent {
public:
    explicit agent(const std::string &name);
    ~agent();

    /* NIXL_SUCCESS when the backend exists */
    nixl_status_t status() const { return m_status; }
    nixlAgent &nixl() { return *m_agent; }
    const std::string &name() const { return m_name; }

    /* one VRAM_SEG descriptor of device 0 (the emulator's and a pod's one
     * GPU) over [ptr, ptr + size); deregistered by the destructor */
    nixl_status_t register_vram(void *ptr, size_t size);

    /* post @a op of @a local to @a remote of @a peer (with a notification
     * when @a notif is not empty) and return the request in *req_p */
    nixl_status_t post(nixl_xfer_op_t op, const nixl_xfer_dlist_t &local,
                       const nixl_xfer_dlist_t &remote, const std::string &peer,
                       const std::string &notif, nixlXferReqH **req_p);

    /* poll the request's status until it is no longer NIXL_IN_PROG (the
     * progress thread moves it); NIXL_IN_PROG after @a guard_ms, a hang
     * guard only */
    nixl_status_t wait(nixlXferReqH *req, int guard_ms);

    /* wait for a notification from @a peer whose message is @a msg; false
     * after @a guard_ms */
    bool wait_notif(const std::string &peer, const std::string &msg, int guard_ms);

private:
    std::string                m_name;
    std::unique_ptr<nixlAgent> m_agent;
    nixlBackendH               *m_backend = nullptr;
    nixl_status_t              m_status   = NIXL_ERR_NOT_POSTED;
    nixl_reg_dlist_t           m_registered;
    nixl_notifs_t              m_notifs;  /* received, not yet waited for */
};


/* The remote-mapping cache's figures of the cu_ipc_ns module that UCX
 * loaded into this process (each put or get through cu_ipc_ns makes a
 * lookup, hits + misses; each imported allocation is a region); false with
 * a message in *error when no such module is loaded */
bool module_cache_stats(uct_cuda_ipc_ns_cache_stats_t *stats, std::string *error);


/* The files mapped into this process (/proc/self/maps) of UCX's core
 * libraries, under their own or a wheel's bundled names (libucs.so.0.0.0,
 * libucs-1a2b3c4d.so.0.0.0, libucs-nixl.so.0), and of the cu_ipc_ns module:
 * one file each where the process runs one UCX (docs/testing.md, "NIXL's
 * wheel") */
struct ucx_files {
    std::set<std::string> ucs, uct, ucp, ucm, module;
};

/* false with a message in *error when /proc/self/maps cannot be read */
bool mapped_ucx_files(ucx_files *files, std::string *error);

} // namespace nixl_side

#endif
