// Runs the wgmma kernel's grid planner (ffi/wgmma_plan.h) on the host.
// stdin: one case per line, "M K N group workspace_elems sm_count
// max_smem_per_block". stdout: one line per case, "rows n_blocks m_blocks
// splits stages_per_split smem_bytes". tests/test_wgmma_plan.py checks the
// answers against the workspace, the device and an independent model.
#include <cstdio>

#include "wgmma_plan.h"

int main() {
  long long M, K, N, group, workspace, sm_count, smem;
  while (std::scanf("%lld %lld %lld %lld %lld %lld %lld", &M, &K, &N, &group, &workspace,
                    &sm_count, &smem) == 7) {
    jax_marlin::MarlinGemmArgs args{};
    args.M = M;
    args.K = K;
    args.N = N;
    args.n_pad = jax_marlin::ceil_div(N, 64) * 64;
    args.group_size = group;
    args.k_blocks = jax_marlin::ceil_div(K, group);
    args.k_pad = args.k_blocks * group;
    // The planner only reads whether there is a workspace and its size.
    args.workspace = workspace > 0 ? reinterpret_cast<float*>(alignof(float)) : nullptr;
    args.workspace_elems = workspace;
    const jax_marlin::DeviceLimits device{0, static_cast<int>(sm_count), static_cast<int>(smem),
                                          90};
    const jax_marlin::WgmmaGridInfo plan = jax_marlin::plan_wgmma_grid(args, device);
    std::printf("%d %lld %lld %d %d %d\n", plan.rows, static_cast<long long>(plan.n_blocks),
                static_cast<long long>(plan.m_blocks), plan.splits, plan.stages_per_split,
                plan.smem_bytes);
  }
  return 0;
}
