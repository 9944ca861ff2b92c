/*
 * cuda_ipc_ns benchmarks: callgrind's client requests, in a unit of their
 * own (UCX's headers define stand-ins of valgrind's macros). Outside
 * valgrind each is a few instructions that do nothing.
 */
#ifndef CUDA_IPC_NS_BENCH_CALLGRIND_H_
#define CUDA_IPC_NS_BENCH_CALLGRIND_H_

/* collection on if it was off, off if it was on */
void bench_callgrind_toggle(void);

/* zero the counts collected so far */
void bench_callgrind_zero(void);

/* write the counts collected so far as a dump named @a name, and zero them */
void bench_callgrind_dump(const char *name);

#endif
