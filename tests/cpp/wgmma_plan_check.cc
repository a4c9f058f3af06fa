// Runs the wgmma kernel's grid planner (ffi/wgmma_plan.h) on the host.
// stdin: one case per line, "M K N group workspace_elems sm_count
// max_smem_per_block". stdout: one line per case, "rows n_blocks m_blocks
// splits stages_per_split smem_bytes cluster_k producer" (producer: the build has
// the producer warpgroup and the rows take it; the launch may still fall back at
// run time). argv[1], if given: the blocks
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
  long long M, K, N, group, workspace, sm_count, smem;
  while (std::scanf("%lld %lld %lld %lld %lld %lld %lld", &M, &K, &N, &group, &workspace,
                    &sm_count, &smem) == 7) {
    const jax_marlin::MarlinGemmArgs args = PlanArgs(M, K, N, group, workspace);
    jax_marlin::DeviceLimits device{0, static_cast<int>(sm_count), static_cast<int>(smem), 90};
    for (int i = 0; i < 3; ++i) device.cluster_blocks[i] = cluster_blocks[i];
    const jax_marlin::WgmmaGridInfo plan = jax_marlin::plan_wgmma_grid(args, device);
    const bool producer = jax_marlin::wgmma_plans_producer(plan);
    std::printf("%d %lld %lld %d %d %d %d %d\n", plan.rows,
                static_cast<long long>(plan.n_blocks), static_cast<long long>(plan.m_blocks),
                plan.splits, plan.stages_per_split, plan.smem_bytes, plan.cluster_k, producer);
  }
  return 0;
}
