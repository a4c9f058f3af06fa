// Fused 4-bit-weight x fp16/bf16-activation GEMM on tensor cores (mma.sync
// m16n8k16, fp32 accumulation), for weights in the jax_marlin tile layout.
//
// Contract: marlin_kernel.h. Layout: jax_marlin/_layout.py.
//
// Design in one paragraph. A thread block of 8 warps owns a 128-column slice
// of the output (two 64-column layout "units"), one block of up to 64 rows
// (1..4 m16 tiles, a template parameter so M = 1 pays for 16 rows, not 64)
// and one contiguous range of k (its k-split). It walks that k-range in
// "k-tiles" of 256 (16 k16 slabs), bringing A and the codes, scales and zero
// points of each k-tile into a ring of shared-memory stages with cp.async, so
// that several k-tiles of loads are in flight while the warps dequantize and
// multiply an earlier one. Warp w owns unit (w & 1) and the four k16 slabs
// 4 (w >> 1) .. 4 (w >> 1) + 3 of every k-tile; the four warps of a unit
// therefore hold partial sums of the same outputs, which are added in shared
// memory at the end (in a fixed order). With S > 1 k-splits each split writes
// an fp32 partial to the workspace and a second kernel adds the S partials in
// split order, so the result is bitwise reproducible run to run.

#include "marlin_kernel.h"
#include "marlin_device.cuh"
#include "stream_kernel.h"
#include "wgmma_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace jax_marlin {
namespace {

// ---------------------------------------------------------------------------
// Tiling constants.
// ---------------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kUnitN = 64;                       // columns of one layout unit
constexpr int kUnitsPerBlock = 2;                // 128 output columns per block
constexpr int kK16PerTile = 16;                  // one pipeline stage covers 256 of k
constexpr int kTileK = 16 * kK16PerTile;
constexpr int kKWarps = kWarps / kUnitsPerBlock;         // 4 warps share a unit
constexpr int kK16PerWarp = kK16PerTile / kKWarps;       // 4 slabs per warp per tile
constexpr int kUnitBytes = 512;                          // 16 x 64 codes, 4 bits each
constexpr int kBStageBytes = kUnitsPerBlock * kK16PerTile * kUnitBytes;  // 16 KB
constexpr int kARowBytes = kTileK * 2;                   // 512 B: 256 halves
constexpr int kScaleGroupBytes = kUnitsPerBlock * kUnitN * 2;  // 256 B per group
constexpr int kMinTilesPerSplit = 2;  // a split shorter than this is mostly fill/drain
// ChooseSplits' costs in k-tile times: prologue/epilogue, and the reduce
// kernel's launch and partial traffic.
constexpr int kFillTiles = 2;
constexpr int kReduceTiles = 4;
constexpr int kMaxSplits = 64;

static_assert(kK16PerWarp * kKWarps == kK16PerTile, "warps must tile the k-tile");
static_assert(kKWarps == 4, "the k-warp reduction below is written for 4 k-warps");

// Pipeline depth and occupancy per m16-tile count. One stage holds 16 KB of
// codes plus the A tile (8 KB per m16 tile). Small M is a pure weight stream:
// M <= 16 runs 2 blocks per SM with 4 stages, i.e. 2 x 3 x 16 KB = 96 KB of
// codes in flight per SM (Little's law at ~30 GB/s per SM and ~1.5-2 us of
// loaded DRAM latency asks for ~45-60 KB). Larger M is compute-heavy (up to
// 128 fp32 accumulators per thread): 1 block per SM, and 3 stages for 3-4 m16
// tiles so the 32 KB A tiles still fit sm_80's 163 KB.
template <int kMTiles>
struct TileConfig {
  static constexpr int kStages = kMTiles <= 2 ? 4 : 3;
  static constexpr int kMinBlocksPerSM = kMTiles == 1 ? 2 : 1;
  static constexpr int kAStageBytes = 16 * kMTiles * kARowBytes;
  // Cross-k-warp reduction buffer: 2 slots x 2 units x 32 lanes x 32*kMTiles floats.
  static constexpr int kReduceBytes = 2 * kUnitsPerBlock * 32 * (32 * kMTiles) * 4;
};

// Everything the main kernel needs, by value (lives in the constant bank).
struct KernelParams : GemmOperands {
  int k16_total;          // k_pad / 16
  int k_blocks;
  int log2_group_size;
  int groups_per_tile;    // max(1, 256 / group_size): groups one k-tile touches
  int tiles_per_split;
  int num_splits;
  int units_total;        // n_pad / 64
  // Byte offsets inside one pipeline stage, and the stage size.
  int stage_bytes;
  int b_offset, scale_offset, zp_offset;
};


// ---------------------------------------------------------------------------
// The main kernel.
// ---------------------------------------------------------------------------

template <typename T, ZeroPointKind kZP, int kMTiles>
__global__ void __launch_bounds__(kThreads, TileConfig<kMTiles>::kMinBlocksPerSM)
    marlin_gemm_kernel(const KernelParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Cfg = TileConfig<kMTiles>;
  constexpr int kStages = Cfg::kStages;
  constexpr bool kBF16 = DTypeTraits<T>::kIsBF16;
  constexpr int kAChunksPerRow = kARowBytes / 16;  // 32

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = shared_address(smem);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int warp_unit = warp & (kUnitsPerBlock - 1);  // which 64-column unit
  const int warp_kgroup = warp / kUnitsPerBlock;      // which pair of k16 slabs

  const int unit0 = blockIdx.x * kUnitsPerBlock;
  const int units_here = min(kUnitsPerBlock, p.units_total - unit0);
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * (16 * kMTiles);
  const int split = blockIdx.z;
  const int k16_total = p.k16_total;
  const int tiles_total = (k16_total + kK16PerTile - 1) / kK16PerTile;
  const int tile_begin = split * p.tiles_per_split;
  const int tile_end = min(tiles_total, tile_begin + p.tiles_per_split);
  const int num_tiles = tile_end - tile_begin;
  const int k16_begin = tile_begin * kK16PerTile;
  const int k16_end = min(k16_total, tile_end * kK16PerTile);

  const T* __restrict__ a = static_cast<const T*>(p.a);
  const T* __restrict__ scales = static_cast<const T*>(p.scales);

  // Issues the cp.async of k-tile `tile` (relative to this split) into ring
  // slot `slot`. Everything a k-tile needs travels in the same commit group,
  // so one wait_group makes the whole stage visible.
  auto load_tile = [&](int tile, int slot) {
    const uint32_t stage = smem_base + slot * p.stage_bytes;
    const int kt0 = k16_begin + tile * kK16PerTile;

    // Codes: warp w copies the unit at k16 offset w; lanes take consecutive
    // 16-byte pieces, so each warp moves one contiguous 512-byte unit.
#pragma unroll
    for (int kl = warp; kl < kK16PerTile; kl += kWarps) {
      if (kt0 + kl < k16_end) {
#pragma unroll
        for (int u = 0; u < kUnitsPerBlock; ++u) {
          if (u < units_here) {
            const uint32_t* src = p.codes +
                                  (static_cast<int64_t>(unit0 + u) * k16_total + kt0 + kl) * 128 +
                                  lane * 4;
            cp_async_16(stage + p.b_offset + (u * kK16PerTile + kl) * kUnitBytes + lane * 16, src,
                        16);
          }
        }
      }
    }

    // A: 16*kMTiles rows x 16 chunks of 16 bytes. Rows >= M and columns >= K
    // are zero-filled (src-size 0): nothing past the end of A is ever read and
    // the padding codes k in [K, k_pad) meet exact zeros. K % 8 == 0, so a
    // chunk is either all inside or all outside A's row.
    //
    // Chunk c of row r is stored at chunk (c ^ (r & 7)): ldmatrix reads one
    // chunk column from 8 consecutive rows at once; with a 512-byte row pitch
    // those would all hit the same 4 banks (8-way conflict), the XOR spreads
    // them over all 32 banks. cp.async writes whole chunks, so the swizzle is
    // free on the store side.
#pragma unroll
    for (int i = 0; i < kMTiles * kAChunksPerRow * 16 / kThreads; ++i) {
      const int c = tid + i * kThreads;
      const int row = c / kAChunksPerRow;
      const int chunk = c % kAChunksPerRow;
      const int64_t gm = m0 + row;
      const int64_t gk = static_cast<int64_t>(kt0) * 16 + chunk * 8;
      const bool inside = gm < p.M && gk < p.K;
      const T* src = inside ? a + gm * p.K + gk : a;
      cp_async_16(stage + row * kARowBytes + ((chunk ^ (row & 7)) * 16), src, inside ? 16 : 0);
    }

    // Scales (and kOffset offsets) of the groups this k-tile touches: for each
    // group, the block's 128 columns are 256 contiguous bytes (the column
    // permutation is inside 64-column units). Groups past k_blocks only occur
    // in the tail tile and are never read.
    const int group0 = (kt0 * 16) >> p.log2_group_size;
    for (int idx = tid; idx < 16 * p.groups_per_tile; idx += kThreads) {
      const int gl = idx >> 4;
      const int piece = idx & 15;
      const int u = piece >> 3;
      const int grp = group0 + gl;
      if (u < units_here && grp < p.k_blocks) {
        const T* src = scales + static_cast<int64_t>(grp) * p.n_pad + unit0 * kUnitN + piece * 8;
        cp_async_16(stage + p.scale_offset + gl * kScaleGroupBytes + piece * 16, src, 16);
      }
    }
    if constexpr (kZP == ZeroPointKind::kOffset) {
      for (int idx = (tid + 128) % kThreads; idx < 16 * p.groups_per_tile; idx += kThreads) {
        const int gl = idx >> 4;
        const int piece = idx & 15;
        const int u = piece >> 3;
        const int grp = group0 + gl;
        if (u < units_here && grp < p.k_blocks) {
          const T* src = static_cast<const T*>(p.zero_points) +
                         static_cast<int64_t>(grp) * p.n_pad + unit0 * kUnitN + piece * 8;
          cp_async_16(stage + p.zp_offset + gl * kScaleGroupBytes + piece * 16, src, 16);
        }
      }
    }
    if constexpr (kZP == ZeroPointKind::kPacked4) {
      // 8 words per unit and group: 64 bytes for the block's two units.
      for (int idx = (tid + 128) % kThreads; idx < 4 * p.groups_per_tile; idx += kThreads) {
        const int gl = idx >> 2;
        const int piece = idx & 3;
        const int u = piece >> 1;
        const int grp = group0 + gl;
        if (u < units_here && grp < p.k_blocks) {
          const uint32_t* src = static_cast<const uint32_t*>(p.zero_points) +
                                static_cast<int64_t>(grp) * (p.n_pad / 8) + unit0 * 8 + piece * 4;
          cp_async_16(stage + p.zp_offset + gl * 64 + piece * 16, src, 16);
        }
      }
    }
  };

  float acc[kMTiles][4][2][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][j][h][e] = 0.f;

  GroupConstants gc;
  int current_group = -1;
  const bool warp_active = warp_unit < units_here;

  // Pipeline prologue: k-tiles 0 .. kStages-2 in flight. Every iteration
  // commits exactly one group (possibly empty), so the group count stays in
  // lock-step with the tile index and wait_group<kStages-2> below always means
  // "tile `it` has landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_tiles) load_tile(s, s);
    cp_async_commit();
  }

  // Per-lane shared-memory byte offsets that do not change across tiles.
  // ldmatrix: lane l addresses row (l & 15) of each m16 tile, chunk (l >> 4)
  // of the k16 slab; (row & 7) == (l & 7) for every m16 tile.
  const int a_row_in_tile = lane & 15;
  const int a_chunk_half = lane >> 4;
  const int a_swizzle = lane & 7;
  const uint32_t b_lane_offset = p.b_offset + warp_unit * kK16PerTile * kUnitBytes + lane * 16;
  const uint32_t scale_lane_offset = p.scale_offset + warp_unit * 128 + g * 16;
  const uint32_t zp_lane_offset =
      kZP == ZeroPointKind::kPacked4 ? p.zp_offset + (warp_unit * 8 + g) * 4
                                     : p.zp_offset + warp_unit * 128 + g * 16;
  const uint32_t zp_group_stride = kZP == ZeroPointKind::kPacked4 ? 64 : kScaleGroupBytes;

  for (int it = 0; it < num_tiles; ++it) {
    // Tile `it` has landed for THIS thread's copies; the barrier makes every
    // thread's copies visible to all, and also certifies that all warps have
    // finished computing on tile it-1, whose slot the load below reuses.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      const int next = it + kStages - 1;
      if (next < num_tiles) load_tile(next, next % kStages);
      cp_async_commit();
    }

    const int slot = it % kStages;
    const uint32_t stage = smem_base + slot * p.stage_bytes;
    const int kt0 = k16_begin + it * kK16PerTile;
    const int group0 = (kt0 * 16) >> p.log2_group_size;

    if (warp_active) {
      // Two-deep register pipeline over this warp's slabs: the shared-memory
      // loads of slab i+1 are issued before slab i is dequantized, so their
      // latency hides behind ALU work instead of stalling the warp.
      uint4 codes[2];
      uint32_t a_frag[2][kMTiles][4];
      auto fetch = [&](int i, int buf) {
        const int kl = warp_kgroup * kK16PerWarp + i;
        codes[buf] = lds_128(stage + b_lane_offset + kl * kUnitBytes);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          const int row = mt * 16 + a_row_in_tile;
          const int chunk = (2 * kl + a_chunk_half) ^ a_swizzle;
          ldmatrix_x4(a_frag[buf][mt], stage + row * kARowBytes + chunk * 16);
        }
      };
      fetch(0, 0);
#pragma unroll
      for (int i = 0; i < kK16PerWarp; ++i) {
        const int buf = i & 1;
        if (i + 1 < kK16PerWarp) fetch(i + 1, buf ^ 1);
        const int kl = warp_kgroup * kK16PerWarp + i;
        const int kt = kt0 + kl;
        if (kt < k16_end) {  // false only in the last, partial k-tile
          // Scales/zero points change at most once per group: reload the
          // per-lane constants only when this slab starts a new group.
          const int grp = (kt * 16) >> p.log2_group_size;
          if (grp != current_group) {
            current_group = grp;
            const int gl = grp - group0;
            load_group_constants<T, kZP>(gc, stage + scale_lane_offset + gl * kScaleGroupBytes,
                                         stage + zp_lane_offset + gl * zp_group_stride);
          }
          const uint32_t words[4] = {codes[buf].x, codes[buf].y, codes[buf].z, codes[buf].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            uint32_t b_h0[2], b_h1[2];
            dequant_word<T, kZP>(words[j], gc, j, b_h0, b_h1);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
              mma_16x8x16<kBF16>(acc[mt][j][0], a_frag[buf][mt], b_h0[0], b_h0[1]);
              mma_16x8x16<kBF16>(acc[mt][j][1], a_frag[buf][mt], b_h1[0], b_h1[1]);
            }
          }
        }
      }
    }
  }

  // Drain: only empty groups can still be pending, but the ring is about to
  // be reused as the reduction buffer, so make sure nothing can land late.
  cp_async_wait<0>();
  __syncthreads();

  // Cross-k-warp reduction, in a fixed order so the result is deterministic:
  // (kgroup0 + kgroup2) + (kgroup1 + kgroup3). Each lane moves its
  // accumulators as float4s, lane-contiguous, so every access is conflict-free.
  constexpr int kAccVec = kMTiles * 8;  // float4s per lane: one per (mt, j, h)
  float4* reduce_buf = reinterpret_cast<float4*>(smem);
  auto slot_ptr = [&](int slot_idx) {
    return reduce_buf + (slot_idx * kUnitsPerBlock + warp_unit) * kAccVec * 32 + lane;
  };
  auto store_acc = [&](float4* dst) {
#pragma unroll
    for (int v = 0; v < kAccVec; ++v) {
      const float* c = acc[v >> 3][(v >> 1) & 3][v & 1];
      dst[v * 32] = make_float4(c[0], c[1], c[2], c[3]);
    }
  };
  auto add_acc = [&](const float4* src) {
#pragma unroll
    for (int v = 0; v < kAccVec; ++v) {
      float* c = acc[v >> 3][(v >> 1) & 3][v & 1];
      const float4 o = src[v * 32];
      c[0] += o.x;
      c[1] += o.y;
      c[2] += o.z;
      c[3] += o.w;
    }
  };
  if (warp_kgroup >= 2 && warp_active) store_acc(slot_ptr(warp_kgroup - 2));
  __syncthreads();
  if (warp_kgroup < 2 && warp_active) add_acc(slot_ptr(warp_kgroup));
  __syncthreads();
  if (warp_kgroup == 1 && warp_active) store_acc(slot_ptr(0));
  __syncthreads();
  if (warp_kgroup != 0 || !warp_active) return;
  add_acc(slot_ptr(0));

  // Epilogue. Accumulator (mt, j, h) holds rows m0 + 16 mt + g (+8) and
  // columns 64 unit + 16 j + 8 h + 2t (+1).
  const int64_t n_unit0 = static_cast<int64_t>(unit0 + warp_unit) * kUnitN;
  if (p.num_splits == 1) {
    T* out = static_cast<T*>(p.out);
    const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t n = n_unit0 + 16 * j + 8 * h + 2 * t;
        float b0 = 0.f, b1 = 0.f;
        if (bias != nullptr) {
          if (n < p.N) b0 = to_float<T>(bias[n]);
          if (n + 1 < p.N) b1 = to_float<T>(bias[n + 1]);
        }
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          const int64_t r0 = m0 + 16 * mt + g;
          const float* c = acc[mt][j][h];
          if (r0 < p.M) store_pair<T>(out, r0, n, p.N, c[0] + b0, c[1] + b1);
          if (r0 + 8 < p.M) store_pair<T>(out, r0 + 8, n, p.N, c[2] + b0, c[3] + b1);
        }
      }
  } else {
    // fp32 partial [split][m][n_pad]; n even, n_pad % 64 == 0: float2 aligned.
    float* ws = p.workspace + static_cast<int64_t>(split) * p.M * p.n_pad;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t n = n_unit0 + 16 * j + 8 * h + 2 * t;
        if (n >= p.N) continue;
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          const int64_t r0 = m0 + 16 * mt + g;
          const float* c = acc[mt][j][h];
          if (r0 < p.M)
            *reinterpret_cast<float2*>(ws + r0 * p.n_pad + n) = make_float2(c[0], c[1]);
          if (r0 + 8 < p.M)
            *reinterpret_cast<float2*>(ws + (r0 + 8) * p.n_pad + n) = make_float2(c[2], c[3]);
        }
      }
  }
#else
  __trap();  // built for an architecture without cp.async / bf16 mma
#endif
}

// Split-K epilogue: out[m, n] = T(((p_0 + p_1) + ... + p_{S-1}) + bias[n]),
// always in split order, so repeated runs are bitwise identical.
// The partials sit in L2 (the GEMM kernel wrote them just before), so the cost
// is latency: a thread adds 4 columns of one row, each split one 16-byte load,
// and issues kSplitLoads splits' loads before the first add. One column a
// thread with a load-add chain took 6.9 us for 4 splits of 256 x 4096
// (session 17: a 64-bit division and four serial L2 round trips an output).
// Columns N .. n_pad - 1 of a row are read (the row is n_pad long: n_pad is a
// multiple of kUnitN, so every quad is in bounds and 16-byte aligned) and dropped.
constexpr int kSplitLoads = 8;

template <typename T>
__global__ void __launch_bounds__(256)
    splitk_reduce_kernel(const float* __restrict__ workspace, const T* __restrict__ bias,
                         T* __restrict__ out, int64_t M, int64_t N, int64_t n_pad, int splits) {
  const int64_t quads = n_pad / 4;
  const int64_t total = M * quads;
  const int64_t split_stride = M * n_pad;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = idx / quads;
    const int64_t n = 4 * (idx - m * quads);
    const float* src = workspace + m * n_pad + n;
    // The sum starts at split 0's partial as it is (0 + p_0 would turn a -0 into
    // +0), loaded with the first batch, whose adds start at split 1.
    float4 sum{};
    for (int s0 = 0; s0 < splits; s0 += kSplitLoads) {
      float4 v[kSplitLoads];
#pragma unroll
      for (int s = 0; s < kSplitLoads; ++s)
        if (s0 + s < splits)
          v[s] = __ldcg(reinterpret_cast<const float4*>(src + (s0 + s) * split_stride));
      if (s0 == 0) sum = v[0];
#pragma unroll
      for (int s = 0; s < kSplitLoads; ++s) {
        if (s0 + s >= splits) break;
        if (s0 + s == 0) continue;
        sum.x += v[s].x;
        sum.y += v[s].y;
        sum.z += v[s].z;
        sum.w += v[s].w;
      }
    }
    const float c[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (n + e < N) store_with_bias(out, bias, m, n + e, N, c[e]);
  }
}

// ---------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------

// Where A, the codes, the scales and the zero points of one k-tile sit inside
// a pipeline stage, and the dynamic shared memory the whole ring needs.
struct StageLayout {
  int groups_per_tile;
  int b_offset, scale_offset, zp_offset;
  int stage_bytes;
  int smem_bytes;
};

template <ZeroPointKind kZP, int kMTiles>
StageLayout stage_layout(int64_t group_size) {
  using Cfg = TileConfig<kMTiles>;
  const int zp_group_bytes = kZP == ZeroPointKind::kPacked4  ? 64
                             : kZP == ZeroPointKind::kOffset ? kScaleGroupBytes
                                                             : 0;
  StageLayout s;
  s.groups_per_tile = static_cast<int>(std::max<int64_t>(1, kTileK / group_size));
  s.b_offset = Cfg::kAStageBytes;
  s.scale_offset = s.b_offset + kBStageBytes;
  s.zp_offset = s.scale_offset + s.groups_per_tile * kScaleGroupBytes;
  s.stage_bytes = s.zp_offset + s.groups_per_tile * zp_group_bytes;
  s.smem_bytes = std::max(Cfg::kStages * s.stage_bytes, Cfg::kReduceBytes);
  return s;
}

template <typename T, ZeroPointKind kZP, int kMTiles>
cudaError_t launch_typed(const MarlinGemmArgs& args, const DeviceLimits& device,
                         int split_k_override, cudaStream_t stream) {
  using Cfg = TileConfig<kMTiles>;
  KernelParams p{};
  copy_operands(args, &p);
  p.k16_total = static_cast<int>(args.k_pad / 16);
  p.k_blocks = static_cast<int>(args.k_blocks);
  p.log2_group_size = log2_ceil(args.group_size);
  p.units_total = static_cast<int>(args.n_pad / kUnitN);

  const StageLayout layout = stage_layout<kZP, kMTiles>(args.group_size);
  p.groups_per_tile = layout.groups_per_tile;
  p.b_offset = layout.b_offset;
  p.scale_offset = layout.scale_offset;
  p.zp_offset = layout.zp_offset;
  p.stage_bytes = layout.stage_bytes;
  const int smem_bytes = layout.smem_bytes;
  if (smem_bytes > device.max_shared_bytes_per_block) return cudaErrorInvalidConfiguration;

  const int tiles_total = static_cast<int>(ceil_div(p.k16_total, kK16PerTile));
  const int64_t n_blocks = ceil_div(p.units_total, kUnitsPerBlock);
  const int64_t m_blocks = ceil_div(args.M, 16 * kMTiles);
  if (m_blocks > 65535) return cudaErrorInvalidConfiguration;

  // How many splits the workspace can hold: S partials of M x n_pad floats.
  const int64_t per_split_elems = args.M * args.n_pad;
  int64_t ws_splits = args.workspace != nullptr ? args.workspace_elems / per_split_elems : 0;
  const int shape_max = std::min<int64_t>(tiles_total, kMaxSplits);
  int splits = 1;
  if (split_k_override > 0) {
    splits = static_cast<int>(std::min<int64_t>({int64_t{split_k_override}, ws_splits,
                                                 int64_t{shape_max}}));
  } else {
    const int heuristic_max = static_cast<int>(
        std::min<int64_t>({ws_splits, int64_t{tiles_total / kMinTilesPerSplit}, kMaxSplits}));
    // Blocks resident per SM: bounded by the register budget we compiled for
    // and by shared memory (about 1 KB per block is reserved by the driver).
    const int smem_per_sm = device.max_shared_bytes_per_block + 1024;
    const int by_smem = std::max(1, smem_per_sm / (smem_bytes + 1024));
    const int per_sm = std::min(Cfg::kMinBlocksPerSM, by_smem);
    const int slots = std::max(1, device.sm_count) * per_sm;
    if (heuristic_max > 1)
      splits = ChooseSplits(n_blocks * m_blocks, tiles_total, heuristic_max, slots,
                            kFillTiles, kReduceTiles);
  }
  splits = std::max(1, splits);
  p.tiles_per_split = static_cast<int>(ceil_div(tiles_total, splits));
  splits = static_cast<int>(ceil_div(tiles_total, p.tiles_per_split));  // no empty split
  p.num_splits = splits;

  auto kernel = marlin_gemm_kernel<T, kZP, kMTiles>;
  cudaError_t err = configure_shared_memory<marlin_gemm_kernel<T, kZP, kMTiles>>(device);
  if (err != cudaSuccess) return err;

  const dim3 grid(static_cast<unsigned>(n_blocks), static_cast<unsigned>(m_blocks),
                  static_cast<unsigned>(splits));
  kernel<<<grid, kThreads, smem_bytes, stream>>>(p);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  return splits > 1 ? LaunchSplitKReduce(args, device, splits, stream) : cudaSuccess;
}

template <typename T, ZeroPointKind kZP>
cudaError_t dispatch_mtiles(const MarlinGemmArgs& args, const DeviceLimits& device,
                            int split_k_override, cudaStream_t stream) {
  // M <= 64 uses exactly ceil(M / 16) m16 tiles in one m-block; larger M uses
  // 64-row m-blocks along grid.y. Where the device's shared memory cannot hold
  // the pipeline of that many tiles (A100 with 16-wide groups, 99 KB parts),
  // fewer tiles per block do the same work in more m-blocks.
  int64_t m_tiles = std::min<int64_t>(4, ceil_div(args.M, 16));
  const auto fits = [&](int tiles) {
    const int needed = tiles == 1   ? stage_layout<kZP, 1>(args.group_size).smem_bytes
                       : tiles == 2 ? stage_layout<kZP, 2>(args.group_size).smem_bytes
                       : tiles == 3 ? stage_layout<kZP, 3>(args.group_size).smem_bytes
                                    : stage_layout<kZP, 4>(args.group_size).smem_bytes;
    return needed <= device.max_shared_bytes_per_block;
  };
  while (m_tiles > 1 && !fits(static_cast<int>(m_tiles))) --m_tiles;
  switch (m_tiles) {
    case 1: return launch_typed<T, kZP, 1>(args, device, split_k_override, stream);
    case 2: return launch_typed<T, kZP, 2>(args, device, split_k_override, stream);
    case 3: return launch_typed<T, kZP, 3>(args, device, split_k_override, stream);
    default: return launch_typed<T, kZP, 4>(args, device, split_k_override, stream);
  }
}

template <typename T>
cudaError_t dispatch_zero_points(const MarlinGemmArgs& args, const DeviceLimits& device,
                                 int split_k_override, cudaStream_t stream) {
  return with_zero_point_kind(args.zero_point_kind, [&](auto zp) {
    return dispatch_mtiles<T, decltype(zp)::value>(args, device, split_k_override, stream);
  });
}

}  // namespace

cudaError_t LaunchSplitKReduce(const MarlinGemmArgs& args, const DeviceLimits& device,
                               int splits, cudaStream_t stream) {
  const int64_t total = args.M * (args.n_pad / 4);  // a thread a quad of columns
  const auto blocks = static_cast<unsigned>(
      std::min<int64_t>(ceil_div(total, 256), int64_t{std::max(1, device.sm_count)} * 16));
  return with_activation_type(args.dtype, [&](auto act) {
    using T = decltype(act);
    splitk_reduce_kernel<T><<<blocks, 256, 0, stream>>>(
        args.workspace, static_cast<const T*>(args.bias), static_cast<T*>(args.out), args.M,
        args.N, args.n_pad, splits);
    return cudaGetLastError();
  });
}

// Whether the wgmma kernel takes a GEMM the streaming kernel declined: M =
// kWgmmaMinM..kWgmmaMaxM on sm_90, unless a test asks for the tiled kernel, by name or with
// a k-split count (only the tiled kernel takes one). kForceWgmmaReduce keeps it (its split
// through the reduce kernel).
static bool wgmma_takes(const MarlinGemmArgs& args, const DeviceLimits& device,
                        int split_k_override) {
#ifdef JAX_MARLIN_WGMMA
  return split_k_override <= 0 && split_k_override != kForceTiledKernel &&
         WgmmaGemmApplies(args, device);
#else
  (void)args, (void)device, (void)split_k_override;
  return false;
#endif
}

const char* PlannedKernel(const MarlinGemmArgs& args, const DeviceLimits& device,
                          int split_k_override) {
  StreamGridInfo info{};
  if (PlanStreamGemm(args, device, split_k_override, &info)) return "stream";
  return wgmma_takes(args, device, split_k_override) ? "wgmma" : "tiled";
}

cudaError_t LaunchMarlinGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                             int split_k_override, cudaStream_t stream) {
  if (args.M <= 0 || args.N <= 0 || args.K <= 0) return cudaErrorInvalidValue;
  if (args.a == nullptr || args.codes == nullptr || args.scales == nullptr ||
      args.out == nullptr)
    return cudaErrorInvalidValue;
  if (args.zero_point_kind != ZeroPointKind::kImplicit && args.zero_points == nullptr)
    return cudaErrorInvalidValue;
  const int64_t gs = args.group_size;
  if (gs < 16 || (gs & (gs - 1)) != 0) return cudaErrorInvalidValue;
  if (args.n_pad % kUnitN != 0 || args.N > args.n_pad) return cudaErrorInvalidValue;
  if (args.k_pad % 16 != 0 || args.k_pad != args.k_blocks * gs || args.K > args.k_pad ||
      args.K % 8 != 0)
    return cudaErrorInvalidValue;
  if (args.k_pad / 16 > INT32_MAX / 16 || args.n_pad / kUnitN > INT32_MAX)
    return cudaErrorInvalidValue;
  if (device.compute_capability < 80) return cudaErrorInvalidDeviceFunction;

  // Small M streams the weights (stream_kernel.cu); it declines, launching
  // nothing, where it does not apply or its grid cannot fit, and the tiled
  // kernel takes over.
  if (const cudaError_t err = LaunchStreamGemm(args, device, split_k_override, stream);
      err != cudaErrorNotSupported)
    return err;
#ifdef JAX_MARLIN_WGMMA
  if (wgmma_takes(args, device, split_k_override))
    return LaunchWgmmaGemm(args, device, stream, WgmmaOverridesFor(split_k_override));
#endif

  return with_activation_type(args.dtype, [&](auto act) {
    return dispatch_zero_points<decltype(act)>(args, device, split_k_override, stream);
  });
}

}  // namespace jax_marlin

