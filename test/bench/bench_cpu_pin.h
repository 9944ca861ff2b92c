/*
 * cuda_ipc_ns benchmarks: the bandwidth figures run every thread of the
 * process on one CPU (docs/architecture.md, "Performance").
 *
 * On the emulator a copy is made by a CPU thread: the in-process reference
 * copy by the default stream's worker, a put or get by the transport's
 * stream's worker. A ratio of the two then also compares the CPUs those
 * threads happen to run on, and the vCPUs of a VM do not run at one speed:
 * their hosts' cores are shared with other guests, so for seconds at a time
 * one vCPU copies at half the other's speed (measured by the note of issue
 * 27). The scheduler keeps a thread on its CPU while it can, so such a spell
 * turns whole rounds of put/DtoD or get/DtoD to 0.4 while the next run's are
 * 1.0. A GPU has no such coupling: its copy engines serve every stream.
 * With every thread on one CPU, both sides of a ratio see the same CPU.
 *
 * The waiting side sleeps (cuStreamSynchronize, or poll on the interface's
 * event fd from 1 MiB), so the copying thread has the CPU to itself.
 *
 * BENCH_CPU=N pins to CPU N, BENCH_CPU=none leaves the threads where the
 * scheduler puts them; by default the last CPU the process may use.
 */
#ifndef CUDA_IPC_NS_BENCH_CPU_PIN_H_
#define CUDA_IPC_NS_BENCH_CPU_PIN_H_

#ifndef _GNU_SOURCE
#  define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>


/* the CPU to pin to, or -1 for none (BENCH_CPU) */
static inline int bench_pin_cpu_choice(const cpu_set_t *allowed)
{
    const char *v = getenv("BENCH_CPU");
    char *end;
    long cpu;

    if ((v != NULL) && !strcmp(v, "none")) {
        return -1;
    }
    if ((v != NULL) && (*v != '\0')) {
        cpu = strtol(v, &end, 10);
        if ((*end != '\0') || (cpu < 0) || (cpu >= CPU_SETSIZE) ||
            !CPU_ISSET(cpu, allowed)) {
            fprintf(stderr, "bench: BENCH_CPU=%s is not a CPU this process "
                    "may use\n", v);
            exit(1);
        }
        return (int)cpu;
    }
    for (cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
        if (CPU_ISSET(cpu, allowed)) {
            return (int)cpu;
        }
    }
    return -1;
}


/* the affinity of every thread of this process (threads started later
 * inherit it from the one that starts them) */
static inline void bench_set_threads_affinity(const cpu_set_t *set)
{
    struct dirent *e;
    DIR *dir;

    dir = opendir("/proc/self/task");
    if (dir == NULL) {
        perror("bench: /proc/self/task");
        exit(1);
    }
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        /* ESRCH: a thread that ended since the listing */
        if (sched_setaffinity((pid_t)atoi(e->d_name), sizeof(*set), set) &&
            (errno != ESRCH)) {
            perror("bench: sched_setaffinity");
            exit(1);
        }
    }
    closedir(dir);
}


/*
 * Every thread of the process on the CPU BENCH_CPU names; @a saved gets the
 * affinity to give back with bench_unpin_threads(). Returns the CPU, or -1
 * when not pinned.
 */
static inline int bench_pin_threads(cpu_set_t *saved)
{
    cpu_set_t one;
    int cpu;

    if (sched_getaffinity(0, sizeof(*saved), saved)) {
        perror("bench: sched_getaffinity");
        exit(1);
    }
    cpu = bench_pin_cpu_choice(saved);
    if (cpu >= 0) {
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        bench_set_threads_affinity(&one);
    }
    return cpu;
}


static inline void bench_unpin_threads(int cpu, const cpu_set_t *saved)
{
    if (cpu >= 0) {
        bench_set_threads_affinity(saved);
    }
}


/* what the figures' caption says about CPU placement */
static inline void bench_print_pin(int cpu)
{
    if (cpu >= 0) {
        printf("every thread on CPU %d for these figures (BENCH_CPU=none: "
               "where the scheduler puts them)\n", cpu);
    } else {
        printf("threads where the scheduler puts them (BENCH_CPU unset or "
               "a CPU number: all on one CPU)\n");
    }
}

#endif
