/*
 * cuda_ipc_ns benchmarks: callgrind's client requests (bench_callgrind.h).
 */
#include "bench_callgrind.h"

#include <valgrind/callgrind.h>


void bench_callgrind_toggle(void)
{
    CALLGRIND_TOGGLE_COLLECT;
}


void bench_callgrind_zero(void)
{
    CALLGRIND_ZERO_STATS;
}


void bench_callgrind_dump(const char *name)
{
    CALLGRIND_DUMP_STATS_AT(name);
}
