/*
 * Test helpers: UCT components, memory domains and interfaces by name.
 */
#ifndef TEST_COMMON_UCT_UTIL_H
#define TEST_COMMON_UCT_UTIL_H

extern "C" {
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include "cuda_ipc_ns_addr.h"
}

#include <map>
#include <string>


namespace test {

/* the registered component called @a name, or nullptr */
uct_component_h find_component(const char *name);

/* UCX's own CUDA copy is loaded (component "cuda_cpy", transport
 * cuda_copy): a UCX built with CUDA that found libcuda.so.1, as on a GPU
 * node. cu_cpy_ns then steps aside (UCX_CUDA_CPY_NS_ENABLE=auto) */
bool ucx_cuda_copy_loaded();

/* The transport that copies CUDA memory in this UCX: UCX's cuda_copy when
 * loaded, else cu_cpy_ns */
const char *cuda_copy_tl();

/* UCX_TLS of the UCP tests: cu_ipc_ns, the CUDA copy transport
 * (cuda_copy_tl()) and tcp */
std::string module_tls();

/* Why a test that needs cu_cpy_ns skips where UCX's own cuda_copy is
 * loaded; empty where cu_cpy_ns is offered */
std::string cu_cpy_ns_absent_reason();

/* Changes to a UCX configuration: variable (without prefix) -> value */
typedef std::map<std::string, std::string> config_changes_t;

/* uct_config_modify() of the variable @a name (without prefix) of a
 * cuda_ipc_ns or cuda_cpy_ns table, on every UCX release */
ucs_status_t config_modify(void *config, const std::string &name,
                           const std::string &value);

/* Apply @a changes to @a config (uct_md_config_t, uct_iface_config_t, ...);
 * a gtest failure names each one UCX refuses */
void modify_config(void *config, const config_changes_t &changes);

/* An async context, a worker (of @a thread_mode) and an interface of
 * transport @a tl on device @a dev of @a md, with @a changes to its
 * configuration and @a err_handler (when not NULL); gtest failures (and
 * *iface == nullptr) on error */
void open_iface(uct_md_h md, const char *tl, const char *dev,
                ucs_async_context_t **async, uct_worker_h *worker,
                uct_iface_h *iface, const config_changes_t &changes = {},
                uct_error_handler_t err_handler = nullptr,
                void *err_handler_arg = nullptr,
                ucs_thread_mode_t thread_mode = UCS_THREAD_MODE_SINGLE);

/* undo open_iface(); ignores what is nullptr */
void close_iface(ucs_async_context_t *async, uct_worker_h worker,
                 uct_iface_h iface);

/* uct_iface_is_reachable() of @a iface for addresses in the cu_ipc_ns
 * formats (cu_ipc_ns and cu_cpy_ns use them) */
int iface_is_reachable(uct_iface_h iface,
                       const uct_cuda_ipc_ns_addr_device_t &dev,
                       const uct_cuda_ipc_ns_addr_iface_t &ifa);

} // namespace test

#endif
