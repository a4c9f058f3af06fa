// The launch arguments a grid planner reads, for the host-compiled planner
// checks (stream_plan_check.cc, wgmma_plan_check.cc): the shape, the group
// size and the workspace size, with pointers that are never dereferenced.
#pragma once

#include "marlin_kernel.h"

inline jax_marlin::MarlinGemmArgs PlanArgs(long long M, long long K, long long N, long long group,
                                           long long workspace) {
  jax_marlin::MarlinGemmArgs args{};
  args.M = M;
  args.K = K;
  args.N = N;
  args.n_pad = jax_marlin::ceil_div(N, 64) * 64;
  args.group_size = group;
  args.k_blocks = jax_marlin::ceil_div(K, group);
  args.k_pad = args.k_blocks * group;
  // The planners only read whether there is a workspace and its size.
  args.workspace = workspace > 0 ? reinterpret_cast<float*>(alignof(float)) : nullptr;
  args.workspace_elems = workspace;
  return args;
}
