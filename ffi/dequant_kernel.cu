// Tile layout -> dense [N, K] weights, for the dense path at large M.
//
// Past the fused kernels' rows the product is XLA's dot over dequantized
// weights, and the dequantization is pure traffic: 8192 x 28672 reads 122 MB
// and writes 470 MB, ~150 us at the DRAM's rate. XLA's fusion of
// jax.numpy's unpack and un-permute takes ~240 us (session 8, call 6).
// Two CUDA versions lost before this one: session 7's gave each thread one
// output row, so every 16-byte store of a warp hit 32 rows; session 9's
// (wip/dequant2) fixed the stores but converted weight by weight with its
// index math per 8 of them, ~26 instructions a weight, and was
// instruction-bound at 248 us (ncu: issue slots 75% busy, DRAM 47%). The
// H200 issues ~33 T thread instructions a second (132 SMs x 4 schedulers x
// 32 lanes at ~2 GHz): ~21 a weight in 150 us with every slot busy, so the
// conversion must cost a few, not tens.
//
// So a block is one 64-column tile over 64 of k (four 16-k units), a warp a
// unit, and the conversion is the fused kernels' (dequant_word: 8 codes of a
// 32-bit word into four fp16/bf16 pairs with LOP3 and the magic-number trick,
// ~2 instructions a weight). A lane's 16 bytes of a unit are exactly an
// mma fragment's columns 16 j + g, 16 j + 8 + g (j = 0..3) at k 2t, 2t + 1,
// 2t + 8, 2t + 9 (g = lane / 4, t = lane % 4), its scales the 16 bytes at
// 8 g of the tile's permuted 64, its packed zero points word g. Those pairs
// are k-adjacent in an output row, so they go to a 64 x 64 tile in shared
// memory as 32-bit stores (rows 36 words apart: lanes hit 32 different
// banks), and the block then writes whole 128-byte row lines, 8 lanes a row,
// with streaming 16-byte stores.
//
// Rounding: (code - zp) * scale rounded once to the activation dtype.
// Integer zero points: code - zp is exact in the dtype and the product is
// rounded once (fp16 HMUL2, bf16 HFMA2 with -0), as jax_marlin.weights.
// dequantize rounds the exact fp32 product: bitwise equal. Float zero points
// (rare: ONNX's are uint8): code - zp and the product in fp32, then one
// rounding to the dtype, which is jax_marlin.weights.dequantize in float32
// cast to the dtype, bitwise. (The fused kernels' offset form, an fma with a
// rounded -zp * scale, would lose most of the digits near code = zp.)

#include "dequant_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "marlin_device.cuh"

namespace jax_marlin {
namespace {

constexpr int kDqUnits = 4;                 // 16-k units a block: one a warp
constexpr int kDqThreads = 32 * kDqUnits;
constexpr int kDqRowWords = 36;             // a tile row: 64 k (32 words) + 16 B of padding
constexpr int kDqChunksPerThread = 64 * 8 / kDqThreads;  // 16-byte chunks of output

// The float-zero-point form of dequant_word: columns (j, h) of word q, pairs
// (k, k + 1) for khi = 0, 1, from nibble 4 klo + 2 h + khi, in fp32.
template <typename T>
__device__ __forceinline__ void dequant_word_float_zp(uint32_t q, const float (&scale)[2],
                                                      const float (&zp)[2], uint32_t (&h0)[2],
                                                      uint32_t (&h1)[2]) {
  auto value = [&](int nibble, int h) {
    return (static_cast<float>((q >> (4 * nibble)) & 0xFu) - zp[h]) * scale[h];
  };
#pragma unroll
  for (int khi = 0; khi < 2; ++khi) {
    h0[khi] = pair_bits<T>(value(khi, 0), value(4 + khi, 0));
    h1[khi] = pair_bits<T>(value(2 + khi, 1), value(6 + khi, 1));
  }
}

// Grid: x = the 64-k chunk, y = the tile (a stride over the tiles where there
// are more than gridDim.y), so that no thread divides.
template <typename T, ZeroPointKind kZP>
__global__ void __launch_bounds__(kDqThreads) dequant_kernel(const DequantArgs p) {
  __shared__ __align__(16) uint32_t tile[64 * kDqRowWords];
  const int64_t kt_total = p.k_pad / 16;
  const int64_t n_tiles = p.n_pad / 64;
  const int u = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * (16 * kDqUnits);
  const int64_t kt = k0 / 16 + u;
  // Units past K (k_pad rounds K up to a whole group) would be converted and
  // never stored.
  const bool unit_used = kt < kt_total && 16 * kt < p.K;
  // A unit lies inside one group (groups of >= 16, powers of two).
  const int64_t gi = (16 * kt) >> (__ffsll(p.group_size) - 1);
  // This thread's output chunks: rows threadIdx.x / 8 + 16 i, k0 + 8 (threadIdx.x % 8).
  const int out_row = threadIdx.x / 8;
  const int64_t out_k = k0 + 8 * (threadIdx.x % 8);

  for (int64_t nt = blockIdx.y; nt < n_tiles; nt += gridDim.y) {
    if (unit_used) {
      const uint4 q =
          __ldg(reinterpret_cast<const uint4*>(p.codes + (nt * kt_total + kt) * 128) + lane);
      const int64_t at = gi * p.n_pad + nt * 64 + 8 * g;  // the lane's 8 scales (positions)
      const uint4 s = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(p.scales) + at));
      const uint32_t words[4] = {q.x, q.y, q.z, q.w};
      uint32_t h0[4][2], h1[4][2];  // [j]: columns 16 j + g and 16 j + 8 + g
      if constexpr (kZP == ZeroPointKind::kOffset) {
        const uint4 z = __ldg(
            reinterpret_cast<const uint4*>(static_cast<const T*>(p.zero_points) + at));
        const T* sv = reinterpret_cast<const T*>(&s);
        const T* zv = reinterpret_cast<const T*>(&z);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float scale[2] = {to_float<T>(sv[2 * j]), to_float<T>(sv[2 * j + 1])};
          const float zp[2] = {to_float<T>(zv[2 * j]), to_float<T>(zv[2 * j + 1])};
          dequant_word_float_zp<T>(words[j], scale, zp, h0[j], h1[j]);
        }
      } else {
        uint32_t zw = 0;
        if constexpr (kZP == ZeroPointKind::kPacked4)
          zw = __ldg(static_cast<const uint32_t*>(p.zero_points) + gi * (p.n_pad / 8) + nt * 8 +
                     g);
        GroupConstants gc;
        make_group_constants<T, kZP>(gc, s, zw, make_uint4(0, 0, 0, 0));
#pragma unroll
        for (int j = 0; j < 4; ++j) dequant_word<T, kZP>(words[j], gc, j, h0[j], h1[j]);
      }
      // Row c of the tile, word 8 u + t (k 16 u + 2 t) and + 4 (k + 8): the 32
      // lanes of a store reach banks 4 g + t (+ a constant), all different.
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t* row0 = tile + (16 * j + g) * kDqRowWords + 8 * u + t;
        uint32_t* row1 = row0 + 8 * kDqRowWords;
        row0[0] = h0[j][0];
        row0[4] = h0[j][1];
        row1[0] = h1[j][0];
        row1[4] = h1[j][1];
      }
    }
    __syncthreads();

    // 8 lanes write one row's 128 bytes (a quarter warp's 16-byte reads of the
    // row cover the 32 banks once). A chunk lies inside K or outside it (K %
    // 8 == 0), and one inside K comes from a unit converted above.
    if (out_k < p.K) {
      const int64_t n0 = nt * 64 + out_row;
      T* out = static_cast<T*>(p.out) + n0 * p.K + out_k;
#pragma unroll
      for (int i = 0; i < kDqChunksPerThread; ++i) {
        if (n0 + 16 * i < p.N) {
          const uint4 v = *reinterpret_cast<const uint4*>(
              tile + (out_row + 16 * i) * kDqRowWords + 4 * (threadIdx.x % 8));
          // Streaming: 470 MB pass through a 60 MB L2, and the dot reads them
          // back from DRAM either way.
          __stcs(reinterpret_cast<uint4*>(out + 16 * i * p.K), v);
        }
      }
    }
    __syncthreads();  // the tile is rewritten for the next nt
  }
}

}  // namespace

cudaError_t LaunchDequantize(const DequantArgs& args, cudaStream_t stream) {
  if (args.N <= 0 || args.K <= 0 || args.K % 8 != 0 || args.group_size < 16 ||
      (args.group_size & (args.group_size - 1)) != 0 || args.k_pad % 16 != 0 ||
      args.k_pad < args.K || args.n_pad % 64 != 0 || args.n_pad < args.N)
    return cudaErrorInvalidValue;
  // Chunks of 64 k that hold some k < K (the units past K are padding).
  const int64_t k_chunks = (args.K + 16 * kDqUnits - 1) / (16 * kDqUnits);
  if (k_chunks > INT32_MAX) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(k_chunks),
                  static_cast<unsigned>(std::min<int64_t>(args.n_pad / 64, 65535)));
  return with_activation_type(args.dtype, [&](auto act) {
    return with_zero_point_kind(args.zero_point_kind, [&](auto zp) {
      dequant_kernel<decltype(act), decltype(zp)::value><<<grid, kDqThreads, 0, stream>>>(args);
      return cudaGetLastError();
    });
  });
}

}  // namespace jax_marlin
