// Runs the wgmma kernel's grid planner (ffi/wgmma_plan.h) on the host.
// stdin: one case per line, "M K N group workspace_elems sm_count
// max_smem_per_block [stream_k_elems [l2_bytes]]". stdout: one line per case, "rows
// n_blocks m_blocks splits stages_per_split smem_bytes cluster_k producer
// stream_k_blocks" (producer: the build has the producer warpgroup and the rows
// take it; the launch may still fall back at run time; stream_k_blocks: the
// persistent blocks of stream-K where the producer takes it, else 0).
// argv[1], if given: the blocks
// clusters of 2, 4 and 8 place at once, "c2,c4,c8" (DeviceLimits::cluster_blocks;
// default unknown). tests/test_wgmma_plan.py checks the answers against the
// workspace, the device and an independent model.
#include <cstdio>

#include "plan_args.h"
#include "wgmma_plan.h"

int main(int argc, char** argv) {
  int cluster_blocks[3] = {0, 0, 0};
  if (argc > 1 && std::sscanf(argv[1], "%d,%d,%d", &cluster_blocks[0], &cluster_blocks[1],
                              &cluster_blocks[2]) != 3)
    return 2;
  char line[512];
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
    long long M, K, N, group, workspace, sm_count, smem, stream_k_elems = 0, l2_bytes = 0;
    if (std::sscanf(line, "%lld %lld %lld %lld %lld %lld %lld %lld %lld", &M, &K, &N, &group,
                    &workspace, &sm_count, &smem, &stream_k_elems, &l2_bytes) < 7)
      break;
    jax_marlin::MarlinGemmArgs args = PlanArgs(M, K, N, group, workspace);
    // As with workspace: only whether there is one, its size and its alignment are read.
    args.stream_k_workspace = stream_k_elems > 0 ? reinterpret_cast<float*>(256) : nullptr;
    args.stream_k_workspace_elems = stream_k_elems;
    jax_marlin::DeviceLimits device{0, static_cast<int>(sm_count), static_cast<int>(smem), 90};
    for (int i = 0; i < 3; ++i) device.cluster_blocks[i] = cluster_blocks[i];
    device.l2_bytes = l2_bytes;
    jax_marlin::WgmmaGridInfo plan = jax_marlin::plan_wgmma_grid(args, device);
    plan.producer = jax_marlin::wgmma_plans_producer(plan);
    const int stream_k_blocks = jax_marlin::wgmma_stream_k_blocks(plan, args, device);
    std::printf("%d %lld %lld %d %d %d %d %d %d\n", plan.rows,
                static_cast<long long>(plan.n_blocks), static_cast<long long>(plan.m_blocks),
                plan.splits, plan.stages_per_split, plan.smem_bytes, plan.cluster_k,
                plan.producer, stream_k_blocks);
  }
  return 0;
}
