/*
 * Data-path tests: one process's side of cu_ipc_ns (see uct_node.h).
 */
#include "uct_node.h"

#include <gtest/gtest.h>
#include <dlfcn.h>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <time.h>


namespace test {

uint64_t now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000ull + ts.tv_nsec / 1000000;
}


bytes_t pattern(uint32_t seed, size_t size)
{
    bytes_t bytes(size);
    for (size_t i = 0; i < size; ++i) {
        bytes[i] = pattern_byte(seed, i);
    }
    return bytes;
}


uct_node::uct_node(const config_changes_t &md_config,
                   const config_changes_t &iface_config,
                   ucs_thread_mode_t thread_mode)
{
    uct_md_config_t *md_cfg;
    ucs_status_t status;

    m_component = find_component("cuda_ipc_ns");
    if ((m_component == nullptr) || !cuda_init() ||
        (uct_md_config_read(m_component, NULL, NULL, &md_cfg) != UCS_OK)) {
        return;
    }
    modify_config(md_cfg, md_config);
    status = uct_md_open(m_component, "cuda_ipc_ns", md_cfg, &m_md);
    uct_config_release(md_cfg);
    if (status != UCS_OK) {
        m_md = nullptr;
        return;
    }

    open_iface(m_md, "cu_ipc_ns", "cuda", &m_async, &m_worker, &m_iface,
               iface_config, ep_error, this, thread_mode);
    if (m_iface != nullptr) {
        uct_iface_progress_enable(m_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }
}


uct_node::~uct_node()
{
    for (uct_ep_h ep : m_eps) {
        uct_ep_destroy(ep);
    }
    while (!m_buffers.empty()) {
        free(m_buffers.begin()->first);
    }
    close_iface(m_async, m_worker, m_iface);
    if (m_md != nullptr) {
        uct_md_close(m_md);
    }
}


ucs_status_t uct_node::ep_error(void *arg, uct_ep_h ep, ucs_status_t status)
{
    static_cast<uct_node*>(arg)->m_ep_errors++;
    return UCS_OK;
}


bytes_t uct_node::dev_addr() const
{
    bytes_t addr(UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);
    EXPECT_EQ(UCS_OK, uct_iface_get_device_address(
                      m_iface, (uct_device_addr_t*)addr.data()));
    return addr;
}


bytes_t uct_node::iface_addr() const
{
    bytes_t addr(UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);
    EXPECT_EQ(UCS_OK, uct_iface_get_address(m_iface,
                                            (uct_iface_addr_t*)addr.data()));
    return addr;
}


uct_ep_h uct_node::connect(const bytes_t &dev_addr, const bytes_t &iface_addr)
{
    uct_ep_params_t params = {};
    uct_ep_h ep;

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = m_iface;
    params.dev_addr   = (const uct_device_addr_t*)dev_addr.data();
    params.iface_addr = (const uct_iface_addr_t*)iface_addr.data();
    if (!uct_iface_is_reachable(m_iface, params.dev_addr, params.iface_addr) ||
        (uct_ep_create(&params, &ep) != UCS_OK)) {
        return nullptr;
    }
    m_eps.push_back(ep);
    return ep;
}


int uct_node::alloc(buffer_kind kind, size_t size, CUdeviceptr hint,
                    int device)
{
    std::unique_ptr<buffer> b(new buffer());

    if (kind == BUF_LEGACY) {
        b->legacy.reset(new cuda_legacy_buffer(size, device));
        b->ptr = b->legacy->ptr();
    } else if ((kind == BUF_POOL) || (kind == BUF_POOL_DEFAULT)) {
        b->pool.reset(new cuda_pool_buffer(size, device,
                                           kind == BUF_POOL));
        b->ptr = b->pool->ptr();
    } else if (kind == BUF_VMM_CHUNKS) {
        b->chunks.reset(new cuda_vmm_chunks(1, device));
        size_t chunk = b->chunks->chunk_size();
        b->chunks.reset(new cuda_vmm_chunks((size + chunk - 1) / chunk,
                                            device));
        b->ptr = b->chunks->ptr();
        size   = b->chunks->size();
    } else {
        b->vmm.reset(new cuda_vmm_buffer(size, kind != BUF_VMM_NO_FD, hint,
                                         device));
        b->ptr = b->vmm->ptr();
    }
    b->size = size;
    if (uct_md_mem_reg(m_md, b->ptr, size, UCT_MD_MEM_ACCESS_ALL, &b->memh) !=
        UCS_OK) {
        return -1;
    }
    int index = m_next_index++;
    m_buffers[index] = std::move(b);
    return index;
}


void uct_node::free(int index)
{
    auto it = m_buffers.find(index);
    if (it == m_buffers.end()) {
        return;
    }
    uct_md_mem_dereg(m_md, it->second->memh);
    m_buffers.erase(it);
}


void uct_node::replace_chunk(int index, size_t chunk)
{
    buf(index).chunks->replace(chunk);
}


bool uct_node::reregister(int index)
{
    buffer &b = buf(index);

    uct_md_mem_dereg(m_md, b.memh);
    return uct_md_mem_reg(m_md, b.ptr, b.size, UCT_MD_MEM_ACCESS_ALL,
                          &b.memh) == UCS_OK;
}


bytes_t uct_node::rkey(int index)
{
    uct_md_attr_t attr;
    EXPECT_EQ(UCS_OK, uct_md_query(m_md, &attr));
    bytes_t key(attr.rkey_packed_size);
    EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, buf(index).memh, key.data()));
    return key;
}


void uct_node::fill(int index, uint32_t seed, size_t offset, size_t size)
{
    buffer &b = buf(index);
    size      = size ? size : b.size - offset;
    bytes_t bytes(size);
    for (size_t i = 0; i < size; ++i) {
        bytes[i] = pattern_byte(seed, offset + i);
    }
    cuda_write((char*)b.ptr + offset, bytes.data(), size);
}


bool uct_node::check(int index, uint32_t seed, size_t offset, size_t size)
{
    buffer &b = buf(index);
    size      = size ? size : b.size - offset;
    bytes_t bytes(size);
    cuda_read(bytes.data(), (char*)b.ptr + offset, size);
    for (size_t i = 0; i < size; ++i) {
        if (bytes[i] != pattern_byte(seed, offset + i)) {
            ADD_FAILURE() << "byte " << offset + i << " of buffer " << index
                          << " is " << (int)bytes[i] << ", expected "
                          << (int)pattern_byte(seed, offset + i);
            return false;
        }
    }
    return true;
}


completion::completion(int count)
{
    comp.func   = cb;
    comp.count  = count;
    comp.status = UCS_OK;
}


void completion::cb(uct_completion_t *comp)
{
    completion *self = ucs_container_of(comp, completion, comp);
    self->done       = true;
    self->status     = comp->status;
}


ucs_status_t uct_node::copy(uct_ep_h ep, bool is_put, void *local, size_t size,
                            uint64_t remote_addr, uct_rkey_t rkey,
                            int timeout_ms)
{
    uct_iov_t iov = {local, size, nullptr, 0, 1};
    completion comp;
    ucs_status_t status;

    status = is_put ?
             uct_ep_put_zcopy(ep, &iov, 1, remote_addr, rkey, &comp.comp) :
             uct_ep_get_zcopy(ep, &iov, 1, remote_addr, rkey, &comp.comp);
    if (status != UCS_INPROGRESS) {
        return status;
    }
    if (!progress_until([&] { return comp.done; }, timeout_ms)) {
        return UCS_ERR_TIMED_OUT;
    }
    return comp.status;
}


bool all_done(const std::vector<completion> &comps)
{
    for (const completion &c : comps) {
        if (!c.done) {
            return false;
        }
    }
    return true;
}


uct_cuda_ipc_ns_cache_stats_t cache_stats()
{
    uct_cuda_ipc_ns_cache_stats_t stats;
    uct_cuda_ipc_ns_cache_get_stats(&stats);
    return stats;
}


bool fault_reload(const char *faults)
{
    void *dl = dlopen(getenv("UCX_CUDA_IPC_NS_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
    if (dl == nullptr) {
        return false;
    }
    auto reload = (int (*)(void))dlsym(dl, "cudasim_fault_reload");
    dlclose(dl);
    if (reload == nullptr) {
        return false;
    }
    setenv("CUDASIM_FAULTS", faults, 1);
    return reload() >= 0;
}


/* a test hook of the emulator; nullptr on a real driver */
static void *cudasim_sym(const char *name)
{
    void *dl = dlopen(getenv("UCX_CUDA_IPC_NS_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
    if (dl == nullptr) {
        return nullptr;
    }
    void *sym = dlsym(dl, name);
    dlclose(dl);
    return sym;
}


bool copy_engine_hold_supported()
{
    return (cudasim_sym("cudasim_hold_copies") != nullptr) &&
           (cudasim_sym("cudasim_wait_quiescent") != nullptr);
}


bool hold_copies(int device, bool hold)
{
    auto fn = (int (*)(int, int))cudasim_sym("cudasim_hold_copies");
    return (fn != nullptr) && (fn(device, hold) == 0);
}


bool wait_copy_engine_quiescent()
{
    auto fn = (int (*)(void))cudasim_sym("cudasim_wait_quiescent");
    return (fn != nullptr) && (fn() == 0);
}

} // namespace test
