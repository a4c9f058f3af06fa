// Reference-grade CPU kernel for prepared MatMulNBits weights, in float32
// (as onnxruntime's CPU kernel computes). No XLA or nanobind header.
#pragma once

#include <cstdint>

namespace jax_marlin {

enum class ZeroPoints : int { kImplicit = 0, kPacked = 1, kFloat = 2 };

struct CpuMatMulArgs {
  const float* a;          // [M, K]
  const void* codes;       // bits == 4: uint32 tiles; else uint8 ONNX rows [N, row_bytes]
  const float* scales;     // bits == 4: [k_blocks, n_pad] permuted; else [N, k_blocks]
  const void* zero_points; // kPacked: uint32 words (4 bits) / uint8 ONNX rows; kFloat: float, like scales
  const float* bias;       // [N] or nullptr
  float* out;              // [M, N]
  int64_t M, N, K, bits, block_size;
  ZeroPoints zero_point_kind;
};

void CpuMatMulNBits(const CpuMatMulArgs& args);

}  // namespace jax_marlin
