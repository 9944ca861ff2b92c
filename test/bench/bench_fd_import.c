/*
 * cuda_ipc_ns: fd import latency, pidfd_getfd vs the broker, in one run.
 *
 * Forks an owner process that runs a broker and registers a memfd, then,
 * after a warm-up, imports that fd through each path (alternating, so both
 * see the same machine state), closing each imported fd, in rounds of at
 * least N imports per path (default 200) and BENCH_MIN_TIME / rounds
 * seconds, and prints the median latency of each path in microseconds and
 * the ratio broker/pidfd, per round: median and range (bench_stats.h).
 *
 * Usage: bench_fd_import [-n iterations] [-s bytes]
 *
 * Built by `make` (test/bench/Makefile.am) against the module library, in
 * the build directory: test/bench/bench_fd_import.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_fdx.h"
#include "cuda_ipc_ns_nsid.h"
#include "bench_stats.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static double bench_now_usec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}


static int bench_read_full(int fd, void *buf, size_t len)
{
    return recv(fd, buf, len, 0) == (ssize_t)len;
}


/* Owner: broker + one registered memfd until the parent says stop */
static int bench_owner(int chan, size_t size)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {.mode        = UCT_CUDA_IPC_NS_FDX_AUTO,
                                        .timeout     = 5.0,
                                        .allowed_uid = -1};
    const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
    uct_cuda_ipc_ns_rkey_info_t desc;
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    uct_cuda_ipc_ns_broker_t *broker;
    const char *addr;
    char c;
    void *p;
    int fd;

    memset(&desc, 0, sizeof(desc));
    fd = memfd_create("bench_fd_import", MFD_CLOEXEC);
    if ((fd < 0) || (ftruncate(fd, size) < 0)) {
        perror("memfd");
        return 1;
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(p, 0x5a, size);
    munmap(p, size);

    if ((uct_cuda_ipc_ns_broker_get(&cfg, &broker) != UCS_OK) ||
        (uct_cuda_ipc_ns_broker_register(broker, fd, 1, desc.token, &reg) !=
         UCS_OK)) {
        fprintf(stderr, "owner: cannot start the broker\n");
        return 1;
    }

    desc.handle_type           = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
    desc.handle.posix.fd       = fd;
    desc.handle.posix.alloc_id = 1;
    desc.pid                   = self->pid;
    desc.pid_ns                = self->pid_ns;
    desc.start_time            = self->start_time;
    addr = uct_cuda_ipc_ns_broker_addr(broker, &desc.broker_addr_len);
    memcpy(desc.broker_addr, addr, desc.broker_addr_len);
    if (send(chan, &desc, sizeof(desc), 0) != sizeof(desc)) {
        return 1;
    }

    /* wait for the parent to finish (EOF or a byte) */
    while ((recv(chan, &c, 1, 0) < 0) && (errno == EINTR)) {
    }

    uct_cuda_ipc_ns_broker_unregister(broker, reg);
    uct_cuda_ipc_ns_broker_put(broker);
    close(fd);
    return 0;
}


static int bench_import(uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode,
                        const uct_cuda_ipc_ns_rkey_info_t *desc, double *usec)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {.mode        = mode,
                                        .timeout     = 5.0,
                                        .allowed_uid = -1};
    ucs_status_t status;
    double t0;
    int fd;

    t0     = bench_now_usec();
    status = uct_cuda_ipc_ns_fdx_import(&cfg, desc, &fd, NULL);
    if (status != UCS_OK) {
        fprintf(stderr, "import (%s) failed: %s\n",
                uct_cuda_ipc_ns_fdx_mode_names[mode], ucs_status_string(status));
        return -1;
    }
    close(fd);
    *usec = bench_now_usec() - t0;
    return 0;
}


static int bench_check_bytes(uct_cuda_ipc_ns_broker_proto_fdx_mode_t mode,
                             const uct_cuda_ipc_ns_rkey_info_t *desc, size_t size)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = {.mode        = mode,
                                        .timeout     = 5.0,
                                        .allowed_uid = -1};
    int fd, ok = 0;
    uint8_t *p;
    size_t i;

    if (uct_cuda_ipc_ns_fdx_import(&cfg, desc, &fd, NULL) != UCS_OK) {
        return 0;
    }
    p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
        for (ok = 1, i = 0; ok && (i < size); ++i) {
            ok = (p[i] == 0x5a);
        }
        munmap(p, size);
    }
    close(fd);
    return ok;
}


int main(int argc, char **argv)
{
    const int rounds        = bench_rounds();
    const double round_time = bench_round_time();
    int iters = 200, warmup = 50, i, c, r, sv[2], status, ret = 1;
    uint64_t pidfd0, broker0, pidfd1, broker1;
    double med_pidfd[BENCH_MAX_ROUNDS], med_broker[BENCH_MAX_ROUNDS];
    double ratio[BENCH_MAX_ROUNDS], n[BENCH_MAX_ROUNDS], t_p, t_b, dt;
    bench_samples_t s_pidfd = {}, s_broker = {};
    bench_range_t rp, rb, rn;
    uct_cuda_ipc_ns_rkey_info_t desc;
    size_t size = 1 << 20;
    long it, total = 0;
    pid_t pid;

    while ((c = getopt(argc, argv, "n:s:h")) != -1) {
        switch (c) {
        case 'n':
            iters = atoi(optarg);
            break;
        case 's':
            size = strtoul(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: %s [-n iterations] [-s bytes]\n", argv[0]);
            return (c == 'h') ? 0 : 1;
        }
    }
    if ((iters <= 0) || (size == 0)) {
        fprintf(stderr, "bad arguments\n");
        return 1;
    }

    /* a dedicated channel: UCX may print on stdout */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }

    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    } else if (pid == 0) {
        close(sv[0]);
        _exit(bench_owner(sv[1], size));
    }
    close(sv[1]);

    if (!bench_read_full(sv[0], &desc, sizeof(desc))) {
        fprintf(stderr, "no descriptor from the owner\n");
        goto out;
    }

    if (!bench_check_bytes(UCT_CUDA_IPC_NS_FDX_PIDFD, &desc, size) ||
        !bench_check_bytes(UCT_CUDA_IPC_NS_FDX_BROKER, &desc, size)) {
        fprintf(stderr, "imported memory does not hold the owner's bytes\n");
        goto out;
    }

    for (i = 0; i < warmup; ++i) {
        if ((bench_import(UCT_CUDA_IPC_NS_FDX_PIDFD, &desc, &dt) < 0) ||
            (bench_import(UCT_CUDA_IPC_NS_FDX_BROKER, &desc, &dt) < 0)) {
            goto out;
        }
    }

    /* alternating, so both paths see the same machine state */
    uct_cuda_ipc_ns_fdx_get_stats(&pidfd0, &broker0);
    for (r = 0; r < rounds; ++r) {
        t_p = t_b = 0;
        it  = 0;
        do {
            if (bench_import(UCT_CUDA_IPC_NS_FDX_PIDFD, &desc, &dt) < 0) {
                goto out;
            }
            t_p += dt * 1e-6;
            bench_samples_add(&s_pidfd, dt);
            if (bench_import(UCT_CUDA_IPC_NS_FDX_BROKER, &desc, &dt) < 0) {
                goto out;
            }
            t_b += dt * 1e-6;
            bench_samples_add(&s_broker, dt);
            ++it;
        } while ((it < iters) || (t_p < round_time) || (t_b < round_time));
        med_pidfd[r]  = bench_samples_median(&s_pidfd);
        med_broker[r] = bench_samples_median(&s_broker);
        ratio[r]      = med_broker[r] / med_pidfd[r];
        n[r]          = it;
        total        += it;
    }
    uct_cuda_ipc_ns_fdx_get_stats(&pidfd1, &broker1);
    if ((pidfd1 - pidfd0 != total) || (broker1 - broker0 != total)) {
        fprintf(stderr, "path counters do not match: pidfd %lu broker %lu\n",
                (unsigned long)(pidfd1 - pidfd0),
                (unsigned long)(broker1 - broker0));
        goto out;
    }

    rp = bench_range(med_pidfd, rounds);
    rb = bench_range(med_broker, rounds);
    rn = bench_range(n, rounds);
    bench_print_settings("bench_fd_import");
    printf("fd import latency (import + close), %zu-byte memfd, %d rounds of "
           "%.0f-%.0f imports per path; per round the median import:\n",
           size, rounds, rn.min, rn.max);
    printf("  %-7s median of the rounds %8.2f us (rounds %.2f-%.2f)\n",
           "pidfd", rp.med, rp.min, rp.max);
    printf("  %-7s median of the rounds %8.2f us (rounds %.2f-%.2f)\n",
           "broker", rb.med, rb.min, rb.max);
    bench_print_ratio("fd import broker/pidfd", ratio, rounds);
    ret = 0;

out:
    close(sv[0]); /* EOF tells the owner to stop */
    while ((waitpid(pid, &status, 0) < 0) && (errno == EINTR)) {
    }
    free(s_pidfd.v);
    free(s_broker.v);
    return ret;
}
