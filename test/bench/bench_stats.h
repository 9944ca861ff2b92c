/*
 * cuda_ipc_ns benchmarks: how every figure is taken (docs/architecture.md,
 * "Performance").
 *
 * A figure is measured in ROUNDS rounds (BENCH_ROUNDS, default 5). Each
 * round runs the operation until it has taken at least MIN_TIME / ROUNDS
 * seconds (BENCH_MIN_TIME, default 0.5 s per figure) and at least the
 * program's minimum number of iterations, after the program warmed the
 * operation up on the buffers it times. A round's figure is the median of
 * its iterations' times, where the program times them one by one (on a
 * shared machine, an iteration preempted by another process is an outlier
 * that the median leaves out and a mean would not). A ratio is computed
 * per round, from the two operations of that round (interleaved, so both
 * see the same machine state), and printed as the median of the rounds
 * with their minimum and maximum, in one line that contrib/bench.sh reads:
 *
 *   ratio NAME: MEDIAN (min MIN, max MAX, ROUNDS rounds)
 */
#ifndef CUDA_IPC_NS_BENCH_STATS_H_
#define CUDA_IPC_NS_BENCH_STATS_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_ROUNDS 99


typedef struct {
    double med, min, max;
    int    n;
} bench_range_t;


static inline double bench_time_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static inline int bench_stats_cmp(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}


/* median (mean of the middle two for an even count), min and max of v[n] */
static inline bench_range_t bench_range(const double *v, int n)
{
    double s[BENCH_MAX_ROUNDS];
    bench_range_t r = {0, 0, 0, n};

    if (n <= 0) {
        return r;
    }
    if (n > BENCH_MAX_ROUNDS) {
        n = r.n = BENCH_MAX_ROUNDS;
    }
    memcpy(s, v, n * sizeof(*v));
    qsort(s, n, sizeof(*s), bench_stats_cmp);
    r.min = s[0];
    r.max = s[n - 1];
    r.med = (n % 2) ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    return r;
}


/* the times of a round's iterations */
typedef struct {
    double *v;
    long   n, cap;
} bench_samples_t;


static inline void bench_samples_add(bench_samples_t *s, double x)
{
    double *v;

    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        v      = (double*)realloc(s->v, s->cap * sizeof(*v)); /* C++ too */
        if (v == NULL) {
            fprintf(stderr, "bench: out of memory\n");
            exit(1);
        }
        s->v = v;
    }
    s->v[s->n++] = x;
}


/* median of the samples (reorders them), and empties them */
static inline double bench_samples_median(bench_samples_t *s)
{
    double m;

    if (s->n == 0) {
        return 0;
    }
    qsort(s->v, s->n, sizeof(*s->v), bench_stats_cmp);
    m    = (s->n % 2) ? s->v[s->n / 2] :
                        (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
    s->n = 0;
    return m;
}


/* rounds per figure (BENCH_ROUNDS, 1..BENCH_MAX_ROUNDS) */
static inline int bench_rounds(void)
{
    const char *s = getenv("BENCH_ROUNDS");
    int n         = s ? atoi(s) : 5;

    return (n < 1) ? 1 : (n > BENCH_MAX_ROUNDS) ? BENCH_MAX_ROUNDS : n;
}


/* seconds each round of a figure runs at least: BENCH_MIN_TIME / rounds */
static inline double bench_round_time(void)
{
    const char *s = getenv("BENCH_MIN_TIME");
    double t      = s ? atof(s) : 0.5;

    return ((t > 0) ? t : 0.5) / bench_rounds();
}


static inline void bench_print_settings(const char *prog)
{
    printf("%s: %d rounds per figure, each at least %.3f s and the minimum "
           "iterations (BENCH_ROUNDS, BENCH_MIN_TIME)\n", prog, bench_rounds(),
           bench_round_time());
}


static inline void bench_print_ratio(const char *name, const double *v, int n)
{
    bench_range_t r = bench_range(v, n);

    printf("ratio %s: %.3f (min %.3f, max %.3f, %d rounds)\n", name, r.med,
           r.min, r.max, r.n);
}

#endif
