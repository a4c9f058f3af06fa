// Tile layout -> dense [N, K] weights, for the dense path at large M.
//
// Past the fused kernels' rows the product is XLA's dot over dequantized
// weights, and the dequantization is pure traffic: 8192 x 28672 reads 122 MB
// and writes 470 MB, ~150 us at the DRAM's rate. jax.numpy's unpack and
// un-permute of the tile layout took ~240 us of it (session 8, call 6). A
// first CUDA version (session 7, wip/dequant) gave each thread one output
// row: every 16-byte store of a warp then landed in 32 rows K x 2 bytes
// apart, and the GEMM at M = 256 went 448 -> 1214 us. Here a block owns one
// 64-column tile over 64 of k: it copies the tile's 2 KB of codes into shared
// memory in one coalesced pass, and each warp then writes four whole 128-byte
// lines of output rows per store (lanes 8 r .. 8 r + 7 one row's 64 k).
//
// Rounding: (code - zp) * scale in fp32, rounded once to the activation
// dtype. For integer zero points that is bitwise jax_marlin.weights.dequantize
// (code - zp is exact, and so is the fp32 product of a small integer and a
// half-precision scale); for float zero points it is the more accurate of the
// two ways of rounding.

#include "dequant_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "marlin_device.cuh"

namespace jax_marlin {
namespace {

constexpr int kDqThreads = 256;
constexpr int kDqUnits = 4;  // 16-k units a block: 64 k, 128 bytes of each output row
// A unit's 128 words in shared memory, 4 words of padding apart: lanes of one
// warp read up to four units' words at the same offset, which would otherwise
// share a bank.
constexpr int kDqUnitStride = 132;
// Chunks of 8 k (16 output bytes) a block writes: 64 rows x 8.
constexpr int kDqChunks = 64 * kDqUnits * 2;
static_assert(kDqChunks % kDqThreads == 0, "whole chunks a thread");

// Two floats rounded to the dtype (round to nearest, each on its own), packed
// low half first: the register a 16-byte store takes four of.
template <typename T>
__device__ __forceinline__ uint32_t pair_bits(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pair_bits<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pair_bits<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Column c = 16 j + 8 h + g of tile nt (n = 64 nt + c) at k = 16 kt + 2 t +
// 8 khi + klo is nibble 4 klo + 2 h + khi of word 4 (4 g + t) + j of unit
// (nt, kt) (jax_marlin/_layout.py). Its scale and float zero point sit at
// permuted position 8 g + 2 j + h of the tile's 64; its packed zero point in
// nibble 2 j + h of word 8 nt + g.
template <typename T, ZeroPointKind kZP>
__global__ void __launch_bounds__(kDqThreads) dequant_kernel(const DequantArgs p) {
  __shared__ __align__(16) uint32_t codes[kDqUnits * kDqUnitStride];
  const int64_t kt_total = p.k_pad / 16;
  const int64_t k_chunks = (kt_total + kDqUnits - 1) / kDqUnits;
  const int64_t nt = blockIdx.x / k_chunks;
  const int64_t kt0 = (blockIdx.x % k_chunks) * kDqUnits;
  const int units = kt_total - kt0 < kDqUnits ? static_cast<int>(kt_total - kt0) : kDqUnits;

  // The units (nt, kt0 ..) are contiguous in the tile layout (512 B each): one
  // pass of 16-byte loads.
  const uint4* src = reinterpret_cast<const uint4*>(p.codes + (nt * kt_total + kt0) * 128);
  for (int i = threadIdx.x; i < units * 32; i += kDqThreads)
    *reinterpret_cast<uint4*>(codes + (i / 32) * kDqUnitStride + (i % 32) * 4) = __ldg(src + i);
  __syncthreads();

  const T* scales = static_cast<const T*>(p.scales);
  const uint32_t* packed_zp = static_cast<const uint32_t*>(p.zero_points);
  const T* float_zp = static_cast<const T*>(p.zero_points);
#pragma unroll
  for (int r = 0; r < kDqChunks / kDqThreads; ++r) {
    const int chunk = threadIdx.x + r * kDqThreads;
    const int c = chunk / 8, u = (chunk % 8) / 2, khi = chunk % 2;
    const int64_t n = nt * 64 + c;
    const int64_t k0 = 16 * (kt0 + u) + 8 * khi;
    if (u >= units || n >= p.N || k0 >= p.K) continue;  // K % 8 == 0: chunks are whole
    const int j = c / 16, h = (c / 8) % 2, g = c % 8;
    const int position = 8 * g + 2 * j + h;
    const int64_t gi = 16 * (kt0 + u) / p.group_size;  // a unit lies in one group (>= 16)
    const float scale = to_float<T>(scales[gi * p.n_pad + nt * 64 + position]);
    float zp = 8.f;
    if constexpr (kZP == ZeroPointKind::kPacked4)
      zp = static_cast<float>((packed_zp[gi * (p.n_pad / 8) + nt * 8 + g] >> (4 * (2 * j + h))) &
                              0xF);
    if constexpr (kZP == ZeroPointKind::kOffset)
      zp = to_float<T>(float_zp[gi * p.n_pad + nt * 64 + position]);
    // k0 + 2 t + klo: word t's nibbles klo = 0, 1.
    uint32_t pairs[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const uint32_t word = codes[u * kDqUnitStride + 4 * (4 * g + t) + j];
      const int code0 = (word >> (4 * (2 * h + khi))) & 0xF;
      const int code1 = (word >> (4 * (4 + 2 * h + khi))) & 0xF;
      pairs[t] = pair_bits<T>((static_cast<float>(code0) - zp) * scale,
                              (static_cast<float>(code1) - zp) * scale);
    }
    // A streaming store: 470 MB pass through an L2 of 60, and the dot reads them
    // back from DRAM either way.
    __stcs(reinterpret_cast<uint4*>(static_cast<T*>(p.out) + n * p.K + k0),
           make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]));
  }
}

}  // namespace

cudaError_t LaunchDequantize(const DequantArgs& args, cudaStream_t stream) {
  if (args.N <= 0 || args.K <= 0 || args.K % 8 != 0 || args.group_size < 16 ||
      (args.group_size & (args.group_size - 1)) != 0)
    return cudaErrorInvalidValue;
  const int64_t k_chunks = (args.k_pad / 16 + kDqUnits - 1) / kDqUnits;
  const int64_t blocks = args.n_pad / 64 * k_chunks;
  if (blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
  return with_activation_type(args.dtype, [&](auto act) {
    return with_zero_point_kind(args.zero_point_kind, [&](auto zp) {
      dequant_kernel<decltype(act), decltype(zp)::value>
          <<<static_cast<unsigned>(blocks), kDqThreads, 0, stream>>>(args);
      return cudaGetLastError();
    });
  });
}

}  // namespace jax_marlin
