// Runs the streaming kernel's grid planner (ffi/stream_plan.h) on the host.
// stdin: one case per line, "M K N group workspace_elems sm_count
// max_smem_per_block compute_capability split_k". stdout: one line per case,
// "B T L smem any_cut max_parts tile_split a_phase_steps a_phased group_cluster" or "declined"
// (max_parts as the
// plan states it: the test recomputes it from the partition). argv[1], if
// given: the cap on the tile split's cluster size (default: the kernel's); argv[2], if
// given: the blocks clusters of 2, 4 and 8 place at once, "c2,c4,c8" (DeviceLimits::
// cluster_blocks; default unknown). tests/test_stream_plan.py checks the answers against
// an independent model of the partition.
#include <cstdio>
#include <cstdlib>

#include "plan_args.h"
#include "stream_plan.h"

int main(int argc, char** argv) {
  const int max_cluster = argc > 1 ? std::atoi(argv[1]) : jax_marlin::kTileSplitMaxCluster;
  int cluster_blocks[3] = {0, 0, 0};
  if (argc > 2 &&
      std::sscanf(argv[2], "%d,%d,%d", &cluster_blocks[0], &cluster_blocks[1],
                  &cluster_blocks[2]) != 3)
    return 2;
  long long M, K, N, group, workspace, sm_count, smem, cc, split_k;
  while (std::scanf("%lld %lld %lld %lld %lld %lld %lld %lld %lld", &M, &K, &N, &group,
                    &workspace, &sm_count, &smem, &cc, &split_k) == 9) {
    const jax_marlin::MarlinGemmArgs args = PlanArgs(M, K, N, group, workspace);
    jax_marlin::DeviceLimits device{0, static_cast<int>(sm_count), static_cast<int>(smem),
                                    static_cast<int>(cc)};
    for (int i = 0; i < 3; ++i) device.cluster_blocks[i] = cluster_blocks[i];
    jax_marlin::StreamPlan plan{};
    if (jax_marlin::plan_grid(args, device, static_cast<int>(split_k), &plan, max_cluster)) {
      std::printf("%d %d %d %d %d %d %d %d %d %d\n", plan.blocks, plan.total_steps,
                  plan.k_steps, plan.smem_bytes, plan.any_cut, plan.max_parts, plan.tile_split,
                  plan.a_phase_steps, jax_marlin::stream_a_phased(plan) ? 1 : 0,
                  plan.group_cluster);
    } else {
      std::printf("declined\n");
    }
  }
  return 0;
}
