/*
 * cuda_cpy_ns: synchronous copies through the CUDA driver, in the right
 * context: the calling thread's current context when it has one, else the
 * primary context of the device that owns the memory, pushed for the call
 * and popped after it.
 */
#ifndef UCT_CUDA_CPY_NS_COPY_H
#define UCT_CUDA_CPY_NS_COPY_H

#include <ucs/type/status.h>
#include <stddef.h>




/**
 * Copy @a length bytes from @a src to @a dst and wait for the copy. Either
 * side may be host or device memory: cuMemcpy infers the direction from the
 * unified address space, so one entry point serves host-to-device,
 * device-to-host and device-to-device copies. cuMemcpy alone returns before
 * a copy to device memory lands: the default stream is synchronized after
 * it, so the data is in place when this returns.
 */
ucs_status_t uct_cuda_cpy_ns_copy(void *dst, const void *src, size_t length);


/** Set @a length bytes of device memory at @a dst to @a value, and wait for
 *  it (cuMemsetD8 alone returns before the memory is written) */
ucs_status_t uct_cuda_cpy_ns_copy_memset(void *dst, int value, size_t length);

#endif
