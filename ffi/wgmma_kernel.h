// The Hopper (sm_90a) wgmma kernel for M = 17..256 rows: an internal launcher,
// chosen by LaunchMarlinGemm (marlin_kernel.cu). No XLA here. Design:
// docs/design/wgmma.md.
#pragma once

#include <cuda_runtime.h>

#include "marlin_kernel.h"

namespace jax_marlin {

// split_k_override that sends M > 16 to the tiled mma.sync kernel even where
// this one applies (tests reach both paths with it).
constexpr int kForceTiledKernel = -2000;

// Whether the wgmma kernel takes this GEMM on this device: sm_90 with the
// module's sm_90a code loaded, M in [kWgmmaMinM, kWgmmaMaxM], groups of at least
// 32, and its pipeline within the device's shared memory.
constexpr int kWgmmaMinM = 17;
constexpr int kWgmmaMaxM = 256;
bool WgmmaGemmApplies(const MarlinGemmArgs& args, const DeviceLimits& device);

// Launches it (call only where WgmmaGemmApplies). Allocates nothing, never
// synchronises; no workspace.
cudaError_t LaunchWgmmaGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                            cudaStream_t stream);

}  // namespace jax_marlin
