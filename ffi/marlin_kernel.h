// Fused W4A16 GEMM for weights repacked into the jax_marlin tile layout.
//
// This header is the whole contract between the CUDA kernels and the XLA FFI
// handler: it includes no XLA or nanobind header, so the kernels can be built,
// read and tested on their own.
//
// Computes  out[m, n] = sum_k a[m, k] * w[n, k]  (+ bias[n])  for m < M, n < N,
// with w[n, k] = (code[n, k] - zp[n, g]) * scale[n, g],  g = k / group_size,
// where the codes, scales and zero points are in the layout described in
// jax_marlin/_layout.py (one 16 x 64 (k x n) tile = 512 bytes = one 16-byte
// load per lane of a warp, already in mma.m16n8k16 B-fragment order).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace jax_marlin {

enum class ActDType : int { kFloat16 = 0, kBFloat16 = 1 };

// Host-side arithmetic shared by the launchers.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// The smallest e with 2^e >= x (group sizes are powers of two: their log2).
constexpr int log2_ceil(int64_t x) {
  int e = 0;
  while ((int64_t{1} << e) < x) ++e;
  return e;
}

// How zero points reach the kernel.
enum class ZeroPointKind : int {
  kImplicit = 0,  // symmetric: every zero point is 8
  kPacked4 = 1,   // uint32 [k_blocks, n_pad / 8], eight 4-bit zero points a word
  kOffset = 2,    // activation dtype [k_blocks, n_pad]: -zp * scale, added after scaling
};

struct MarlinGemmArgs {
  const void* a;               // [M, K] row-major, activation dtype; K % 8 == 0
  const uint32_t* codes;       // [n_pad / 64, k_pad / 16, 128]
  const void* scales;          // [k_blocks, n_pad], activation dtype, permuted columns
  const void* zero_points;     // see ZeroPointKind; nullptr for kImplicit
  const void* bias;            // [N] activation dtype, or nullptr
  void* out;                   // [M, N] row-major, activation dtype
  float* workspace;            // fp32 split-K partial sums, workspace_elems floats
  int64_t workspace_elems;     // the kernel never uses more; splits <= elems / (M * n_pad)
  // The wgmma kernel's stream-K flags and partials (wgmma_stream_k.h), apart from the
  // split-K floats so that no split-K plan depends on them; nullptr: no stream-K.
  float* stream_k_workspace;
  int64_t stream_k_workspace_elems;
  int64_t M;
  int64_t N;                   // logical output features, N <= n_pad
  int64_t K;                   // logical input features (row stride of a), K <= k_pad
  int64_t n_pad;               // multiple of 64
  int64_t k_pad;               // k_blocks * group_size, multiple of 16
  int64_t k_blocks;
  int64_t group_size;          // power of two >= 16
  ActDType dtype;
  ZeroPointKind zero_point_kind;
};

// What the device offers; read once by the handler, never assumed.
struct DeviceLimits {
  int ordinal;                     // the CUDA device these limits belong to
  int sm_count;
  int max_shared_bytes_per_block;  // opt-in limit (cudaDevAttrMaxSharedMemoryPerBlockOptin)
  int compute_capability;          // e.g. 80, 90
  // Blocks the device runs at once, one block an SM, in clusters of 2, 4 and 8
  // (cudaOccupancyMaxActiveClusters x C): clusters sit within a GPC, so where a
  // GPC's SMs are not a multiple of C some stay idle (the H200: 132, 120, 120).
  // 0: unknown, taken as sm_count; -1: the query said no cluster of C fits (a
  // partition with small GPCs), and the planner then plans none.
  int cluster_blocks[3] = {0, 0, 0};
  // The L2's bytes (cudaDevAttrL2CacheSize); 0: unknown, and the planner's rules
  // that read it then do not apply.
  int64_t l2_bytes = 0;
};

// Fills device->cluster_blocks (sm_90 and later; left 0 elsewhere, and where the
// query fails, which it reports after clearing CUDA's last error).
cudaError_t QueryClusterBlocks(DeviceLimits* device);

// Launches the GEMM on `stream`. Allocates nothing and never synchronises, so
// it is safe inside CUDA graphs. The workspace is owned by the caller (XLA);
// its size bounds the number of k-splits. `split_k_override` > 0 forces that
// many k-splits (clamped to what the shape and workspace allow); 0 lets the
// heuristic choose from `device`.
cudaError_t LaunchMarlinGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                             int split_k_override, cudaStream_t stream);

// Which kernel LaunchMarlinGemm would run ("stream", "wgmma" or "tiled"), for
// tests that must reach each (reads only the shape, dtype and workspace size).
const char* PlannedKernel(const MarlinGemmArgs& args, const DeviceLimits& device,
                          int split_k_override);

// Shared by the k-split launchers (the tiled and the wgmma kernels), whose
// splits write fp32 partials [split][M][n_pad] to args.workspace.
// Picks the number of k-splits. Model: `slots` blocks run at once; the blocks
// of one wave take time ~ (k-units per split + fill_units), waves run one
// after another, and a split costs a second (reduce) launch, ~reduce_units.
// Ties go to fewer splits. For the tiled kernel (a unit is its 256-k tile) at
// M = 1, 8192 x 28672 (224 blocks of 128 columns, 32 k-tiles) this keeps
// S = 1: every SM already streams; for 28672 x 8192 (64 blocks, 112 k-tiles)
// it picks S = 4 so that all SMs stream (both measured best on H200 among
// S = 1..16).
inline int ChooseSplits(int64_t base_blocks, int units_total, int max_splits, int slots,
                        int fill_units, int reduce_units) {
  int best = 1;
  int64_t best_cost = INT64_MAX;
  for (int s = 1; s <= max_splits; ++s) {
    const int64_t per_split = ceil_div(units_total, s);
    const int64_t splits = ceil_div(units_total, per_split);
    if (splits != s) continue;  // same partition as a smaller s
    const int64_t waves = ceil_div(base_blocks * s, slots);
    const int64_t cost = waves * (per_split + fill_units) + (s > 1 ? reduce_units : 0);
    if (cost < best_cost) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

// out = the partials summed in split order (bitwise reproducible) + bias.
cudaError_t LaunchSplitKReduce(const MarlinGemmArgs& args, const DeviceLimits& device,
                               int splits, cudaStream_t stream);

}  // namespace jax_marlin
