/*
 * cuda_ipc_ns benchmarks: the UCT node and copies the programs share
 * (bench_uct.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "bench_uct.h"

#include <uct/api/v2/uct_v2.h>
#include <uct/api/version.h>

#include <limits.h>

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


void bench_cuda_init(void)
{
    CUdevice device;
    CUcontext ctx;

    BENCH_CHECK(uct_cuda_ipc_ns_driver_load(getenv("UCX_CUDA_IPC_NS_DRIVER") ?:
                                            "libcuda.so.1") == UCS_OK,
                "loading the CUDA driver");
    BENCH_CU(cuDeviceGet, &device, 0);
    BENCH_CU(cuDevicePrimaryCtxRetain, &ctx, device);
    BENCH_CU(cuCtxSetCurrent, ctx);
}


CUmemAllocationProp bench_vmm_prop(void)
{
    CUmemAllocationProp prop = {};

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}


void bench_node_open(bench_node_t *node)
{
    const char *tl         = getenv("BENCH_TL") ?: "cu_ipc_ns";
    /* the memory domain (and component) of cu_ipc_ns is cuda_ipc_ns; UCX's
     * transports are named as their component */
    const char *md_name    = strcmp(tl, "cu_ipc_ns") ? tl : "cuda_ipc_ns";
    uct_iface_params_t params = {};
    uct_component_attr_t attr;
    uct_component_h *components;
    uct_iface_config_t *iface_config;
    uct_md_config_t *md_config;
    unsigned i, count;

    node->component = NULL;
    BENCH_CHECK(uct_query_components(&components, &count) == UCS_OK,
                "uct_query_components");
    for (i = 0; i < count; ++i) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, md_name)) {
            node->component = components[i];
        }
    }
    uct_release_component_list(components);
    BENCH_CHECK(node->component != NULL, "finding the transport's component");

    BENCH_CHECK(uct_md_config_read(node->component, NULL, NULL, &md_config) ==
                UCS_OK, "uct_md_config_read");
    BENCH_CHECK(uct_md_open(node->component, md_name, md_config,
                            &node->md) == UCS_OK, "uct_md_open");
    uct_config_release(md_config);
    BENCH_CHECK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                         &node->async) == UCS_OK, "async");
    BENCH_CHECK(uct_worker_create(node->async, UCS_THREAD_MODE_SINGLE,
                                  &node->worker) == UCS_OK, "worker");
    BENCH_CHECK(uct_md_iface_config_read(node->md, tl, NULL, NULL,
                                         &iface_config) == UCS_OK,
                "iface config");
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl;
    params.mode.device.dev_name = getenv("BENCH_DEV") ?: "cuda";
    BENCH_CHECK(uct_iface_open(node->md, node->worker, &params, iface_config,
                               &node->iface) == UCS_OK, "uct_iface_open");
    uct_config_release(iface_config);
    uct_iface_progress_enable(node->iface, UCT_PROGRESS_SEND);
    if (uct_iface_event_fd_get(node->iface, &node->event_fd) != UCS_OK) {
        BENCH_CHECK(!strcmp(tl, "cu_ipc_ns"), "uct_iface_event_fd_get");
        node->event_fd = -1; /* progress alone completes the copies */
    }
}


void bench_node_close(bench_node_t *node)
{
    uct_iface_close(node->iface);
    uct_worker_destroy(node->worker);
    ucs_async_context_destroy(node->async);
    uct_md_close(node->md);
}


void bench_mkey_pack(bench_node_t *node, uct_mem_h memh, void *address,
                     size_t length, void *buffer)
{
#if UCT_API >= UCT_VERSION(1, 16)
    uct_md_mkey_pack_params_t params = {};

    BENCH_CHECK(uct_md_mkey_pack_v2(node->md, memh, address, length, &params,
                                    buffer) == UCS_OK, "uct_md_mkey_pack_v2");
#else
    BENCH_CHECK(uct_md_mkey_pack(node->md, memh, buffer) == UCS_OK,
                "uct_md_mkey_pack");
#endif
}


static void bench_comp_cb(uct_completion_t *comp)
{
}


/*
 * @a count puts/gets in flight, posted and progressed to their completion.
 * Large copies wait on the iface's event fd rather than spin: the spinning
 * thread would compete for the CPU with the copy itself on the emulator (as
 * for cuMemcpyDtoD, which waits inside the driver).
 */
void bench_copy_window(bench_node_t *node, uct_ep_h ep, int is_put,
                       void *local, size_t size, unsigned count,
                       uint64_t remote, uct_rkey_t rkey)
{
    uct_completion_t comp  = {bench_comp_cb, (int)count, UCS_OK};
    struct pollfd pfd      = {node->event_fd, POLLIN, 0};
    ucs_status_t status;
    unsigned posted;
    uct_iov_t iov;

    for (posted = 0; posted < count;) {
        iov.buffer = UCS_PTR_BYTE_OFFSET(local, posted * size);
        iov.length = size;
        iov.memh   = NULL;
        iov.stride = 0;
        iov.count  = 1;
        status     = is_put ?
                     uct_ep_put_zcopy(ep, &iov, 1, remote + posted * size,
                                      rkey, &comp) :
                     uct_ep_get_zcopy(ep, &iov, 1, remote + posted * size,
                                      rkey, &comp);
        if (status == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(node->worker);
            continue;
        }
        BENCH_CHECK(UCS_STATUS_IS_ERR(status) == 0, "put/get zcopy");
        if (status == UCS_OK) {
            --comp.count; /* done at once: no callback */
        }
        ++posted;
    }
    while (comp.count > 0) {
        if (uct_worker_progress(node->worker) || (size < (1ul << 20))) {
            continue;
        }
        if ((node->event_fd >= 0) &&
            (uct_iface_event_arm(node->iface, UCT_EVENT_SEND_COMP) == UCS_OK)) {
            poll(&pfd, 1, 1000);
        }
    }
    BENCH_CHECK(comp.status == UCS_OK, "copy completion");
}


void bench_copy(bench_node_t *node, uct_ep_h ep, int is_put, void *local,
                size_t size, uint64_t remote, uct_rkey_t rkey)
{
    bench_copy_window(node, ep, is_put, local, size, 1, remote, rkey);
}


pid_t bench_start_exporter(const char *argv0, int *chan_p)
{
    char fd_str[16], self[PATH_MAX];
    ssize_t len;
    int sv[2];
    pid_t pid;

    /* this program's path, not /proc/self/exe itself: under valgrind that
     * is the tool, which refuses to run as a client (readlink answers the
     * client's path) */
    len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    BENCH_CHECK(len > 0, "readlink(/proc/self/exe)");
    self[len] = '\0';
    BENCH_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair");
    pid = fork();
    BENCH_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(sv[0]);
        snprintf(fd_str, sizeof(fd_str), "%d", sv[1]);
        execl(self, argv0, "--exporter", fd_str, (char*)NULL);
        _exit(127);
    }
    close(sv[1]);
    *chan_p = sv[0];
    return pid;
}
