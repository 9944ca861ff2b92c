/*
 * cuda_ipc_ns: fd import latency, pidfd_getfd vs the broker, in one run.
 *
 * Forks an owner process that runs a broker and registers a memfd, then
 * imports that fd N times through each path (alternating, so both see the
 * same machine state), closing each imported fd, and prints the median
 * latency of each path in microseconds and the ratio broker/pidfd.
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


static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}


static double bench_percentile(double *v, int n, double pct)
{
    qsort(v, n, sizeof(*v), bench_cmp_double);
    return v[(int)((n - 1) * pct + 0.5)];
}


static int bench_read_full(int fd, void *buf, size_t len)
{
    return recv(fd, buf, len, 0) == (ssize_t)len;
}


/* Owner: broker + one registered memfd until the parent says stop */
static int bench_owner(int chan, size_t size)
{
    uct_cuda_ipc_ns_fdx_config_t cfg = {.mode        = UCT_CUDA_IPC_NS_FDX_AUTO,
                                        .timeout     = 5.0,
                                        .allowed_uid = -1};
    const uct_cuda_ipc_ns_identity_t *self = uct_cuda_ipc_ns_self();
    uct_cuda_ipc_ns_rkey_info_t desc;
    uct_cuda_ipc_ns_broker_reg_t *reg;
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


static int bench_import(uct_cuda_ipc_ns_fdx_mode_t mode,
                        const uct_cuda_ipc_ns_rkey_info_t *desc, double *usec)
{
    uct_cuda_ipc_ns_fdx_config_t cfg = {.mode        = mode,
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


static int bench_check_bytes(uct_cuda_ipc_ns_fdx_mode_t mode,
                             const uct_cuda_ipc_ns_rkey_info_t *desc, size_t size)
{
    uct_cuda_ipc_ns_fdx_config_t cfg = {.mode        = mode,
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
    int iters = 2000, warmup = 50, i, c, sv[2], status, ret = 1;
    uint64_t pidfd0, broker0, pidfd1, broker1;
    uct_cuda_ipc_ns_rkey_info_t desc;
    double *t_pidfd, *t_broker;
    double med_pidfd, med_broker;
    size_t size = 1 << 20;
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

    t_pidfd  = calloc(iters, sizeof(double));
    t_broker = calloc(iters, sizeof(double));
    if ((t_pidfd == NULL) || (t_broker == NULL) ||
        !bench_read_full(sv[0], &desc, sizeof(desc))) {
        fprintf(stderr, "no descriptor from the owner\n");
        goto out;
    }

    if (!bench_check_bytes(UCT_CUDA_IPC_NS_FDX_PIDFD, &desc, size) ||
        !bench_check_bytes(UCT_CUDA_IPC_NS_FDX_BROKER, &desc, size)) {
        fprintf(stderr, "imported memory does not hold the owner's bytes\n");
        goto out;
    }

    for (i = 0; i < warmup; ++i) {
        if ((bench_import(UCT_CUDA_IPC_NS_FDX_PIDFD, &desc, &t_pidfd[0]) < 0) ||
            (bench_import(UCT_CUDA_IPC_NS_FDX_BROKER, &desc, &t_broker[0]) < 0)) {
            goto out;
        }
    }

    uct_cuda_ipc_ns_fdx_get_stats(&pidfd0, &broker0);
    for (i = 0; i < iters; ++i) {
        if ((bench_import(UCT_CUDA_IPC_NS_FDX_PIDFD, &desc, &t_pidfd[i]) < 0) ||
            (bench_import(UCT_CUDA_IPC_NS_FDX_BROKER, &desc, &t_broker[i]) < 0)) {
            goto out;
        }
    }
    uct_cuda_ipc_ns_fdx_get_stats(&pidfd1, &broker1);
    if ((pidfd1 - pidfd0 != iters) || (broker1 - broker0 != iters)) {
        fprintf(stderr, "path counters do not match: pidfd %lu broker %lu\n",
                (unsigned long)(pidfd1 - pidfd0),
                (unsigned long)(broker1 - broker0));
        goto out;
    }

    med_pidfd  = bench_percentile(t_pidfd, iters, 0.5);
    med_broker = bench_percentile(t_broker, iters, 0.5);
    printf("fd import latency, %d iterations each (import + close), "
           "%zu-byte memfd\n", iters, size);
    printf("  %-7s median %8.2f us   p10 %8.2f us   p90 %8.2f us\n", "pidfd",
           med_pidfd, bench_percentile(t_pidfd, iters, 0.1),
           bench_percentile(t_pidfd, iters, 0.9));
    printf("  %-7s median %8.2f us   p10 %8.2f us   p90 %8.2f us\n", "broker",
           med_broker, bench_percentile(t_broker, iters, 0.1),
           bench_percentile(t_broker, iters, 0.9));
    printf("  ratio broker/pidfd (median): %.2f\n", med_broker / med_pidfd);
    ret = 0;

out:
    close(sv[0]); /* EOF tells the owner to stop */
    while ((waitpid(pid, &status, 0) < 0) && (errno == EINTR)) {
    }
    free(t_pidfd);
    free(t_broker);
    return ret;
}
