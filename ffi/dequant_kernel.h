// Dequantization of 4-bit tile-layout weights to a dense [N, K] matrix on the
// GPU: the first half of the dense path (large M), whose second half is
// XLA's own dot. No XLA here.
#pragma once

#include <cuda_runtime.h>

#include "marlin_kernel.h"

namespace jax_marlin {

struct DequantArgs {
  const uint32_t* codes;    // [n_pad / 64, k_pad / 16, 128], the tile layout
  const void* scales;       // [k_blocks, n_pad], activation dtype, permuted columns
  const void* zero_points;  // packed: uint32 [k_blocks, n_pad / 8]; float: like scales; or null
  void* out;                // [N, K], activation dtype
  int64_t N, K, n_pad, k_pad, k_blocks, group_size;
  ActDType dtype;
  ZeroPointKind zero_point_kind;  // kImplicit, kPacked4 or kOffset (float zero points, as is)
};

// out[n, k] = (code - zp) * scale in the activation dtype: the same two
// operations, in the same order, as jax_marlin.weights.dequantize. K % 8 == 0.
cudaError_t LaunchDequantize(const DequantArgs& args, cudaStream_t stream);

}  // namespace jax_marlin
