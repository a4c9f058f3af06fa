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

}  // namespace jax_marlin
