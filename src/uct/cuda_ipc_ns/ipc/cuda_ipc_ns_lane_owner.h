/*
 * cuda_ipc_ns: the owner's lane — puts and gets on memory of another PID
 * namespace that we cannot map, copied by its owner (docs/owner-copies.md):
 * one copy into or out of the local buffer when the owner can map it, else
 * two through a staging ring of device or pinned host memory
 * (cuda_ipc_ns_copies.h), completed from progress when the owner
 * answers.
 */
#ifndef UCT_CUDA_IPC_NS_LANE_OWNER_H
#define UCT_CUDA_IPC_NS_LANE_OWNER_H

#include "cuda_ipc_ns_lane.h"


extern const uct_cuda_ipc_ns_lane_ops_t uct_cuda_ipc_ns_lane_owner_ops;

#endif
