// Weight-streaming W4A16 kernel for small M (decode and small batches).
//
// At M <= 16 a 4-bit GEMM is a pure stream of weight bytes: 8192 x 28672 is
// 122 MB of codes, scales and zero points and ~0.5 GFLOP. The kernel's only
// job is to keep ~4 TB/s of those bytes in flight while issuing as few
// instructions per byte as possible. The tiled kernel (marlin_kernel.cu)
// measured issue-bound at ~150 instructions per 512-byte unit (docs/perf);
// this one is built around the three changes that analysis asked for:
//
// 1. Operand swap. The dequantized weights are the mma A operand (16 rows =
//    16 output columns) and the activations the n8 B operand, so M <= 8 wastes
//    nothing and one HMMA covers 16 columns x 16 k. The tile layout already
//    fits: word j of a lane holds columns 16j + g and 16j + 8 + g at k = 2t,
//    2t+1, 2t+8, 2t+9, which are exactly A-fragment rows g and g + 8.
// 2. Every warp streams its own codes: a private shared-memory ring of 8
//    units (4 KB per warp, 64 KB in flight per SM) filled by cp.async, one
//    commit group per unit, so unit u of the next step is in flight while
//    unit u of this one is consumed. No barrier and no shared stage between
//    warps: they drift freely and hide each other's latency. (A register ring
//    was the first version: 32 more registers per thread spilled at M > 8.)
// 3. A balanced grid. Work is a list of "steps" (one 512-column group x 128 of
//    k, 8 warps x 8 units); B blocks (B = the SMs' resident slots) take equal
//    contiguous runs of it (stream-K), so every SM streams the same number of
//    bytes whatever the shape. A column group cut between blocks is summed by
//    a second kernel over fp32 partials, in block order: bitwise reproducible.
//
// Activations (tiny at small M) are staged per block into shared memory once,
// asynchronously, and read with ldmatrix.

#include "stream_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "marlin_device.cuh"

namespace jax_marlin {
namespace {

constexpr int kStreamThreads = 256;
constexpr int kStreamWarps = kStreamThreads / 32;
constexpr int kStepUnits = 8;                 // k16 units per warp per step
constexpr int kStepK = 16 * kStepUnits;       // 128
constexpr int kGroupTiles = kStreamWarps;     // 64-column tiles per column group
constexpr int kGroupColumns = 64 * kGroupTiles;  // 512
constexpr int kUnitWords = 128;               // one 16 x 64 unit: 32 lanes x 16 bytes
constexpr int kUnitBytes = 4 * kUnitWords;
constexpr int kRingBytes = kStreamWarps * kStepUnits * kUnitBytes;  // 32 KB per block
// One staged A row per step: 128 halves plus 16 bytes of padding, so that the
// eight rows one ldmatrix reads start 4 banks apart (272 / 4 = 68 = 4 mod 32)
// and the read is conflict-free.
constexpr int kARowBytes = 2 * kStepK + 16;

struct StreamParams {
  const void* a;
  const uint32_t* codes;
  const void* scales;
  const void* zero_points;
  const void* bias;
  void* out;
  float* workspace;
  int64_t M, N, K, n_pad;
  int kt_total;          // k_pad / 16: units along k
  int n_tiles;           // n_pad / 64
  int k_blocks;
  int log2_group_units;  // log2(group_size / 16)
  int k_steps;           // L: steps in one column group's k-range
  int total_steps;       // T = column groups x L
  int blocks;            // B
  int direct;            // every column group lies inside one block: no workspace
};

// Block b owns the steps [first_step(b), first_step(b + 1)).
__host__ __device__ __forceinline__ int first_step(int64_t b, int64_t T, int64_t B) {
  return static_cast<int>(b * T / B);
}
// The block owning step s: the largest b with floor(b T / B) <= s.
__host__ __device__ __forceinline__ int owner_block(int64_t s, int64_t T, int64_t B) {
  return static_cast<int>(((s + 1) * B + T - 1) / T - 1);
}

// 16 bytes of codes, read once by exactly one warp: .cg skips L1 (no reuse,
// and it would evict the scales other warps share), and the L2::256B hint
// fetches the whole 256-byte span the warp walks next.
__device__ __forceinline__ void cp_async_stream_16(uint32_t dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(dst), "l"(src)
               : "memory");
#endif
}

template <typename T, ZeroPointKind kZP, int kMT, int kGroupUnits>
__global__ void __launch_bounds__(kStreamThreads, 2) stream_gemm_kernel(const StreamParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr bool kBF16 = DTypeTraits<T>::kIsBF16;
  constexpr int kRows = 8 * kMT;                       // A rows staged, M padded
  constexpr int kAStepBytes = kRows * kARowBytes;
  // Groups met in one step: 128 / group_size for groups of 32 and 64; for
  // larger groups a step lies inside one group (steps start at multiples of
  // 128 of k and group sizes are powers of two).
  constexpr int kGroupsPerStep = kGroupUnits < kStepUnits ? kStepUnits / kGroupUnits : 1;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = shared_address(smem);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;

  const int s_begin = first_step(blockIdx.x, p.total_steps, p.blocks);
  const int n_steps = first_step(blockIdx.x + 1, p.total_steps, p.blocks) - s_begin;
  const int group_unit_mask = (1 << p.log2_group_units) - 1;

  const T* __restrict__ scales = static_cast<const T*>(p.scales);
  const uint32_t* __restrict__ zero_points = static_cast<const uint32_t*>(p.zero_points);

  // Where a step is: column group ng, k-step ks (units 8 ks .. 8 ks + 7).
  int ng = s_begin / p.k_steps;
  int ks = s_begin - ng * p.k_steps;
  auto tile_of = [&](int ng_) { return ng_ * kGroupTiles + warp; };
  auto units_in = [&](int ng_, int ks_) {
    return tile_of(ng_) < p.n_tiles ? min(kStepUnits, p.kt_total - ks_ * kStepUnits) : 0;
  };
  auto codes_at = [&](int ng_, int ks_) {
    return reinterpret_cast<const uint4*>(
               p.codes + (static_cast<int64_t>(tile_of(ng_)) * p.kt_total + ks_ * kStepUnits) *
                             kUnitWords) +
           lane;
  };

  // Raw group words, prefetched one step ahead: the lane's 8 scales (one
  // 16-byte load, already in fragment order) and 8 packed zero points.
  uint4 raw_scales[kGroupsPerStep];
  uint32_t raw_zeros[kGroupsPerStep];
  auto load_group_words = [&](int j, int ng_, int ks_) {
    const int gi = (ks_ * kStepUnits + j * kGroupUnits) >> p.log2_group_units;
    if (gi < p.k_blocks) {
      const int tile = tile_of(ng_);
      raw_scales[j] = __ldg(reinterpret_cast<const uint4*>(
          scales + static_cast<int64_t>(gi) * p.n_pad + tile * 64 + 8 * g));
      if constexpr (kZP == ZeroPointKind::kPacked4)
        raw_zeros[j] = __ldg(zero_points + static_cast<int64_t>(gi) * (p.n_pad / 8) + tile * 8 + g);
    }
  };
#pragma unroll
  for (int j = 0; j < kGroupsPerStep; ++j) {
    raw_scales[j] = make_uint4(0, 0, 0, 0);
    raw_zeros[j] = 0;
  }

  // Stage A for all of this block's steps, one commit group: step i, row
  // r < kRows, 16-byte chunk c (8 k) at a_base + i * kAStepBytes +
  // r * kARowBytes + 16 c. Rows >= M and k >= K are zero-filled by cp.async
  // (src-size 0 reads nothing); K % 8 == 0, so a chunk is all in or all out.
  const uint32_t a_base = smem_base + kRingBytes;
  {
    const T* __restrict__ a = static_cast<const T*>(p.a);
    constexpr int kChunksPerRow = kStepK / 8;
    constexpr int kChunksPerStep = kRows * kChunksPerRow;
    auto stage = [&](int i_begin, int i_end) {
      for (int c = i_begin * kChunksPerStep + threadIdx.x; c < i_end * kChunksPerStep;
           c += kStreamThreads) {
        const int i = c / kChunksPerStep;
        const int row = (c / kChunksPerRow) % kRows;
        const int chunk = c % kChunksPerRow;
        const int ks_i = (s_begin + i) % p.k_steps;
        const int64_t k = static_cast<int64_t>(ks_i) * kStepK + chunk * 8;
        const bool inside = row < p.M && k < p.K;
        cp_async_16(a_base + i * kAStepBytes + row * kARowBytes + chunk * 16,
                    inside ? a + row * p.K + k : a, inside ? 16 : 0);
      }
    };
    stage(0, n_steps);
    cp_async_commit();
  }

  // The first step's codes, one commit group per unit (empty groups where a
  // unit does not exist, so that "the unit consumed next" is always exactly
  // kStepUnits - 1 groups back), then its group words.
  const uint32_t ring_lane = smem_base + warp * (kStepUnits * kUnitBytes) + lane * 16;
  int valid = units_in(ng, ks);
  {
    const uint4* src = codes_at(ng, ks);
#pragma unroll
    for (int u = 0; u < kStepUnits; ++u) {
      if (u < valid) cp_async_stream_16(ring_lane + u * kUnitBytes, src + u * (kUnitWords / 4));
      cp_async_commit();
    }
    if (valid > 0) {
#pragma unroll
      for (int j = 0; j < kGroupsPerStep; ++j) load_group_words(j, ng, ks);
    }
  }

  // ldmatrix.x4 lane addresses. kMT = 1: matrices {unit u k0-7, unit u k8-15,
  // unit u+1 k0-7, unit u+1 k8-15} of rows 0-7, i.e. the B fragments of two
  // units. kMT = 2: {rows 0-7 k0-7, rows 0-7 k8-15, rows 8-15 k0-7, rows 8-15
  // k8-15} of one unit, i.e. the B fragments of both n8 tiles.
  const int mat = lane >> 3;
  const uint32_t a_lane =
      kMT == 1 ? (lane & 7) * kARowBytes + (mat >> 1) * 32 + (mat & 1) * 16
               : ((lane & 7) + 8 * (mat >> 1)) * kARowBytes + (mat & 1) * 16;

  float acc[4][kMT][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][mt][e] = 0.f;

  // Writes this warp's 64 columns of column group ng_: straight to out when
  // the group lies in one block, else as fp32 partial number (this block -
  // the group's first block) for the reduce kernel. C fragment element e of
  // tile (j, mt): column 16 j + g + 8 (e >> 1), row 2 t + (e & 1) + 8 mt.
  auto flush = [&](int ng_) {
    const int t = lane & 3;
    const int64_t n0 = static_cast<int64_t>(tile_of(ng_)) * 64 + g;
    const int slot =
        p.direct ? 0
                 : blockIdx.x - owner_block(static_cast<int64_t>(ng_) * p.k_steps,
                                            p.total_steps, p.blocks);
    T* out = static_cast<T*>(p.out);
    const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t n = n0 + 16 * j + 8 * (e >> 1);
          const int64_t m = 2 * t + (e & 1) + 8 * mt;
          if (m >= p.M) continue;
          if (p.direct) {
            if (n < p.N) {
              float v = acc[j][mt][e];
              if (bias != nullptr) v += to_float<T>(bias[n]);
              out[m * p.N + n] = from_float<T>(v);
            }
          } else {
            p.workspace[(slot * p.M + m) * p.n_pad + n] = acc[j][mt][e];
          }
          acc[j][mt][e] = 0.f;
        }
  };

  GroupConstants gc;
  // A is the oldest group: once at most the 8 code groups are pending, this
  // thread's A chunks have landed; the barrier makes everyone's visible.
  cp_async_wait<kStepUnits>();
  __syncthreads();

  for (int i = 0; i < n_steps; ++i) {
    int ng_next = ng, ks_next = ks + 1;
    if (ks_next == p.k_steps) {
      ks_next = 0;
      ++ng_next;
    }
    const int valid_next = i + 1 < n_steps ? units_in(ng_next, ks_next) : 0;
    const uint4* src_next = codes_at(ng_next, ks_next);
    // Groups of >= 128: constants change only where a step starts a group.
    const bool group_starts = i == 0 || ((ks * kStepUnits) & group_unit_mask) == 0;
    const bool next_group_starts = ((ks_next * kStepUnits) & group_unit_mask) == 0;
    const uint32_t a_step = a_base + i * kAStepBytes + a_lane;
    uint32_t b_pair[4];  // kMT = 1: the B fragments of units u and u + 1 (u even)

#pragma unroll
    for (int u = 0; u < kStepUnits; ++u) {
      if (u % kGroupUnits == 0) {
        const int j = u / kGroupUnits;
        if (kGroupUnits < kStepUnits || group_starts)
          make_group_constants<T, kZP>(gc, raw_scales[j], raw_zeros[j], make_uint4(0, 0, 0, 0));
        // The slot is consumed: refill it with the next step's words.
        if (valid_next > 0 && (kGroupUnits < kStepUnits || next_group_starts))
          load_group_words(j, ng_next, ks_next);
      }
      // This unit's group is kStepUnits - 1 commits back. Each lane reads back
      // only the 16 bytes it copied itself, so no barrier is needed.
      cp_async_wait<kStepUnits - 1>();
      if (u < valid) {
        const uint4 q = lds_128(ring_lane + u * kUnitBytes);
        uint32_t b[kMT][2];
        if constexpr (kMT == 1) {
          if (u % 2 == 0) ldmatrix_x4(b_pair, a_step + u * 32);
          b[0][0] = b_pair[2 * (u % 2)];
          b[0][1] = b_pair[2 * (u % 2) + 1];
        } else {
          uint32_t frag[4];
          ldmatrix_x4(frag, a_step + u * 32);
          b[0][0] = frag[0];
          b[0][1] = frag[1];
          b[1][0] = frag[2];
          b[1][1] = frag[3];
        }
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t h0[2], h1[2];
          dequant_word<T, kZP>(words[j], gc, j, h0, h1);
          // A fragment: {row g k 2t.., row g+8 k 2t.., row g k 2t+8.., row g+8 k 2t+8..}
          // = {column (j,0) low k, column (j,1) low k, (j,0) high k, (j,1) high k}.
          const uint32_t frag_a[4] = {h0[0], h1[0], h0[1], h1[1]};
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) mma_16x8x16<kBF16>(acc[j][mt], frag_a, b[mt][0], b[mt][1]);
        }
      }
      // Refill the slot with unit u of the next step. Issued after the
      // compute that consumed the slot's words (in-order issue: the LDS above
      // has returned before this copy can be issued).
      if (u < valid_next) cp_async_stream_16(ring_lane + u * kUnitBytes, src_next + u * (kUnitWords / 4));
      cp_async_commit();
    }
    if (i + 1 == n_steps || ng_next != ng) {
      if (valid > 0) flush(ng);
    }
    ng = ng_next;
    ks = ks_next;
    valid = valid_next;
  }
#endif
}

// out[m, n] = T(((p_0 + p_1) + ... ) + bias[n]) over the blocks that cut
// column group n / 512, in block order: the same sum every run.
template <typename T>
__global__ void __launch_bounds__(256) stream_reduce_kernel(const StreamParams p) {
  const int64_t total = p.M * p.N;
  const T* bias = static_cast<const T*>(p.bias);
  T* out = static_cast<T*>(p.out);
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = idx / p.N;
    const int64_t n = idx - m * p.N;
    const int64_t s0 = (n / kGroupColumns) * p.k_steps;
    const int parts = owner_block(s0 + p.k_steps - 1, p.total_steps, p.blocks) -
                      owner_block(s0, p.total_steps, p.blocks) + 1;
    const float* src = p.workspace + m * p.n_pad + n;
    const int64_t part_stride = p.M * p.n_pad;
    float sum = src[0];
    for (int i = 1; i < parts; ++i) sum += src[i * part_stride];
    if (bias != nullptr) sum += to_float<T>(bias[n]);
    out[idx] = from_float<T>(sum);
  }
}

// ---------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------

// The most partials any column group needs with B blocks (1 = direct).
int max_parts(int64_t n_groups, int64_t L, int64_t T, int64_t B) {
  int most = 1;
  for (int64_t ng = 0; ng < n_groups; ++ng) {
    most = std::max(most, owner_block(ng * L + L - 1, T, B) - owner_block(ng * L, T, B) + 1);
  }
  return most;
}

// Chooses B and fills the grid fields of `p`; false if nothing fits.
bool plan_grid(const MarlinGemmArgs& args, const DeviceLimits& device, int split_k_override,
               int rows, StreamParams* p, int* smem_bytes) {
  const int64_t n_groups = ceil_div(p->n_tiles, kGroupTiles);
  const int64_t L = ceil_div(p->kt_total, kStepUnits);
  const int64_t T = n_groups * L;
  if (T > INT32_MAX / 2) return false;
  const int64_t step_bytes = int64_t{rows} * kARowBytes;  // A, per step of the block
  // Two blocks per SM (the launch bounds' register budget), each with at
  // most half the SM's shared memory (~1 KB per block is the driver's).
  const int64_t smem_cap = std::min<int64_t>(device.max_shared_bytes_per_block,
                                             (device.max_shared_bytes_per_block + 1024) / 2 - 1024);
  const int64_t parts_cap =
      args.workspace != nullptr ? args.workspace_elems / (args.M * args.n_pad) : 0;
  auto fits = [&](int64_t B, int* parts) {
    if (B < 1 || B > T || kRingBytes + ceil_div(T, B) * step_bytes > smem_cap) return false;
    *parts = max_parts(n_groups, L, T, B);
    return *parts == 1 || *parts <= parts_cap;
  };

  int64_t B = 0;
  int parts = 1;
  if (split_k_override > 0) {
    // An aligned split-K: every column group cut into the same number of
    // blocks; fewer cuts where the workspace or shared memory says so.
    for (int64_t s = std::min<int64_t>(split_k_override, L); s >= 1 && B == 0; --s)
      if (fits(n_groups * s, &parts)) B = n_groups * s;
  } else {
    const int64_t slots = std::max(1, device.sm_count) * int64_t{2};
    const int64_t start = std::min(T, slots);
    // Fewer blocks need fewer partials but more shared memory per block: go
    // down while shared memory allows, then up if it never did.
    for (int64_t b = start; b >= 1 && B == 0; --b) {
      if (kRingBytes + ceil_div(T, b) * step_bytes > smem_cap) break;
      if (fits(b, &parts)) B = b;
    }
    for (int64_t b = start + 1; b <= T && B == 0; ++b)
      if (fits(b, &parts)) B = b;
  }
  if (B == 0) return false;
  p->k_steps = static_cast<int>(L);
  p->total_steps = static_cast<int>(T);
  p->blocks = static_cast<int>(B);
  p->direct = parts == 1;
  *smem_bytes = static_cast<int>(kRingBytes + ceil_div(T, B) * step_bytes);
  return true;
}

// Raises the kernel's dynamic shared-memory limit once per device (see the
// tiled kernel's allow_max_shared_memory for why once, and why per kernel).
template <typename T, ZeroPointKind kZP, int kMT, int kGroupUnits>
cudaError_t allow_stream_shared_memory(const DeviceLimits& device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> raised[kMaxDevices];
  const bool cacheable = device.ordinal >= 0 && device.ordinal < kMaxDevices;
  if (cacheable && raised[device.ordinal].load(std::memory_order_acquire)) return cudaSuccess;
  cudaError_t err = cudaFuncSetAttribute(stream_gemm_kernel<T, kZP, kMT, kGroupUnits>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         device.max_shared_bytes_per_block);
  if (err == cudaSuccess && cacheable) raised[device.ordinal].store(true, std::memory_order_release);
  return err;
}

template <typename T, ZeroPointKind kZP, int kMT, int kGroupUnits>
cudaError_t launch_stream(const StreamParams& p, int smem_bytes, const DeviceLimits& device,
                          cudaStream_t stream) {
  cudaError_t err = allow_stream_shared_memory<T, kZP, kMT, kGroupUnits>(device);
  if (err != cudaSuccess) return err;
  stream_gemm_kernel<T, kZP, kMT, kGroupUnits>
      <<<static_cast<unsigned>(p.blocks), kStreamThreads, smem_bytes, stream>>>(p);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  if (!p.direct) {
    const int64_t blocks =
        std::min<int64_t>(ceil_div(p.M * p.N, 256), int64_t{std::max(1, device.sm_count)} * 8);
    stream_reduce_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p);
    err = cudaGetLastError();
  }
  return err;
}

template <typename T, ZeroPointKind kZP, int kMT>
cudaError_t dispatch_group_units(const StreamParams& p, int smem_bytes,
                                 const DeviceLimits& device, cudaStream_t stream) {
  switch (p.log2_group_units) {
    case 1: return launch_stream<T, kZP, kMT, 2>(p, smem_bytes, device, stream);
    case 2: return launch_stream<T, kZP, kMT, 4>(p, smem_bytes, device, stream);
    default: return launch_stream<T, kZP, kMT, kStepUnits>(p, smem_bytes, device, stream);
  }
}

template <typename T, ZeroPointKind kZP>
cudaError_t dispatch_rows(const StreamParams& p, int smem_bytes, const DeviceLimits& device,
                          cudaStream_t stream) {
  return p.M <= 8 ? dispatch_group_units<T, kZP, 1>(p, smem_bytes, device, stream)
                  : dispatch_group_units<T, kZP, 2>(p, smem_bytes, device, stream);
}

template <typename T>
cudaError_t dispatch_zero_points(const MarlinGemmArgs& args, const StreamParams& p,
                                 int smem_bytes, const DeviceLimits& device,
                                 cudaStream_t stream) {
  return args.zero_point_kind == ZeroPointKind::kPacked4
             ? dispatch_rows<T, ZeroPointKind::kPacked4>(p, smem_bytes, device, stream)
             : dispatch_rows<T, ZeroPointKind::kImplicit>(p, smem_bytes, device, stream);
}

}  // namespace

bool StreamGemmSupports(const MarlinGemmArgs& args) {
  return args.M >= 1 && args.M <= kStreamMaxM && args.group_size >= 32 &&
         (args.zero_point_kind == ZeroPointKind::kImplicit ||
          args.zero_point_kind == ZeroPointKind::kPacked4);
}

cudaError_t LaunchStreamGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                             int split_k_override, cudaStream_t stream) {
  if (!StreamGemmSupports(args)) return cudaErrorNotSupported;
  StreamParams p{};
  p.a = args.a;
  p.codes = args.codes;
  p.scales = args.scales;
  p.zero_points = args.zero_points;
  p.bias = args.bias;
  p.out = args.out;
  p.workspace = args.workspace;
  p.M = args.M;
  p.N = args.N;
  p.K = args.K;
  p.n_pad = args.n_pad;
  p.kt_total = static_cast<int>(args.k_pad / 16);
  p.n_tiles = static_cast<int>(args.n_pad / 64);
  p.k_blocks = static_cast<int>(args.k_blocks);
  int log2_units = 0;
  while ((int64_t{16} << log2_units) < args.group_size) ++log2_units;
  p.log2_group_units = log2_units;
  int smem_bytes = 0;
  const int rows = args.M <= 8 ? 8 : 16;
  if (!plan_grid(args, device, split_k_override, rows, &p, &smem_bytes))
    return cudaErrorNotSupported;
  switch (args.dtype) {
    case ActDType::kFloat16:
      return dispatch_zero_points<__half>(args, p, smem_bytes, device, stream);
    case ActDType::kBFloat16:
      return dispatch_zero_points<__nv_bfloat16>(args, p, smem_bytes, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace jax_marlin
