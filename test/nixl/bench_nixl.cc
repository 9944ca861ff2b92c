/*
 * NIXL WRITE and READ bandwidth between two pods as a ratio to UCP's own
 * put and get on the same buffers (docs/architecture.md, "Performance"):
 * the target, pid 1 of its own PID and network namespaces, registers one
 * device buffer with its nixlAgent (UCX backend, progress thread) and with a
 * UCP context of its own; the initiator times, round after round and
 * interleaved, a NIXL transfer of one descriptor (posted again and again)
 * and ucp_put_nbx / ucp_get_nbx of the same bytes completed by a flush, as
 * ucx_perftest's ucp_put_bw and ucp_get do, and prints per round the ratio
 * of their bandwidths (bench_stats.h). UCX 1.22 loads the module from
 * UCX_PLUGIN_PATH on both sides; UCX_TLS is cu_ipc_ns,cu_cpy_ns,tcp.
 *
 *   bench_nixl [SIZE_MIB ...]     (default 4 64; BENCH_ROUNDS, BENCH_MIN_TIME)
 */
#include "common/peer.h"
#include "common/pod_net.h"
#include "common/scratch_dir.h"
#include "nixl_side.h"

#include "bench_stats.h"

#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>


namespace {

const size_t MiB       = 1ul << 20;
const int    WAIT_MS   = 60000; /* hang guard only */
const long   MIN_ITERS = 5;
const char   *TARGET   = "bench_target";

struct bench_hello {
    int32_t  status;
    uint64_t addr;
    uint64_t size;
    uint32_t rkey_len;
    uint8_t  rkey[512];
};


/* A UCP context and worker as NIXL makes them (RMA, peer error handling) */
struct ucp_side {
    ucp_context_h context = nullptr;
    ucp_worker_h  worker  = nullptr;
    ucp_ep_h      ep      = nullptr;
    ucp_mem_h     memh    = nullptr;

    bool init(bool wakeup)
    {
        ucp_params_t params = {};
        ucp_worker_params_t wparams = {};

        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features   = UCP_FEATURE_RMA | (wakeup ? UCP_FEATURE_WAKEUP : 0);
        wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wparams.thread_mode = UCS_THREAD_MODE_MULTI;
        return (ucp_init(&params, NULL, &context) == UCS_OK) &&
               (ucp_worker_create(context, &wparams, &worker) == UCS_OK);
    }

    bool map(void *ptr, size_t size)
    {
        ucp_mem_map_params_t params = {};
        params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                            UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        params.address    = ptr;
        params.length     = size;
        return ucp_mem_map(context, &params, &memh) == UCS_OK;
    }

    ucs_status_t wait(ucs_status_ptr_t req)
    {
        ucs_status_t status;
        if ((req == nullptr) || UCS_PTR_IS_ERR(req)) {
            return UCS_PTR_STATUS(req);
        }
        while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
            ucp_worker_progress(worker);
        }
        ucp_request_free(req);
        return status;
    }

    ~ucp_side()
    {
        if (ep != nullptr) {
            ucp_request_param_t param = {};
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
            wait(ucp_ep_close_nbx(ep, &param));
        }
        if (memh != nullptr) {
            ucp_mem_unmap(context, memh);
        }
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
        }
        if (context != nullptr) {
            ucp_cleanup(context);
        }
    }
};


TEST_PEER_ROLE(nixl_bench_target)
{
    uint64_t size;
    char ready = 1;

    if (!chan.send(&ready, 1) || !chan.recv_obj(size, WAIT_MS) ||
        !test::cuda_init()) {
        return 1;
    }
    nixl_side::device_buffer buf(nixl_side::MEM_VMM, size);
    nixl_side::agent ag(TARGET);
    ucp_side ucp;
    bench_hello hello = {};
    nixl_blob_t md;
    void *rkey        = nullptr;
    size_t rkey_len   = 0;
    ucp_address_t *address;
    size_t address_len;

    hello.addr   = (uintptr_t)buf.ptr();
    hello.size   = size;
    hello.status = ((ag.status() == NIXL_SUCCESS) &&
                    (ag.register_vram(buf.ptr(), size) == NIXL_SUCCESS) &&
                    (ag.nixl().getLocalMD(md) == NIXL_SUCCESS) &&
                    ucp.init(true) && ucp.map(buf.ptr(), size) &&
                    (ucp_rkey_pack(ucp.context, ucp.memh, &rkey, &rkey_len) == UCS_OK) &&
                    (rkey_len <= sizeof(hello.rkey)) &&
                    (ucp_worker_get_address(ucp.worker, &address, &address_len) ==
                     UCS_OK)) ? 0 : -1;
    if (hello.status == 0) {
        memcpy(hello.rkey, rkey, rkey_len);
        hello.rkey_len = rkey_len;
        ucp_rkey_buffer_release(rkey);
    }
    if (!chan.send_obj(hello) || (hello.status != 0) ||
        !chan.send(md.data(), md.size()) || !chan.send(address, address_len)) {
        return 2;
    }
    ucp_worker_release_address(ucp.worker, address);

    /* UCP's wireup needs our worker's progress: NIXL's way, on its event fd */
    int efd, stop_fd = eventfd(0, EFD_CLOEXEC);
    if ((stop_fd < 0) || (ucp_worker_get_efd(ucp.worker, &efd) != UCS_OK)) {
        return 3;
    }
    std::thread progress([&]() {
        for (;;) {
            while (ucp_worker_progress(ucp.worker) != 0) {
            }
            if (ucp_worker_arm(ucp.worker) == UCS_ERR_BUSY) {
                continue;
            }
            struct pollfd pfd[2] = {{efd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
            if (((poll(pfd, 2, -1) < 0) && (errno != EINTR)) ||
                (pfd[1].revents & POLLIN)) {
                return;
            }
        }
    });
    char done;
    chan.recv(&done, 1, -1); /* the initiator is done, or gone */
    uint64_t one = 1;
    if (write(stop_fd, &one, sizeof(one)) != sizeof(one)) {
        progress.detach();
        return 4;
    }
    progress.join();
    close(stop_fd);
    return 0;
}


/* seconds per iteration of @a op, median of a round's iterations */
template <typename F> double time_round(F op)
{
    bench_samples_t samples = {};
    double end = bench_time_now() + bench_round_time(), t0, median;
    long n;

    for (n = 0; (n < MIN_ITERS) || (bench_time_now() < end); ++n) {
        t0 = bench_time_now();
        if (!op()) {
            fprintf(stderr, "bench_nixl: an operation failed\n");
            exit(1);
        }
        bench_samples_add(&samples, bench_time_now() - t0);
    }
    median = bench_samples_median(&samples);
    free(samples.v);
    return median;
}


int run(const std::vector<size_t> &sizes)
{
    size_t max_size = 0;
    for (size_t s : sizes) {
        max_size = std::max(max_size, s);
    }
    if (!test::cuda_init()) {
        fprintf(stderr, "bench_nixl: no CUDA driver or device\n");
        return 1;
    }
    if (!test::pod_network::get().created()) {
        fprintf(stderr, "bench_nixl: cannot make the node's network (root?)\n");
        return 1;
    }
    test::use_pod_network_device();
    setenv("UCX_TLS", "cu_ipc_ns,cu_cpy_ns,tcp", 0);
    test::scratch_dir sock_dir("cuda_ipc_ns_nixl");
    if (sock_dir.path().empty()) {
        return 1;
    }
    setenv("UCX_CUDA_IPC_NS_SOCK_DIR", sock_dir.path().c_str(), 1);

    test::peer_options opts;
    opts.new_pid_ns = true;
    opts.new_net_ns = true;
    int rc          = 1;
    {
        test::peer target("nixl_bench_target", opts);
        char ready;
        bench_hello hello;
        std::vector<char> md(1 << 20), address(1 << 16);
        ssize_t md_len, address_len;
        std::string name;
        uint64_t size = max_size;

        if ((target.chan().recv(&ready, 1, WAIT_MS) != 1)) {
            fprintf(stderr, "bench_nixl: the target never started\n");
            return 1;
        }
        std::string pod_ip;
        if (!test::pod_network::get().attach(target.pid(), &pod_ip)) {
            fprintf(stderr, "bench_nixl: cannot wire the target's pod\n");
            return 1;
        }
        if (!target.chan().send_obj(size) || !target.chan().recv_obj(hello, WAIT_MS) ||
            (hello.status != 0) ||
            ((md_len = target.chan().recv(md.data(), md.size(), WAIT_MS)) <= 0) ||
            ((address_len = target.chan().recv(address.data(), address.size(),
                                               WAIT_MS)) <= 0)) {
            fprintf(stderr, "bench_nixl: the target's setup failed\n");
            return 1;
        }

        nixl_side::device_buffer buf(nixl_side::MEM_VMM, max_size);
        nixl_side::agent ag("bench_initiator");
        ucp_side ucp;
        ucp_rkey_h rkey = nullptr;
        ucp_ep_params_t ep_params = {};
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
        ep_params.address    = (const ucp_address_t*)address.data();
        ep_params.err_mode   = UCP_ERR_HANDLING_MODE_PEER;
        if ((ag.status() != NIXL_SUCCESS) ||
            (ag.register_vram(buf.ptr(), max_size) != NIXL_SUCCESS) ||
            (ag.nixl().loadRemoteMD(nixl_blob_t(md.data(), md_len), name) !=
             NIXL_SUCCESS) ||
            !ucp.init(false) || !ucp.map(buf.ptr(), max_size) ||
            (ucp_ep_create(ucp.worker, &ep_params, &ucp.ep) != UCS_OK) ||
            (ucp_ep_rkey_unpack(ucp.ep, hello.rkey, &rkey) != UCS_OK)) {
            fprintf(stderr, "bench_nixl: the initiator's setup failed\n");
            return 1;
        }

        bench_print_settings("bench_nixl");
        printf("%10s %5s %12s %12s %12s %12s  (MB/s, medians of the rounds)\n",
               "size", "round", "NIXL WRITE", "UCP put", "NIXL READ", "UCP get");
        rc = 0;
        for (size_t size : sizes) {
            nixl_xfer_dlist_t local(VRAM_SEG), remote(VRAM_SEG);
            local.addDesc(nixlBasicDesc((uintptr_t)buf.ptr(), size, 0));
            remote.addDesc(nixlBasicDesc(hello.addr, size, 0));
            nixlXferReqH *write_req = nullptr, *read_req = nullptr;
            nixl_opt_args_t no_args;
            if ((ag.nixl().createXferReq(NIXL_WRITE, local, remote, TARGET,
                                         write_req, &no_args) != NIXL_SUCCESS) ||
                (ag.nixl().createXferReq(NIXL_READ, local, remote, TARGET,
                                         read_req, &no_args) != NIXL_SUCCESS)) {
                fprintf(stderr, "bench_nixl: createXferReq failed\n");
                return 1;
            }
            auto nixl_op = [&](nixlXferReqH *req) {
                nixl_status_t st = ag.nixl().postXferReq(req);
                return ((st == NIXL_IN_PROG) ? ag.wait(req, WAIT_MS) : st) ==
                       NIXL_SUCCESS;
            };
            auto ucp_op = [&](bool put) {
                ucp_request_param_t param = {};
                param.op_attr_mask        = UCP_OP_ATTR_FIELD_MEMH;
                param.memh                = ucp.memh;
                ucs_status_ptr_t req =
                        put ? ucp_put_nbx(ucp.ep, buf.ptr(), size, hello.addr,
                                          rkey, &param) :
                              ucp_get_nbx(ucp.ep, buf.ptr(), size, hello.addr,
                                          rkey, &param);
                ucp_request_param_t flush_param = {};
                return (ucp.wait(req) == UCS_OK) &&
                       (ucp.wait(ucp_ep_flush_nbx(ucp.ep, &flush_param)) == UCS_OK);
            };
            /* warm-up on the buffers timed: mappings and lanes in place */
            for (int i = 0; i < 3; ++i) {
                if (!nixl_op(write_req) || !nixl_op(read_req) || !ucp_op(true) ||
                    !ucp_op(false)) {
                    fprintf(stderr, "bench_nixl: warm-up transfers failed\n");
                    return 1;
                }
            }
            int rounds = bench_rounds();
            double write_ratio[BENCH_MAX_ROUNDS], read_ratio[BENCH_MAX_ROUNDS];
            for (int r = 0; r < rounds; ++r) {
                double t_write = time_round([&]() { return nixl_op(write_req); });
                double t_put   = time_round([&]() { return ucp_op(true); });
                double t_read  = time_round([&]() { return nixl_op(read_req); });
                double t_get   = time_round([&]() { return ucp_op(false); });
                write_ratio[r] = t_put / t_write;
                read_ratio[r]  = t_get / t_read;
                printf("%10zu %5d %12.0f %12.0f %12.0f %12.0f\n", size, r + 1,
                       size / t_write / 1e6, size / t_put / 1e6,
                       size / t_read / 1e6, size / t_get / 1e6);
            }
            std::string mib = std::to_string(size / MiB) + " MiB";
            bench_print_ratio(("NIXL WRITE / UCP put " + mib).c_str(),
                              write_ratio, rounds);
            bench_print_ratio(("NIXL READ / UCP get " + mib).c_str(),
                              read_ratio, rounds);
            ag.nixl().releaseXferReq(write_req);
            ag.nixl().releaseXferReq(read_req);
        }
        ucp_rkey_destroy(rkey);
        ag.nixl().invalidateRemoteMD(TARGET);
        target.chan().send(&ready, 1);
        if (target.wait() != 0) {
            fprintf(stderr, "bench_nixl: the target failed\n");
            rc = 1;
        }
    }
    return rc;
}

} // namespace


int main(int argc, char **argv)
{
    std::vector<size_t> sizes;
    int exit_code;

    setenv("UCX_CUDA_IPC_NS_DRIVER", CUDASIM_LIB_PATH, 0);
    if (test::peer_main(argc, argv, &exit_code)) {
        return exit_code;
    }
    for (int i = 1; i < argc; ++i) {
        long mib = atol(argv[i]);
        if (mib <= 0) {
            fprintf(stderr, "usage: bench_nixl [SIZE_MIB ...]\n");
            return 2;
        }
        sizes.push_back(mib * MiB);
    }
    if (sizes.empty()) {
        sizes = {4 * MiB, 64 * MiB};
    }
    test::pod_network::get().create();
    exit_code = run(sizes);
    test::pod_network::get().destroy();
    return exit_code;
}
