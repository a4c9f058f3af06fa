// The weight-streaming kernel for small M: an internal launcher, chosen by
// LaunchMarlinGemm (marlin_kernel.cu). Like the public header, no XLA here.
#pragma once

#include <cuda_runtime.h>

#include "marlin_kernel.h"

namespace jax_marlin {

// The streaming kernel takes M <= kStreamMaxM rows, implicit or packed 4-bit
// zero points, and groups of at least 32 (two k16 units).
constexpr int kStreamMaxM = 16;
bool StreamGemmSupports(const MarlinGemmArgs& args);

// Returns cudaErrorNotSupported, having launched nothing, when no grid fits the
// device's shared memory and the caller's workspace; the caller then uses the
// tiled kernel. `split_k_override` > 0 forces an aligned split of every column
// group's k-range into that many blocks (tests use it to reach each path).
cudaError_t LaunchStreamGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                             int split_k_override, cudaStream_t stream);

// The grid LaunchStreamGemm would launch, for tests and diagnostics (the
// planner's choice is otherwise invisible: every grid gives the same answer).
// Reads only the shape, group size, dtype and workspace size of `args`.
struct StreamGridInfo {
  int blocks;
  int k_steps;             // steps of k per 64-column tile
  int total_steps;
  int smem_bytes;
  int max_parts;           // partial sums per column group (1: no reduce kernel)
  int tile_split;          // > 0: the tile split, this many blocks (a cluster) per tile
  int group_rows;          // 1: a column of the n8 tile per row and group (stream_plan.h)
  int a_phase_steps;       // A staged this many steps at a time (>= a block's steps: at once)
  int group_cluster;       // > 1: stream-K's blocks of a column group are a cluster (no reduce)
};
bool PlanStreamGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                    int split_k_override, StreamGridInfo* info);

}  // namespace jax_marlin
