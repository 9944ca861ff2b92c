/*
 * cuda_cpy_ns: the CUDA memory allocator of ucx_perftest (-m cuda); see
 * cuda_cpy_ns_perftest.c.
 */
#ifndef UCT_CUDA_CPY_NS_PERFTEST_H
#define UCT_CUDA_CPY_NS_PERFTEST_H

/* Fill ucx_perftest's CUDA allocator slot when the running program is
 * ucx_perftest and the slot is empty; nothing in any other program */
void uct_cuda_cpy_ns_perftest_register(void);

#endif
