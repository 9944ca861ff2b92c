/*
 * cuda_ipc_ns: the direct lane — the remote allocation mapped here through
 * the cache (a key of several allocations chunk by chunk,
 * cuda_ipc_ns_target.h) and our copies on a stream of the completion queue
 * (docs/architecture.md, "From `mem_reg` to a completed copy"). An open of
 * a legacy key that fails sets key->owner_copy: the endpoint then posts the
 * op on the owner's lane.
 */
#ifndef UCT_CUDA_IPC_NS_LANE_DIRECT_H
#define UCT_CUDA_IPC_NS_LANE_DIRECT_H

#include "cuda_ipc_ns_lane.h"


extern const uct_cuda_ipc_ns_lane_ops_t uct_cuda_ipc_ns_lane_direct_ops;

#endif
