/*
 * Test helpers: UCT objects by name (see uct_util.h).
 */
#include "uct_util.h"

#include <gtest/gtest.h>
#include <cstdint>
#include <cstring>
#include <vector>


namespace test {

uct_component_h find_component(const char *name)
{
    uct_component_h *components, found = nullptr;
    uct_component_attr_t attr;
    unsigned count;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return nullptr;
    }
    for (unsigned i = 0; i < count; ++i) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, name)) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}


bool ucx_cuda_copy_loaded()
{
    return find_component("cuda_cpy") != nullptr;
}


const char *cuda_copy_tl()
{
    return ucx_cuda_copy_loaded() ? "cuda_copy" : "cu_cpy_ns";
}


std::string module_tls()
{
    return std::string("cu_ipc_ns,") + cuda_copy_tl() + ",tcp";
}


std::string cu_cpy_ns_absent_reason()
{
    if (!ucx_cuda_copy_loaded()) {
        return "";
    }
    return "checks cu_cpy_ns, which steps aside for UCX's own cuda_copy "
           "(loaded here: a UCX built with CUDA and a libcuda.so.1)";
}


ucs_status_t config_modify(void *config, const std::string &name,
                           const std::string &value)
{
    /* UCX 1.13 matches the name without the table's prefix; from 1.15 the
     * parser matches prefix + name */
    static const char *prefixes[] = {"", "CUDA_IPC_NS_", "CUDA_CPY_NS_"};
    ucs_status_t status = UCS_ERR_NO_ELEM;

    for (const char *prefix : prefixes) {
        status = uct_config_modify(config, (prefix + name).c_str(),
                                   value.c_str());
        if (status != UCS_ERR_NO_ELEM) {
            break;
        }
    }
    return status;
}


void modify_config(void *config, const config_changes_t &changes)
{
    for (const auto &kv : changes) {
        EXPECT_EQ(UCS_OK, config_modify(config, kv.first, kv.second))
                << kv.first;
    }
}


void open_iface(uct_md_h md, const char *tl, const char *dev,
                ucs_async_context_t **async, uct_worker_h *worker,
                uct_iface_h *iface, const config_changes_t &changes,
                uct_error_handler_t err_handler, void *err_handler_arg,
                ucs_thread_mode_t thread_mode)
{
    uct_iface_config_t *config;
    uct_iface_params_t params = {};

    *iface = nullptr;
    ASSERT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                               async));
    ASSERT_EQ(UCS_OK, uct_worker_create(*async, thread_mode,
                                        worker));
    ASSERT_EQ(UCS_OK, uct_md_iface_config_read(md, tl, NULL, NULL, &config));
    modify_config(config, changes);
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    if (err_handler != nullptr) {
        params.field_mask     |= UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                 UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG;
        params.err_handler     = err_handler;
        params.err_handler_arg = err_handler_arg;
    }
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl;
    params.mode.device.dev_name = dev;
    ASSERT_EQ(UCS_OK, uct_iface_open(md, *worker, &params, config, iface));
    uct_config_release(config);
}


void close_iface(ucs_async_context_t *async, uct_worker_h worker,
                 uct_iface_h iface)
{
    if (iface != nullptr) {
        uct_iface_close(iface);
    }
    if (worker != nullptr) {
        uct_worker_destroy(worker);
    }
    if (async != nullptr) {
        ucs_async_context_destroy(async);
    }
}


int iface_is_reachable(uct_iface_h iface,
                       const uct_cuda_ipc_ns_addr_device_t &dev,
                       const uct_cuda_ipc_ns_addr_iface_t &ifa)
{
    std::vector<uint8_t> dev_buf(UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE);
    std::vector<uint8_t> ifa_buf(UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE);

    uct_cuda_ipc_ns_addr_device_pack(&dev, dev_buf.data());
    uct_cuda_ipc_ns_addr_iface_pack(&ifa, ifa_buf.data());
    return uct_iface_is_reachable(iface, (uct_device_addr_t*)dev_buf.data(),
                                  (uct_iface_addr_t*)ifa_buf.data());
}

} // namespace test
