/*
 * NIXL agents and descriptor lists for the NIXL test and benchmark (see
 * nixl_side.h).
 */
#include "nixl_side.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <link.h>
#include <regex>
#include <stdexcept>
#include <thread>


namespace nixl_side {

const char *mem_kind_name(mem_kind kind)
{
    switch (kind) {
    case MEM_VMM:
        return "vmm";
    case MEM_VMM_CHUNKS:
        return "vmm_chunks";
    case MEM_LEGACY:
        return "legacy";
    case MEM_POOL:
        return "pool";
    }
    return "unknown";
}


device_buffer::device_buffer(mem_kind kind, size_t size) : m_size(size)
{
    switch (kind) {
    case MEM_VMM:
    case MEM_VMM_CHUNKS:
        m_vmm.reset(new test::cuda_vmm_memory(size, kind == MEM_VMM_CHUNKS));
        break;
    case MEM_LEGACY:
        m_legacy.reset(new test::cuda_legacy_buffer(size));
        break;
    case MEM_POOL:
        m_pool.reset(new test::cuda_pool_buffer(size));
        break;
    default:
        throw std::runtime_error("no allocator for memory kind " +
                                 std::to_string(kind));
    }
}


void *device_buffer::ptr() const
{
    return m_vmm ? m_vmm->ptr() : m_legacy ? m_legacy->ptr() : m_pool->ptr();
}


nixl_xfer_dlist_t layout::local_list(const void *base) const
{
    nixl_xfer_dlist_t list(VRAM_SEG);

    for (size_t i = 0; i < count; ++i) {
        list.addDesc(nixlBasicDesc((uintptr_t)base + local_offset(i), size, 0));
    }
    return list;
}


nixl_xfer_dlist_t layout::remote_list(uint64_t base) const
{
    nixl_xfer_dlist_t list(VRAM_SEG);

    for (size_t i = 0; i < count; ++i) {
        list.addDesc(nixlBasicDesc(base + remote_offset(i), size, 0));
    }
    return list;
}


agent::agent(const std::string &name) :
    m_name(name), m_registered(VRAM_SEG)
{
    nixlAgentConfig cfg(true); /* NIXL's progress thread, as vLLM runs it */
    nixl_b_params_t params;
    nixl_mem_list_t mems;

    m_agent.reset(new nixlAgent(name, cfg));
    m_status = m_agent->getPluginParams("UCX", mems, params);
    if (m_status == NIXL_SUCCESS) {
        m_status = m_agent->createBackend("UCX", params, m_backend);
    }
}


agent::~agent()
{
    if (!m_registered.isEmpty()) {
        m_agent->deregisterMem(m_registered);
    }
}


nixl_status_t agent::register_vram(void *ptr, size_t size)
{
    nixl_reg_dlist_t list(VRAM_SEG);
    nixl_status_t status;

    list.addDesc(nixlBlobDesc((uintptr_t)ptr, size, 0, ""));
    status = m_agent->registerMem(list);
    if (status == NIXL_SUCCESS) {
        m_registered.addDesc(list[0]);
    }
    return status;
}


nixl_status_t agent::post(nixl_xfer_op_t op, const nixl_xfer_dlist_t &local,
                          const nixl_xfer_dlist_t &remote,
                          const std::string &peer, const std::string &notif,
                          nixlXferReqH **req_p)
{
    nixl_opt_args_t args;
    nixl_status_t status;

    if (!notif.empty()) {
        args.notif = notif;
    }
    *req_p = nullptr;
    status = m_agent->createXferReq(op, local, remote, peer, *req_p, &args);
    if (status != NIXL_SUCCESS) {
        return status;
    }
    return m_agent->postXferReq(*req_p);
}


nixl_status_t agent::wait(nixlXferReqH *req, int guard_ms)
{
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(guard_ms);
    nixl_status_t status;

    /* NIXL's progress thread completes the request; polling the status is
     * how its users wait */
    while (((status = m_agent->getXferStatus(req)) == NIXL_IN_PROG) &&
           (std::chrono::steady_clock::now() < deadline)) {
        std::this_thread::yield();
    }
    return status;
}


bool agent::wait_notif(const std::string &peer, const std::string &msg,
                       int guard_ms)
{
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(guard_ms);

    for (;;) {
        auto &msgs = m_notifs[peer];
        for (auto it = msgs.begin(); it != msgs.end(); ++it) {
            if (*it == msg) {
                msgs.erase(it);
                return true;
            }
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        nixl_notifs_t fresh;
        if (m_agent->getNotifs(fresh) != NIXL_SUCCESS) {
            return false;
        }
        for (auto &entry : fresh) {
            auto &to = m_notifs[entry.first];
            to.insert(to.end(), entry.second.begin(), entry.second.end());
        }
        if (fresh.empty()) {
            std::this_thread::yield();
        }
    }
}


namespace {

/* a file name of the module: the plugin link (libuct_cudaipcns.so.N), the
 * library itself, or its copy in a wheel's nixl.libs/ucx/
 * (libuct_cudaipcns[-nixl].so.N.N.N) */
const std::regex module_name("^libuct_cuda(ipcns|_ipc_ns)[-.]");

/* UCX's core libraries: lib<name>.so..., or renamed by a wheel
 * (lib<name>-1a2b3c4d.so..., lib<name>-nixl[-1a2b3c4d].so...); not UCX's
 * modules (libuct_cma.so...) */
const std::regex core_name("^libuc([stpm])(-[0-9A-Za-z]+)*\\.so");

const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');

    return (slash != nullptr) ? slash + 1 : path;
}

/* the path of a loaded object whose file name names the module */
int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    const char *name = info->dlpi_name;

    if ((name != nullptr) && std::regex_search(base_name(name), module_name)) {
        *(std::string*)arg = name;
        return 1;
    }
    return 0;
}

} // namespace


bool module_cache_stats(uct_cuda_ipc_ns_cache_stats_t *stats, std::string *error)
{
    typedef void (*get_stats_t)(uct_cuda_ipc_ns_cache_stats_t*);
    std::string path;
    get_stats_t get_stats;
    void *dl;

    dl_iterate_phdr(find_module, &path);
    if (path.empty()) {
        *error = "UCX loaded no cu_ipc_ns module (UCX_PLUGIN_PATH?)";
        return false;
    }
    /* the object UCX loaded, not a second copy */
    dl = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (dl == nullptr) {
        *error = "dlopen(" + path + ", RTLD_NOLOAD): " + dlerror();
        return false;
    }
    get_stats = (get_stats_t)dlsym(dl, "uct_cuda_ipc_ns_cache_get_stats");
    if (get_stats == nullptr) {
        *error = path + " lacks uct_cuda_ipc_ns_cache_get_stats";
        dlclose(dl);
        return false;
    }
    get_stats(stats);
    dlclose(dl);
    return true;
}


bool mapped_ucx_files(ucx_files *files, std::string *error)
{
    std::ifstream maps("/proc/self/maps");
    std::string line;
    std::smatch core;

    if (!maps) {
        *error = std::string("cannot open /proc/self/maps: ") + strerror(errno);
        return false;
    }
    *files = ucx_files();
    /* address perms offset dev inode path: the path starts at the first '/' */
    while (std::getline(maps, line)) {
        size_t at = line.find('/');
        if (at == std::string::npos) {
            continue;
        }
        std::string path = line.substr(at);
        std::string base = base_name(path.c_str());
        if (std::regex_search(base, module_name)) {
            files->module.insert(path);
        } else if (std::regex_search(base, core, core_name)) {
            switch (core[1].str()[0]) {
            case 's': files->ucs.insert(path); break;
            case 't': files->uct.insert(path); break;
            case 'p': files->ucp.insert(path); break;
            case 'm': files->ucm.insert(path); break;
            }
        }
    }
    return true;
}

} // namespace nixl_side
