// Runs the wgmma kernel's grid planner (ffi/wgmma_plan.h) on the host.
// stdin: one case per line, "M K N group workspace_elems sm_count
// max_smem_per_block". stdout: one line per case, "rows n_blocks m_blocks
// splits stages_per_split smem_bytes". tests/test_wgmma_plan.py checks the
// answers against the workspace, the device and an independent model.
#include <cstdio>

#include "plan_args.h"
#include "wgmma_plan.h"

int main() {
  long long M, K, N, group, workspace, sm_count, smem;
  while (std::scanf("%lld %lld %lld %lld %lld %lld %lld", &M, &K, &N, &group, &workspace,
                    &sm_count, &smem) == 7) {
    const jax_marlin::MarlinGemmArgs args = PlanArgs(M, K, N, group, workspace);
    const jax_marlin::DeviceLimits device{0, static_cast<int>(sm_count), static_cast<int>(smem),
                                          90};
    const jax_marlin::WgmmaGridInfo plan = jax_marlin::plan_wgmma_grid(args, device);
    std::printf("%d %lld %lld %d %d %d\n", plan.rows, static_cast<long long>(plan.n_blocks),
                static_cast<long long>(plan.m_blocks), plan.splits, plan.stages_per_split,
                plan.smem_bytes);
  }
  return 0;
}
