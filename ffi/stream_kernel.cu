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
// 2. Every warp streams its own codes: a private shared-memory ring of
//    kRingSteps = 2 steps (16 units, 8 KB per warp: 128 KB in flight on an SM
//    with two blocks, the stream-K grid; 64 KB under the tile split's one)
//    filled by cp.async, one commit group per unit, so unit u of step i + 2
//    is in flight while unit u of step i is consumed; the groups' scales and
//    zero points ride the same commit groups into a small ring of their own.
//    On sm_90 the stream-K grid fills the ring with bulk copies (TMA) of 2 KB
//    runs, each completed on a shared-memory barrier (fewer instructions per
//    step, and measured faster there; see the ring below).
//    No barrier and no shared stage between warps: they drift freely and
//    hide each other's latency. The depth is Little's law (at ~3.5 us of
//    loaded latency, 4 TB/s needs ~105 KB in flight per SM); a 3-step ring
//    measured no faster (docs/perf/NOTES.md, Variant 3). (A register ring was
//    the first version: 32 more registers per thread, and it spilled at M > 8.)
// 3. A balanced grid. Work is a list of "steps" (one 512-column group x 128 of
//    k, 8 warps x 8 units); B blocks (B = the SMs' resident slots) take equal
//    contiguous runs of it (stream-K), so every SM streams the same number of
//    bytes whatever the shape. A column group cut between blocks leaves fp32
//    partials in the workspace, which a small second kernel adds in block
//    order: bitwise reproducible run to run. (Letting the last block of a
//    group add them, after an atomic arrival count, measured slower: the sum
//    then sits on that block's critical path, +40 us at M = 16.)
//    Shapes with few column groups (a 4096-column projection has 8 for 264
//    block slots) take a second grid instead, the tile split: C blocks per
//    64-column tile (a thread-block cluster on sm_90) whose warps split k and
//    add in shared memory, then across the cluster through distributed shared
//    memory, so no partials and no second kernel (stream_plan.h says when).
//    Where a column group's C blocks fit one an SM, a third: the group
//    cluster, stream-K cut exactly at the groups' edges, whose C blocks of a
//    group are a cluster that adds its partials the same way (stream_plan.h).
//
// Activations (tiny at small M) are staged per block into shared memory once,
// asynchronously, and read with ldmatrix.

#include "stream_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "marlin_device.cuh"
#include "stream_plan.h"
#include "stream_timeline.h"

// sm_90: the reduce kernel after a cut stream-K grid is the main kernel's
// programmatic dependent launch. The main kernel allows it at its entry, so its
// blocks take the SMs that the main kernel's tail leaves idle and wait there
// (griddepcontrol.wait, before the first read of a partial) instead of being
// launched after the last block. Measured (session 30, probe in CUDA graphs):
// 1 x 4096 x 28672 20.9 -> 20.0 us, 16 x 14336 x 4096 21.4 -> 20.8, 1 x 8192 x
// 28672 34.2-34.5 -> 33.4-34.1; none slower; grids without a reduce unchanged.
// -DJAX_MARLIN_STREAM_REDUCE_PDL=0 launches it plainly (for A/B runs).
#ifndef JAX_MARLIN_STREAM_REDUCE_PDL
#define JAX_MARLIN_STREAM_REDUCE_PDL 1
#endif
// In the tile split's 16-row kernels (M = 9-16) each warp stages the A of its own steps
// and computes their sums, then waits for its own copies only (a warp-wide sync, after one
// block barrier that each warp reaches once its weight requests are out), where the block
// stages all of A and sums it between two block barriers: at M = 16 the whole block waited
// for 16 rows of A and a block-wide sums pass before any warp's first step. Session 38
// call R (CUDA graphs, us): 9 / 12 / 16 x 4096 x 4096 8.57 -> 7.83,
// 9.05 -> 8.20, 9.15 -> 8.71; 12 / 16 x 4096 x 6144 12.54 -> 11.38, 13.56 -> 12.10;
// 9 x 14336 x 4096 16.98 -> 15.87. In the 8-row kernels per warp lost where K is long
// (calls O-P: 1 x 14336 x 4096 11.34 -> 12.09, warp 0's A landing 0.7 us later,
// unexplained; 4 x 14336 x 4096 13.44 -> 13.60) and won 4% at 8 x 4096 x 4096. Choosing
// by M at run time instead (call Q: per warp from M = 8, the staging loops' stride then a
// variable) also slowed M = 1-4, where only that stride differed from main: 0.2-0.3% at
// 4096 x 4096, 2-4.5% at K = 14336. So the instance decides. 0 turns it off, except in
// the instances that stage A in phases per warp (stream_plan.h), which need it.
#ifndef JAX_MARLIN_STREAM_WARP_A
#define JAX_MARLIN_STREAM_WARP_A 1
#endif

namespace jax_marlin {
namespace {

// StreamParams::reduce: no group is cut (no reduce kernel), or the reduce
// kernel adds a thread's outputs serially, or gives each output 8 threads.
constexpr int kNoReduce = 0, kReduceSerial = 1, kReduceSliced = 2;

struct StreamParams : GemmOperands {
  int kt_total;          // k_pad / 16: units along k
  int n_tiles;           // n_pad / 64
  int k_blocks;
  int log2_group_units;  // log2(group_size / 16)
  int k_steps;           // L: steps in one column group's k-range
  int total_steps;       // T = column groups x L
  int blocks;            // B
  int a_phase_steps;     // P: A staged P steps at a time, by the block (stream-K) or
                         // by each warp (the tile split's 16-row kernels); stream_plan.h
  int reduce;            // the reduce kernel after this grid: kNoReduce, kReduceSerial or kReduceSliced
  // C > 0: the tile split, C blocks per 64-column tile, warps splitting k;
  // -C: the group cluster, stream-K whose C blocks of a column group are a
  // cluster (stream_plan.h); 0: stream-K. One field for both: a larger
  // StreamParams cost the GEMV's kernel 9 registers (ptxas 13.0).
  int tile_split;
};

// Timestamps for tools/latency_probe.cu (stream_timeline.h); nothing unless
// built with -DJAX_MARLIN_STREAM_TIMELINE.
#ifdef JAX_MARLIN_STREAM_TIMELINE
__device__ StreamTimeline g_timeline;
__device__ __forceinline__ void timeline_mark(StreamMark mark) {
  stamp_mark(g_timeline, blockIdx.x, mark);
}
__device__ __forceinline__ void timeline_reduce_mark(int which) {
  const unsigned block = blockIdx.x + gridDim.x * blockIdx.y;
  if (threadIdx.x == 0 && block < kTimelineBlocks) g_timeline.reduce_ns[block][which] = global_ns();
}
__device__ __forceinline__ void timeline_step(int i) { stamp_step(g_timeline, blockIdx.x, i); }
#else
__device__ __forceinline__ void timeline_mark(StreamMark) {}
__device__ __forceinline__ void timeline_reduce_mark(int) {}
__device__ __forceinline__ void timeline_step(int) {}
#endif

// kTileSplit: the grid for shapes with few column groups (a 4096-column
// projection has 8 of them for 264 block slots, so stream-K cuts every group
// ~32 ways and the reduce kernel plus its launch cost more than the stream).
// A cluster of C = p.tile_split consecutive blocks owns one 64-column tile;
// block rank r takes the r-th of C contiguous parts of its k-steps and its 8
// warps contiguous eighths of those. The warps add their sums in shared
// memory, in warp order; with C > 1 (sm_90 only) the blocks then add theirs
// through distributed shared memory, in rank order. No partials in global
// memory, no reduce kernel, and C blocks per tile so that 64 tiles still fill
// the SMs (one block per tile left half of them idle).
//
// kGroupRows (groups of 32 or 64 with M x G <= 8, G groups a step;
// stream_plan.h): column m G + s of the n8 tile takes row m of A masked to
// the step's s-th group, so every group accumulates in its own column and is
// folded once a step, not once per group (session 6's static count: 1,243
// instructions a step with groups of 32, 900 with 128; the three extra folds
// were the difference); the flush adds a row's G columns.
template <typename T, ZeroPointKind kZP, int kMT, int kGroupUnits, bool kTileSplit,
          bool kGroupRows, bool kPhases, bool kGroupCluster>
__global__ void __launch_bounds__(kStreamThreads, 2) stream_gemm_kernel(const StreamParams p) {
  static_assert(kZP != ZeroPointKind::kOffset, "float zero points take the tiled kernel");
  static_assert(!kGroupRows || (kMT == 1 && kGroupUnits < kStepUnits),
                "group rows: one n8 tile, several groups a step");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr bool kBF16 = DTypeTraits<T>::kIsBF16;
  // Groups met in one step: 128 / group_size for groups of 32 and 64; for
  // larger groups a step lies inside one group (steps start at multiples of
  // 128 of k and group sizes are powers of two).
  constexpr int kGroupsPerStep = kGroupUnits < kStepUnits ? kStepUnits / kGroupUnits : 1;
  // kGroupRows: the accumulator rows (the n8 tile's columns) per row of A.
  constexpr int kRowGroups = kGroupRows ? kGroupsPerStep : 1;
  // Groups of 32 at M = 9-16 (two n8 tiles): the codes are dequantized at the
  // scale before the MMA (dequant_word, the tiled and wgmma kernels'
  // conversion: (c - zp) exact, one rounding at the scale) into the
  // accumulators themselves, so there is no fold, where the fold after the MMA
  // would run four times a step on 32 accumulators. Static count a step (fp16,
  // packed zero points): 1,754 -> 1,566, and no spills (the fold's kernel
  // spilled 56-72 bytes). Elsewhere it costs more than the folds it removes
  // (one n8 tile, groups of 32: 1,243 -> 1,303; groups of 64, two tiles: 1,437
  // -> 1,475), since dequant_word is 13 instructions a code word against
  // magic_codes_word's 5. -DJAX_MARLIN_STREAM_PRESCALE=0 keeps the fold. The
  // rule is stream_plan.h's stream_prescale, which the planner also reads (it
  // then reserves no sums): the two n8 tiles are M = 9-16.
  constexpr bool kPrescale = stream_prescale(8 * kMT, 16 * kGroupUnits);

  extern __shared__ __align__(128) unsigned char smem[];
  timeline_mark(kMarkEntry);
#if __CUDA_ARCH__ >= 900 && JAX_MARLIN_STREAM_REDUCE_PDL
  // The reduce kernel may launch now (JAX_MARLIN_STREAM_REDUCE_PDL above). The
  // trigger only lets a dependent start early; it waits for this grid's end
  // and memory before reading anything, as any programmatic dependent must.
  // Only where a reduce kernel of ours follows: nothing else that comes next
  // gets leave to start early.
  if constexpr (!kTileSplit && !kGroupCluster)
    if (p.reduce != kNoReduce) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const uint32_t smem_base = shared_address(smem);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;

  // This warp's steps: [s_begin, s_begin + n_steps) of the work list, in which
  // step s is column group s / L (a tile under kTileSplit), k-step s % L. The
  // block's A is staged for n_stage steps from stage_begin.
  int s_begin, n_steps, stage_begin, n_stage;
  if constexpr (kTileSplit) {
    const int tile = blockIdx.x / p.tile_split, rank = blockIdx.x % p.tile_split;
    const int k_begin = rank * p.k_steps / p.tile_split;
    stage_begin = tile * p.k_steps + k_begin;
    n_stage = (rank + 1) * p.k_steps / p.tile_split - k_begin;
    s_begin = stage_begin + warp * n_stage / kStreamWarps;
    n_steps = stage_begin + (warp + 1) * n_stage / kStreamWarps - s_begin;
  } else {
    s_begin = stage_begin = first_step(blockIdx.x, p.total_steps, p.blocks);
    n_steps = n_stage = first_step(blockIdx.x + 1, p.total_steps, p.blocks) - s_begin;
  }
  // kPhases (the 16-row instances the launcher takes where the plan stages A
  // in phases, stream_plan.h's stream_a_phased): the block's step i is staged,
  // with its sums, at i mod 2P (P = p.a_phase_steps), phase q (steps q P .. q P
  // + P - 1) in the slot of P steps at 0 or P. Under the tile split each warp
  // does this with its own steps, in its own 2P slots from warp x 2P. Every
  // other instance stages all of the block's steps at once.
  static_assert(!kPhases || kMT == 2, "phases: the 16-row kernels");
  static_assert(!kGroupCluster || (!kTileSplit && !kPhases), "group cluster: stream-K, A at once");
  // No copy where the step kRingSteps ahead does not exist (the warp's last
  // kRingSteps steps: at 4096 x 4096's 2 steps a warp, every refill), where
  // the ring wrote zeros that nothing reads; the commit groups stay, so every
  // wait counts the same. Session 20 call B: -0.07 to -0.09 us on the tile
  // split's four shapes. Not in the 16-row kernels with groups under 128,
  // which sit at the 128-register cap and spill already.
  constexpr bool kSkipEmptyRefill = kMT == 1 || kGroupUnits >= kStepUnits;
  const int a_slot_steps = !kPhases   ? n_stage
                           : kTileSplit ? kStreamWarps * 2 * p.a_phase_steps
                                        : min(n_stage, 2 * p.a_phase_steps);  // A held

  const T* __restrict__ scales = static_cast<const T*>(p.scales);
  const uint32_t* __restrict__ zero_points = static_cast<const uint32_t*>(p.zero_points);

  // Where a step is: column group ng, k-step ks (units 8 ks .. 8 ks + 7).
  int ng = s_begin / p.k_steps;
  int ks = s_begin - ng * p.k_steps;
  auto tile_of = [&](int ng_) { return kTileSplit ? ng_ : ng_ * kGroupTiles + warp; };
  auto units_in = [&](int ng_, int ks_) {
    return tile_of(ng_) < p.n_tiles ? min(kStepUnits, p.kt_total - ks_ * kStepUnits) : 0;
  };
  // The codes of the step (ng_, ks_): kStepUnits units of 32 x 16 bytes.
  auto codes_at = [&](int ng_, int ks_) {
    return reinterpret_cast<const uint4*>(
        p.codes + (static_cast<int64_t>(tile_of(ng_)) * p.kt_total + ks_ * kStepUnits) *
                      kUnitWords);
  };

  // A group's words (its 64 scales, 128 bytes in fragment order, and 8 packed
  // zero-point words, 32 bytes) travel as far ahead as the codes: cp.async
  // puts a step's groups in a per-warp ring of kWordsSteps slots of
  // kGroupsPerStep groups, in the commit group of the step's first unit (the
  // cp.async code ring) or in a commit group of their own per step (the bulk
  // ring, below). (Loaded into registers one step ahead, their DRAM latency
  // was exposed: the first use of the scales held 32% of the warp-stall
  // samples of the 8192 x 28672 GEMV, session 4, call 1.) The copy for step
  // i + kRingSteps issues at step i's first unit or start, before step i's
  // folds, hence one slot more than the code ring. A slot is filled only where a group or a
  // tile starts, so a group that spans many steps (per-channel: all of k) is
  // copied once; each step in the code ring remembers its slot (2 bits per
  // step in flight in words_slot_of). Copied with every step, the per-channel GEMV
  // was 14% slower (session 4, call 4). Lane g + 4t reads the 16 scale bytes
  // and the zero-point word of its row g.
  const uint32_t words_warp = smem_base + kRingBytes + warp * kWarpWordsBytes<kGroupsPerStep>;
  // Groups under 128: copies the words of the step (ng_, ks_) into words slot `slot`. Lane c
  // copies 16-byte chunk c, c + 32, ... of the slot's kGroupsPerStep x (8
  // chunks of scales, then 2 of zero points); groups past k are zero-filled.
  auto copy_step_words = [&](int ng_, int ks_, int slot) {
    const int gi = (ks_ * kStepUnits) >> p.log2_group_units;
    const int64_t tile = tile_of(ng_);
    const uint32_t slot_base = words_warp + slot * kGroupsPerStep * kGroupWordBytes;
    constexpr int kChunks = kGroupsPerStep * (kZP == ZeroPointKind::kPacked4 ? 10 : 8);
#pragma unroll
    for (int c0 = 0; c0 < kChunks; c0 += 32) {
      const int c = c0 + lane;
      if (c < 8 * kGroupsPerStep) {
        const int j = c / 8, chunk = c % 8;
        const bool ok = gi + j < p.k_blocks;
        cp_async_16(slot_base + j * kGroupWordBytes + 16 * chunk,
                    ok ? scales + (gi + j) * p.n_pad + tile * 64 + 8 * chunk : scales,
                    ok ? 16 : 0);
      } else if (c < kChunks) {
        const int j = (c - 8 * kGroupsPerStep) / 2, chunk = c % 2;
        const bool ok = gi + j < p.k_blocks;
        cp_async_16(slot_base + j * kGroupWordBytes + 128 + 16 * chunk,
                    ok ? zero_points + (gi + j) * (p.n_pad / 8) + tile * 8 + 4 * chunk
                       : zero_points,
                    ok ? 16 : 0);
      }
    }
  };
  // Groups under 128 (several a step): step i's words are in slot i mod
  // kWordsSteps. Groups of 128 or more: only a new group or tile is copied,
  // into the next slot, and at step i the step i + j in flight (j <=
  // kRingSteps) has its words slot in bits 2j, 2j + 1 of words_slot_of, a
  // queue that moves down 2 bits a step (a 2-bit field per ring slot, read
  // and replaced at a variable shift, cost 7 instructions a step more in the
  // GEMV's SASS). Such a group's words are one 16-byte chunk per lane
  // (lanes 0-7 the scales, 8-9 the zero points),
  // copied from a per-lane base: the general copy above, with its per-chunk
  // index math, cost ~40 instructions a step of the GEMV's ~545 (SASS,
  // session 5). Their group index is always < k_blocks, so the copy needs no
  // zero-fill: a step starts below k_pad = k_blocks x group_size. (Whole
  // steps can lie past K, with groups of 256 or more; their group is still a
  // real one, and their activations are zero.)
  static_assert(kWordsSteps <= 4 && 2 * kRingSteps + 2 <= 32,
                "words_slot_of holds 2 bits per step in flight");
  uint32_t words_slot_of = 0;
  int last_slot = kWordsSteps - 1, last_ng = -1, last_gi = -1;
  constexpr int kWordChunks = kZP == ZeroPointKind::kPacked4 ? 10 : 8;
  const bool scale_lane = lane < 8;
  const unsigned char* const words_src =
      scale_lane ? reinterpret_cast<const unsigned char*>(scales) + 16 * lane
                 : reinterpret_cast<const unsigned char*>(zero_points) + 16 * (lane - 8);
  const int words_row_bytes =
      scale_lane ? static_cast<int>(p.n_pad) * static_cast<int>(sizeof(T))
                 : static_cast<int>(p.n_pad / 2);
  const int words_tile_bytes = scale_lane ? 64 * static_cast<int>(sizeof(T)) : 32;
  // The words of the step (ng_, ks_), j_ steps ahead of the current one
  // (`real`: the step exists); step_slot is its words slot where every step
  // is copied.
  auto fill_words = [&](int ng_, int ks_, bool real, int j_, int step_slot) {
    if constexpr (kGroupsPerStep > 1) {
      if (real) copy_step_words(ng_, ks_, step_slot);
    } else {
      const int gi = (ks_ * kStepUnits) >> p.log2_group_units;
      if (real && (ng_ != last_ng || gi != last_gi)) {
        last_slot = last_slot + 1 == kWordsSteps ? 0 : last_slot + 1;
        last_ng = ng_;
        last_gi = gi;
        if (lane < kWordChunks)
          cp_async_16(words_warp + last_slot * kGroupWordBytes + 16 * lane,
                      words_src + static_cast<int64_t>(gi) * words_row_bytes +
                          static_cast<int64_t>(tile_of(ng_)) * words_tile_bytes,
                      16);
      }
      words_slot_of |= uint32_t(last_slot) << (2 * j_);  // a free field: see the step's end
    }
  };

  // Stage A for this block's first two phases (all of its steps where they
  // fit), one commit group: staged step i, row
  // r < M, 16-byte chunk c (8 k) at a_base + i * a_step_bytes +
  // r * kARowBytes + 16 c (under the tile split's per-warp phases the warp's
  // own step j at own_slots + j mod 2P, below). Only the M real rows are staged (at M = 1 that is
  // 1/8 of a padded tile, which leaves shared memory to the code ring); the
  // ldmatrix lanes of rows >= M read a zero row instead. k >= K is zero-filled
  // by cp.async (src-size 0 reads nothing); K % 8 == 0, so a chunk is all in
  // or all out.
  const int rows = static_cast<int>(p.M);
  const int a_step_bytes = rows * kARowBytes;
  constexpr int kZeroRowOffset = kRingBytes + kStreamWarps * kWarpWordsBytes<kGroupsPerStep>;
  constexpr int kBarrierOffset = kZeroRowOffset + kZeroRowBytes;
  constexpr int kAOffset = kBarrierOffset + kBarrierBytes;
  const uint32_t zero_row = smem_base + kZeroRowOffset;
  const uint32_t a_base = smem_base + kAOffset;
  const T* __restrict__ a = static_cast<const T*>(p.a);
  // kWarpA: the tile split's warps stage and sum their own steps, in the 16-row
  // instances (JAX_MARLIN_STREAM_WARP_A; always where they stage in phases).
  constexpr bool kWarpA = kTileSplit && kMT == 2 && (JAX_MARLIN_STREAM_WARP_A || kPhases);
  const int own_first = s_begin - stage_begin;  // the warp's first step among the block's
  // Where the warp's steps are staged: at their places among the block's, or in
  // phases in the warp's own two slots.
  const int own_slots = kPhases && kTileSplit ? warp * 2 * p.a_phase_steps : own_first;
  const int staging_thread = kWarpA ? lane : static_cast<int>(threadIdx.x);
  constexpr int kStagingThreads = kWarpA ? 32 : kStreamThreads;
  // The barrier between A's (or its sums') writers and readers: those who share the
  // staged steps, the warp (kWarpA) or the block.
  auto staged_a_sync = [] {
    if constexpr (kWarpA)
      __syncwarp();
    else
      __syncthreads();
  };
  // Copies `count` of the block's steps from its step `first` to staged steps
  // `slot` .. slot + count - 1 (asynchronously; the caller commits). The 16-row
  // tile split walks its chunks in AStagingWalk's order (stream_plan.h): no
  // division a copy, 2-8% faster at M = 9-16 (session 42 calls A and D); the
  // other instances keep the divisions, where the walk read 1.2-1.6% slower (M = 1)
  // and 2.6% slower (stream-K at M = 16).
  auto stage_a = [&](int first, int count, int slot) {
    if constexpr (kMT == 1 || !kTileSplit) {
      const int chunks_per_step = rows * kAChunksPerRow;
      for (int c = staging_thread; c < count * chunks_per_step; c += kStagingThreads) {
        const int i = c / chunks_per_step;
        const int row = (c / kAChunksPerRow) % rows;
        const int chunk = c % kAChunksPerRow;
        const int ks_i = (stage_begin + first + i) % p.k_steps;
        const int64_t k = static_cast<int64_t>(ks_i) * kStepK + chunk * 8;
        const bool inside = k < p.K;
        cp_async_16(a_base + (slot + i) * a_step_bytes + row * kARowBytes + chunk * 16,
                    inside ? a + row * p.K + k : a, inside ? 16 : 0);
      }
      return;
    }
    const int total = count * rows * kAChunksPerRow;
    if (staging_thread >= total) return;
    AStagingWalk at(staging_thread, kStagingThreads, rows, stage_begin + first, p.k_steps);
    // Not unrolled: a copy is ~45 instructions either way, and the unrolled
    // copies lengthened the 16-row kernels' code by ~250-650 instructions
    // and their spills.
#pragma unroll 1
    for (int c = staging_thread; c < total; c += kStagingThreads, at.next()) {
      const int64_t k = static_cast<int64_t>(at.ks) * kStepK + at.chunk() * 8;
      const bool inside = k < p.K;
      cp_async_16(a_base + (slot + at.i) * a_step_bytes + at.row() * kARowBytes + at.chunk() * 16,
                  inside ? a + at.row() * p.K + k : a, inside ? 16 : 0);
    }
  };
  {
    for (int c = threadIdx.x; c < kZeroRowBytes / 16; c += kStreamThreads)
      *reinterpret_cast<uint4*>(smem + kZeroRowOffset + 16 * c) = make_uint4(0, 0, 0, 0);
    if constexpr (kWarpA) {
      // this warp's steps (phases 0 and 1 of them), at own_slots (a_step below)
      stage_a(own_first, kPhases ? min(n_steps, 2 * p.a_phase_steps) : n_steps, own_slots);
    } else {
      stage_a(0, a_slot_steps, 0);  // phases 0 and 1
    }
    cp_async_commit();
  }

  // The tile split with C > 1 blocks a tile (a cluster, sm_90) adds the C
  // blocks' totals in the block that stores each slice of the outputs; the
  // others push their totals of it there (st.async, the epilogue). The outputs
  // are cut into C slices of whole 4-output quads (stream_plan.h's
  // tile_quad_first), and a block's inbox holds C slots of the largest slice,
  // block c's total in slot c. It lies
  // past A and its sums for the plan's ceil(L / C) steps, or 8 warps x 2P in
  // phases (stream_plan.h):
  // the same offset in every block, clear of all a block uses before its
  // epilogue, since a peer may push while this block is still streaming.
  // Its barrier takes the code ring's barrier slots, which the tile split
  // (cp.async ring) does not use; it expects the C - 1 peers' bytes, and its
  // one arrival is made here. The relaxed cluster arrive pairs with the wait
  // before the first push: no block pushes before its peers' barriers are
  // initialized.
  const int sums_step_bytes = kPrescale ? 0 : kGroupsPerStep * rows * kSumsBytes;
  const int a_held_steps = kPhases && kTileSplit ? a_slot_steps : p.a_phase_steps;
  const uint32_t inbox =
      (a_base + a_held_steps * (a_step_bytes + sums_step_bytes) + 15) & ~uint32_t{15};
  const uint32_t inbox_bar = smem_base + kBarrierOffset;
  // At M = 1 the inbox is set up after the code ring's first copies, so that
  // the weight requests leave earlier (nothing before the epilogue's cluster
  // wait needs it): session 20 call B, 4096 x 4096 5.77 -> 5.70 us and
  // 14336 x 4096 11.34 -> 11.03; at M = 8 and 16 it lost 0.04 and 0.15, so
  // there it stays first.
  const bool late_inbox = kTileSplit && rows == 1;
#if __CUDA_ARCH__ >= 900
  auto init_tile_inbox = [&] {
    if (kTileSplit && p.tile_split > 1) {
      if (threadIdx.x == 0) {
        mbarrier_init(inbox_bar, 1);
        const int rank = blockIdx.x % p.tile_split;
        const int quads = tile_quad_first(rank + 1, rows * 16, p.tile_split) -
                          tile_quad_first(rank, rows * 16, p.tile_split);
        mbarrier_arrive_expect_tx(inbox_bar, 16 * (p.tile_split - 1) * quads);
        fence_mbarrier_init();
      }
      asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
    }
  };
  if (!late_inbox) init_tile_inbox();
#else
  (void)inbox, (void)inbox_bar, (void)late_inbox;  // sm_80: clusters of one block, no pushes
#endif
  // The group cluster (stream_plan.h, C = -p.tile_split): the same push
  // into the same inbox past A (the planner gives A ceil(L / C) steps), with
  // its barrier past the C slots (the bulk ring keeps its barriers). A
  // block's outputs are its group's M x 512; block c's part of slice r lands
  // in r's slot c. (The barrier's address is recomputed in the epilogue:
  // held across the loop, it took a register from it.)
  auto group_inbox_bar = [&] {
    return inbox + 16 * -p.tile_split * tile_quad_slot(rows * (kGroupColumns / 4), -p.tile_split);
  };
#if __CUDA_ARCH__ >= 900
  if constexpr (kGroupCluster) {
    if (threadIdx.x == 0) {
      mbarrier_init(group_inbox_bar(), 1);
      const int C = -p.tile_split, rank = blockIdx.x % C;
      const int group_quads = rows * (kGroupColumns / 4);
      const int quads = tile_quad_first(rank + 1, group_quads, C) -
                        tile_quad_first(rank, group_quads, C);
      mbarrier_arrive_expect_tx(group_inbox_bar(), 16 * (C - 1) * quads);
      fence_mbarrier_init();
    }
    asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
  }
#endif

  // The code ring. sm_80: cp.async, 16 bytes a lane, one commit group per
  // unit (empty groups where a unit does not exist, so that the unit consumed
  // next is always exactly kRingUnits - 1 groups back); the group words ride
  // in the commit group of a step's first unit. sm_90 (kBulkRing): one bulk
  // copy per run of kBulkRunUnits units (2 KB), issued by lane 0 and waited
  // for once through the run's barrier. Per step that replaces 8 LDGSTS, the
  // 24 predicated-off LDS ptxas puts before them (its guard against the WAR
  // on the slot), 8 commits and 8 waits with 2 copies and 2 waits (SASS,
  // session 5). A run past k copies only its units that exist: the stale
  // bytes after them decode to finite weights that meet zero activations. The
  // group words keep cp.async, one commit group per step. Measured (session
  // 5, call 4), the bulk ring took the stream-K GEMVs 4-5% faster (8192 x
  // 28672 at M = 1: 45.6 -> 43.8 us) and the tile split's 1 us slower (4096
  // x 4096: 7.7 -> 8.8 us; its warps have 2-4 steps each, and a run waits for
  // 2 KB where a unit waited for 512 bytes), so the tile split keeps
  // cp.async. Step i lives in ring slot i % kRingSteps.
  // (Measured on the H200 only; newer parts take it too, from the sm_90 code.)
#if __CUDA_ARCH__ >= 900
  constexpr bool kBulkRing = !kTileSplit;
#else
  constexpr bool kBulkRing = false;
#endif
  const uint32_t ring_warp = smem_base + warp * (kRingUnits * kUnitBytes);
  const uint32_t ring_lane = ring_warp + lane * 16;
  const uint32_t run_barriers = smem_base + kBarrierOffset + warp * (kBulkRuns * 8);
  const uint64_t code_policy = kBulkRing ? evict_first_policy() : 0;
  // Lane 0: half `half` of ring slot `slot` (run 2 slot + half, units 4 half
  // ..) gets those units of the step whose codes start at `step_codes` and
  // which has `units` units, the ones that exist.
  auto fill_run = [&](int slot, int half, const uint4* step_codes, int units) {
    const int run = slot * (kStepUnits / kBulkRunUnits) + half;
    const int first = half * kBulkRunUnits;
    const int n = min(max(units - first, 0), kBulkRunUnits);
    const uint32_t bar = run_barriers + 8 * run;
    mbarrier_arrive_expect_tx(bar, n * kUnitBytes);
    if (n > 0)
      bulk_copy_to_shared(ring_warp + run * (kBulkRunUnits * kUnitBytes),
                          step_codes + first * (kUnitWords / 4), n * kUnitBytes, bar, code_policy);
  };
  if constexpr (kBulkRing) {
    if (lane == 0) {
      for (int r = 0; r < kBulkRuns; ++r) mbarrier_init(run_barriers + 8 * r, 1);
      fence_mbarrier_init();
    }
    __syncwarp();
  }
  auto advance = [&](int& ng_, int& ks_) {
    if (++ks_ == p.k_steps) {
      ks_ = 0;
      ++ng_;
    }
  };
  int valid = n_steps > 0 ? units_in(ng, ks) : 0;
  int ng1 = ng, ks1 = ks;  // step i + 1
  advance(ng1, ks1);
  int valid1 = n_steps > 1 ? units_in(ng1, ks1) : 0;
  int ng_fill = ng, ks_fill = ks;  // step i + kRingSteps, loading into step i's slot
  {
#pragma unroll
    for (int r = 0; r < kRingSteps; ++r) {
      const int valid_r = r < n_steps ? units_in(ng_fill, ks_fill) : 0;
      const uint4* src = codes_at(ng_fill, ks_fill);
      if constexpr (kBulkRing) {
        if (lane == 0) {
#pragma unroll
          for (int h = 0; h < kStepUnits / kBulkRunUnits; ++h)
            fill_run(r, h, src, valid_r);
        }
        fill_words(ng_fill, ks_fill, valid_r > 0, r, r);
        cp_async_commit();
      } else {
#pragma unroll
        for (int u = 0; u < kStepUnits; ++u) {
          if (!kSkipEmptyRefill || valid_r > 0)
            cp_async_stream_16(ring_lane + (r * kStepUnits + u) * kUnitBytes,
                               src + lane + u * (kUnitWords / 4), u < valid_r ? 16 : 0);
          if (u == 0) fill_words(ng_fill, ks_fill, valid_r > 0, r, r);
          cp_async_commit();
        }
      }
      advance(ng_fill, ks_fill);
    }
  }
#if __CUDA_ARCH__ >= 900
  if (late_inbox) init_tile_inbox();
#endif

  // ldmatrix.x4 lane addresses. kMT = 1: matrices {unit u k0-7, unit u k8-15,
  // unit u+1 k0-7, unit u+1 k8-15} of rows 0-7, i.e. the B fragments of two
  // units. kMT = 2: {rows 0-7 k0-7, rows 0-7 k8-15, rows 8-15 k0-7, rows 8-15
  // k8-15} of one unit, i.e. the B fragments of both n8 tiles.
  // Lanes of rows >= M point at the zero row, which does not move by step.
  const int mat = lane >> 3;
  const int a_row = kMT == 1 ? (lane & 7) : (lane & 7) + 8 * (mat >> 1);
  const uint32_t a_col = (kMT == 1 ? (mat >> 1) * 32 : 0) + (mat & 1) * 16;
  // kGroupRows: ldmatrix row r feeds accumulator row r, which is row r / G of
  // A in the step's group r % G; each unit keeps only the lanes of its group
  // (`keep` in the unit loop), so the other groups' columns get zeros.
  const int a_real_row = a_row / kRowGroups;
  const uint32_t a_lane =
      a_real_row < rows ? a_base + a_real_row * kARowBytes + a_col : zero_row + a_col;
  const uint32_t a_lane_step = a_real_row < rows ? a_step_bytes : 0;

  float acc[4][kMT][4] = {};

  // kGroupRows: calls f(m, total) with row m's totals over its G accumulator
  // rows (total[j][c]: column 16 j + g + 8 c) on the lanes that hold them, for
  // m < M. The lane holds accumulator rows 2 t and 2 t + 1 of row 2 t / G; with
  // G = 4 the lane t ^ 1 holds the row's other two, so every lane of the warp
  // must call it (a shuffle); the sums are added in a fixed order.
  auto with_group_row_totals = [&](auto&& f) {
    float total[4][2];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        total[j][c] = acc[j][0][2 * c] + acc[j][0][2 * c + 1];
        if constexpr (kRowGroups == 4) total[j][c] += __shfl_xor_sync(0xffffffffu, total[j][c], 1);
      }
    const int t = lane & 3;
    const int m = 2 * t / kRowGroups;
    if (2 * t % kRowGroups == 0 && m < rows) f(m, total);
  };

  // How many blocks share column group ng_, and this block's place among them.
  auto group_parts = [&](int ng_, int* slot) {
    const int64_t s0 = static_cast<int64_t>(ng_) * p.k_steps;
    const int first = owner_block(s0, p.total_steps, p.blocks);
    *slot = blockIdx.x - first;
    return owner_block(s0 + p.k_steps - 1, p.total_steps, p.blocks) - first + 1;
  };

  T* out = static_cast<T*>(p.out);
  const T* bias = static_cast<const T*>(p.bias);
  // Calls f(acc element, its row m, its column within the warp's 64) for
  // every accumulator of the lane: C fragment element e of tile (j, mt) is
  // column 16 j + g + 8 (e >> 1), row 2 t + (e & 1) + 8 mt.
  auto for_each_output = [&](auto&& f) {
    const int t = lane & 3;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          f(acc[j][mt][e], 2 * t + (e & 1) + 8 * mt, 16 * j + g + 8 * (e >> 1));
  };

  // Writes this warp's 64 columns of column group ng_: straight to out when
  // the group lies in one block, else as fp32 partial `slot` for the reduce.
  // A lane's outputs are kMT x 2 rows (2 t + h + 8 mt) by 8 columns (16 j + 8
  // c + g): one row address each, the columns as immediate offsets from it,
  // and the bias read once per column. (Indexed per output, with 64-bit
  // products, the flush of the 16-row kernel was ~1,000 instructions a warp,
  // run once or twice per block: ~15% of a block's instructions at M = 16;
  // SASS, session 5.)
  // Calls f(v, mt, h) for each of the lane's accumulator rows v = 2 t + h + 8
  // mt that hold a row of A (v / G < M with kGroupRows, else v < M).
  auto for_each_lane_row = [&](auto&& f) {
    const int t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int v = 2 * t + h + 8 * mt;
        if (v / kRowGroups < rows) f(v, mt, h);
      }
  };
  auto flush = [&](int ng_, int parts, int slot) {
    const int64_t n0 = static_cast<int64_t>(tile_of(ng_)) * 64 + g;
    if constexpr (kGroupRows) {
      with_group_row_totals([&](int m, const float (&total)[4][2]) {
        if (parts != 1) {
          float* const row = p.workspace + slot * p.M * p.n_pad + m * p.n_pad + n0;
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 2; ++c) row[16 * j + 8 * c] = total[j][c];
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              const int64_t n = n0 + 16 * j + 8 * c;
              if (n < p.N) store_with_bias(out, bias, m, n, p.N, total[j][c]);
            }
        }
      });
    } else if (parts != 1) {
      float* const part_base = p.workspace + slot * p.M * p.n_pad + n0;
      for_each_lane_row([&](int m, int mt, int h) {
        float* const row = part_base + m * p.n_pad;
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) row[16 * j + 8 * c] = acc[j][mt][2 * c + h];
      });
    } else {
      float column_bias[4][2];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int64_t n = n0 + 16 * j + 8 * c;
          column_bias[j][c] = bias != nullptr && n < p.N ? to_float<T>(bias[n]) : 0.f;
        }
      for_each_lane_row([&](int m, int mt, int h) {
        T* const row = out + m * p.N + n0;
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c)
            if (n0 + 16 * j + 8 * c < p.N)
              row[16 * j + 8 * c] = from_float<T>(acc[j][mt][2 * c + h] + column_bias[j][c]);
      });
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][mt][e] = 0.f;
  };

  // The tensor cores take (magic + c), exact, for every weight, and the
  // offsets, the zero point and the scale are applied once per group in fp32:
  //   sum_k a (c - zp) s = s (sum_k a (magic_k + c) - X - zp S),
  //   X = sum_k magic_k a,  S = sum_k a,
  // with X and S per row and group computed once per block (kWarpA: by the warp
  // that uses them) from the staged A. magic_k is 128 for bf16; for fp16 1024 at
  // k = 0..7 and 64 at k = 8..15 of every 16 (magic_codes_word). The loop is then
  // 4 LOP3 + 3 SHF (bf16) or 4 LOP3 + 1 SHF (fp16) + HMMAs per code word, no half2
  // arithmetic; the price is the cancellation of X in fp32.
  constexpr bool kOneMagic = kMagicLowK<T> == kMagicHighK<T>;
  float part[4][kMT][4];  // sums of a (magic_k + c) since the last fold
  float a_sum[kMT][2];    // the same span's S, rows 2t + h + 8 mt
  float a_magic[kMT][2];  // and its X (unused where kOneMagic: X = magic S)
  auto clear_group = [&]() {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) a_sum[mt][h] = a_magic[mt][h] = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[j][mt][e] = 0.f;
    }
  };
  // Sums of A per (step, group slot, row), X then S, computed once per block
  // (kWarpA: per warp) below. The lane's accumulator rows are 2 t + h + 8 mt:
  // rows of A, or with kGroupRows row (2 t + h) / G in the step's group
  // (2 t + h) % G (the slot argument is then unused: each row half has its own).
  // step_sums: the
  // staged step's, sums_base + its index x sums_step_bytes. Every fold takes
  // the sums of exactly one group slot, read just before it, so they are
  // set, not added to the cleared 0: adding to +0 changes nothing but a -0,
  // and compute_sums stores none (4 FADD a step in the GEMV's SASS). The
  // rows past M, which this skips, keep the cleared 0.
  const uint32_t sums_base = a_base + a_slot_steps * a_step_bytes;
  auto add_sums = [&](uint32_t step_sums, int slot) {
    for_each_lane_row([&](int v, int mt, int h) {
      const int m = v / kRowGroups;
      const int s = kGroupRows ? v % kRowGroups : slot;
      const uint2 sums = lds_64(step_sums + (s * rows + m) * kSumsBytes);
      a_sum[mt][h] = __uint_as_float(sums.y);
      if constexpr (!kOneMagic) a_magic[mt][h] = __uint_as_float(sums.x);
    });
  };
  clear_group();
  // C element e of tile (j, mt): column r = 2 j + (e >> 1), row 2 t + (e & 1)
  // + 8 mt. A group's scales and zero points are read from its words slot only
  // here; the warp-wide syncs around the reads order them after the other
  // lanes' copies into the slot (in the commit group of the step's first unit,
  // or of its start on the bulk ring, or an earlier step's: waited for by
  // now) and before the copy that refills it. The fold runs at least once per step (128 of k),
  // so the cancellation of X is over at most 128 products
  // whatever the group size (folding only at a group's end measured, in a
  // numeric model, 1.9e-3 relative error per-channel at K = 8192).
  // A group's words for the lane: its 8 scales and zero points (r: column
  // 16 (r >> 1) + g + 8 (r & 1)), decoded one at a time by group_constant.
  // kZeroBytes: the zero points (nibble r of the word) are spread into
  // bytes, even nibbles in zeros[0] and odd ones in zeros[1], so that each
  // converts in one instruction (byte_to_float): 3 + 8 instructions a fold
  // where the nibble-by-nibble shift, mask and convert took 23 (SASS, the
  // GEMV's step loop: 485 -> 476 a step). Not in the 16-row kernels, which
  // sit at the 128-register cap: there ptxas hoists the eight conversions and
  // some spill more (sm_80 bf16 tile split, groups of 64: 12 -> 80 bytes).
  constexpr bool kZeroBytes = kZP == ZeroPointKind::kPacked4 && kMT == 1;
  auto load_group_words = [&](uint32_t group_words, uint32_t (&w)[4], uint32_t (&zeros)[2]) {
    const uint4 group_scales = lds_128(group_words + 16 * g);
    const uint32_t packed = kZP == ZeroPointKind::kPacked4 ? lds_32(group_words + 128 + 4 * g) : 0u;
    zeros[0] = kZeroBytes ? packed & 0x0F0F0F0Fu : packed;
    zeros[1] = (packed >> 4) & 0x0F0F0F0Fu;
    w[0] = group_scales.x, w[1] = group_scales.y, w[2] = group_scales.z, w[3] = group_scales.w;
  };
  // Column r's scale, and the offset the fold takes per unit of S.
  auto group_constant = [&](const uint32_t (&w)[4], const uint32_t (&zeros)[2], int r,
                            float& scale, float& offset) {
    const uint16_t bits = static_cast<uint16_t>(w[r >> 1] >> (16 * (r & 1)));
    scale = kBF16 ? __uint_as_float(static_cast<uint32_t>(bits) << 16)
                  : __half2float(__ushort_as_half(bits));
    const float zp = kZeroBytes ? byte_to_float(zeros[r & 1], r >> 1)  // exact
                     : kZP == ZeroPointKind::kPacked4
                         ? static_cast<float>((zeros[0] >> (4 * r)) & 0xFu)
                         : 8.f;
    offset = kOneMagic ? kMagicLowK<T> + zp : zp;
  };
  // Element e of tile (j, mt): acc += scale (part - X - offset S).
  auto fold_element = [&](int j, int mt, int e, float scale, float offset) {
    const float centered =
        kOneMagic ? fmaf(-offset, a_sum[mt][e & 1], part[j][mt][e])
                  : fmaf(-offset, a_sum[mt][e & 1], part[j][mt][e] - a_magic[mt][e & 1]);
    acc[j][mt][e] = fmaf(centered, scale, acc[j][mt][e]);
  };
  auto fold_group = [&](int words_slot, int slot) {
    __syncwarp();
    uint32_t w[4], zeros[2];
    load_group_words(words_warp + (words_slot * kGroupsPerStep + slot) * kGroupWordBytes, w, zeros);
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      float scale, offset;
      group_constant(w, zeros, r, scale, offset);
      const int j = r >> 1, h = r & 1;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) fold_element(j, mt, e, scale, offset);
    }
    clear_group();
    __syncwarp();
  };
  // kGroupRows: the step's one fold. The lane's accumulator row 2 t + h is
  // row (2 t + h) / G of A in the step's group (2 t + h) % G, so each row half
  // reads its own group's words (those fold_group reads for that group).
  auto fold_group_rows = [&](int words_slot) {
    const uint32_t words = words_warp + words_slot * kGroupsPerStep * kGroupWordBytes;
    const int t = lane & 3;
    __syncwarp();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t w[4], zeros[2];
      load_group_words(words + ((2 * t + h) % kGroupsPerStep) * kGroupWordBytes, w, zeros);
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        float scale, offset;
        group_constant(w, zeros, r, scale, offset);
        fold_element(r >> 1, 0, 2 * (r & 1) + h, scale, offset);
      }
    }
    clear_group();
    __syncwarp();
  };

  // A is the oldest group: once at most the ring's later groups are pending,
  // this thread's A chunks have landed; the barrier makes everyone's visible
  // (kWarpA: the warp's own, to the warp; the block barrier before the wait, which
  // waits for no copy, publishes the zero row that every warp's rows >= M read, after
  // every warp's weight requests have gone out).
  if constexpr (kWarpA) __syncthreads();
  if constexpr (kBulkRing)
    cp_async_wait<kRingSteps>();  // A, then one words group per step
  else
    cp_async_wait<kRingUnits>();
  staged_a_sync();
  timeline_mark(kMarkAStaged);
  // Each group's sums of activations per row (X and S above), in fp32, once
  // per block and phase (the block's warps share its staged k-steps; kWarpA: each
  // warp its own steps, a lane per item): a thread per
  // (step, group, row), reading its kSlotK elements 16 bytes at a time, k =
  // 0..7 and 8..15 of every 16 (the even and the odd chunks) in two chains of
  // adds of four pair sums each. One element at a time, 128 dependent adds
  // stalled the block ~1 us before its first step, and a shuffle tree over 16
  // lanes per sum measured slower where a block has many sums (4096 x 6144 at
  // M = 16: 512; session 4, call 2). The order is fixed: the same sums every
  // run.
  // The sums of staged steps `slot` .. slot + count - 1 (a phase; a block
  // with one phase: all of its steps).
  auto compute_sums = [&](int slot, int count) {
    constexpr int kSlotK = kStepK / kGroupsPerStep;
    const int n_items = count * kGroupsPerStep * rows;
    for (int item = staging_thread; item < n_items; item += kStagingThreads) {
      const int row = item % rows;
      const int group_slot = (item / rows) % kGroupsPerStep;
      const int i = item / (rows * kGroupsPerStep);
      const unsigned char* src = smem + kAOffset + (slot + i) * a_step_bytes + row * kARowBytes +
                                 2 * group_slot * kSlotK;
      float low_k = 0.f, high_k = 0.f;
#pragma unroll
      for (int c = 0; c < kSlotK / 8; ++c) {
        const uint4 v = *reinterpret_cast<const uint4*>(src + 16 * c);
        const float chunk = (pair_sum<T>(v.x) + pair_sum<T>(v.y)) +
                            (pair_sum<T>(v.z) + pair_sum<T>(v.w));
        if (c % 2 == 0)
          low_k += chunk;
        else
          high_k += chunk;
      }
      float* sums = reinterpret_cast<float*>(smem + kAOffset + a_slot_steps * a_step_bytes +
                                             kSumsBytes * (slot * kGroupsPerStep * rows + item));
      // Neither is ever -0 (add_sums sets them where it once added them to
      // +0, which would turn a -0 into +0): low_k and high_k start at +0, and
      // a sum is -0 only where both addends are (round to nearest), an fma
      // only where its product is -0 and so is its addend. (Without FTZ, as
      // built: flushed, a negative denormal result would become -0.)
      sums[0] = fmaf(kMagicLowK<T>, low_k, kMagicHighK<T> * high_k);  // X
      sums[1] = low_k + high_k;                                        // S
    }
  };
  if constexpr (!kPrescale) {  // (kPrescale folds nothing)
    if constexpr (kWarpA)
      compute_sums(own_slots, kPhases ? min(p.a_phase_steps, n_steps) : n_steps);
    else
      compute_sums(0, kPhases ? min(p.a_phase_steps, n_stage) : n_stage);
    staged_a_sync();
  }
  timeline_mark(kMarkSums);

  int words_i = 0;  // i mod kWordsSteps
  // One step: i of the warp's steps, its A and sums staged at some index x
  // (under kTileSplit the warps are at different steps; the block's k is staged
  // by the block or, kWarpA, each warp its own steps, all at once or in phases):
  // a_step = a_lane + x a_lane_step, step_sums = sums_base + x sums_step_bytes. The loops below
  // advance both by a step's bytes instead of taking the products each step (6
  // instructions a step more in the GEMV's SASS, where ptxas also rebuilt a_lane
  // from threadIdx each step).
  auto run_step = [&](int i, uint32_t a_step, uint32_t step_sums) {
    // Step i's ring slot, and the parity of the phase its runs complete: a
    // run's barrier completes one phase per fill, the prologue's and then one
    // in each earlier step of the slot, since every step before one with
    // units had units too (see the idle warp below), and a step with units
    // refills its slot. (A bit mask of the runs' parities, flipped at each
    // wait, and a slot counter cost 4 instructions a step more in the GEMV's
    // SASS.)
    const int ring_slot = static_cast<unsigned>(i) % kRingSteps;
    const uint32_t ring_parity = (static_cast<unsigned>(i) / kRingSteps) & 1u;
    const int valid_fill = i + kRingSteps < n_steps ? units_in(ng_fill, ks_fill) : 0;
    // Step i + kRingSteps's codes: the step's start for the bulk ring's lane
    // 0, this lane's 16 bytes of its first unit for cp.async. Opaque to the
    // compiler from here on: it would otherwise recompute the address from
    // scratch for every unit's copy (~20 instructions each).
    const uint4* src_fill = codes_at(ng_fill, ks_fill) + (kBulkRing ? 0 : lane);
    asm volatile("" : "+l"(src_fill));
    const uint32_t ring_step = ring_lane + ring_slot * (kStepUnits * kUnitBytes);
    // This step's words slot, read before the refill of its ring slot
    // (step i + kRingSteps) records its own.
    const int step_words =
        kGroupsPerStep > 1 ? words_i : static_cast<int>(words_slot_of & 3u);
    const bool segment_ends = i + 1 == n_steps || ng1 != ng;
    uint32_t b_pair[4];  // kMT = 1: the B fragments of units u and u + 1 (u even)
    GroupConstants gc;   // kPrescale: the current group's

    if constexpr (kBulkRing) {
      // This step's words were committed kRingSteps steps ago: all but the
      // newest group have landed. Then the words of step i + kRingSteps.
      cp_async_wait<kRingSteps - 1>();
      fill_words(ng_fill, ks_fill, valid_fill > 0, kRingSteps,
                 words_i == 0 ? kWordsSteps - 1 : words_i - 1);  // (i + kRingSteps) mod kWordsSteps
      cp_async_commit();
    }
    if (valid > 0) {
#pragma unroll
      for (int u = 0; u < kStepUnits; ++u) {
        // sm_90: the run's barrier, once per run. sm_80: this unit's group is
        // kRingUnits - 1 commits back; each lane reads back only the 16 bytes
        // it copied itself, so no barrier is needed. Units past k_pad (the
        // last step of a column) were zero-filled (cp.async) or hold stale
        // codes (bulk ring) and meet zero activations, so they are computed like any
        // other: no branch per unit.
        if constexpr (kBulkRing) {
          if (u % kBulkRunUnits == 0) {
            const int run = ring_slot * (kStepUnits / kBulkRunUnits) + u / kBulkRunUnits;
            mbarrier_wait(run_barriers + 8 * run, ring_parity);
          }
        } else {
          cp_async_wait<kRingUnits - 1>();
        }
        const uint4 q = lds_128(ring_step + u * kUnitBytes);
        uint32_t b[kMT][2];
        if constexpr (kMT == 1) {
          if (u % 2 == 0) ldmatrix_x4(b_pair, a_step + u * 32);
          b[0][0] = b_pair[2 * (u % 2)];
          b[0][1] = b_pair[2 * (u % 2) + 1];
          if constexpr (kGroupRows) {
            // The unit's group owns the accumulator rows g with g % G equal to
            // its slot; the lane's B values (column g) are zero elsewhere.
            const uint32_t keep = g % kRowGroups == u / kGroupUnits ? ~0u : 0u;
            b[0][0] &= keep;
            b[0][1] &= keep;
          }
        } else {
          uint32_t frag[4];
          ldmatrix_x4(frag, a_step + u * 32);
          b[0][0] = frag[0];
          b[0][1] = frag[1];
          b[1][0] = frag[2];
          b[1][1] = frag[3];
        }
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
        if constexpr (kPrescale) {
          if (u % kGroupUnits == 0) {
            // The group's words, read between warp-wide syncs as fold_group
            // reads them (after every lane's copy into the slot has landed,
            // before the copy that refills it).
            const uint32_t group_words =
                words_warp + (step_words * kGroupsPerStep + u / kGroupUnits) * kGroupWordBytes;
            __syncwarp();
            load_group_constants<T, kZP>(gc, group_words + 16 * g, group_words + 128 + 4 * g);
            __syncwarp();
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t h0[2], h1[2];
          if constexpr (kPrescale)
            dequant_word<T, kZP>(words[j], gc, j, h0, h1);
          else
            magic_codes_word<T>(words[j], h0, h1);
          // A fragment: {row g k 2t.., row g+8 k 2t.., row g k 2t+8.., row g+8 k 2t+8..}
          // = {column (j,0) low k, column (j,1) low k, (j,0) high k, (j,1) high k}.
          const uint32_t frag_a[4] = {h0[0], h1[0], h0[1], h1[1]};
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            mma_16x8x16<kBF16>(kPrescale ? acc[j][mt] : part[j][mt], frag_a, b[mt][0], b[mt][1]);
        }
        if (kGroupUnits < kStepUnits && !kGroupRows && !kPrescale &&
            (u + 1) % kGroupUnits == 0) {
          const int slot = u / kGroupUnits;
          add_sums(step_sums, slot);
          fold_group(step_words, slot);
        }
        if constexpr (kBulkRing) {
          // A run consumed: every lane's reads of it are done (the warp-wide
          // sync orders them) before lane 0 refills it with the same run of
          // step i + kRingSteps.
          if (u % kBulkRunUnits == kBulkRunUnits - 1) {
            __syncwarp();
            if (lane == 0)
              fill_run(ring_slot, u / kBulkRunUnits, src_fill, valid_fill);
          }
        } else {
          // Refill the slot with unit u of step i + kRingSteps (zero-filled
          // where that unit does not exist). The empty asm consumes the words
          // read from the slot, so the LDS has returned before the copy that
          // overwrites the slot can issue (volatile asm keeps this order).
          asm volatile("" ::"r"(q.x), "r"(q.y), "r"(q.z), "r"(q.w));
          if (!kSkipEmptyRefill || valid_fill > 0)
            cp_async_stream_16(ring_step + u * kUnitBytes, src_fill + u * (kUnitWords / 4),
                               u < valid_fill ? 16 : 0);
          if (u == 0)
            fill_words(ng_fill, ks_fill, valid_fill > 0, kRingSteps,
                       words_i == 0 ? kWordsSteps - 1 : words_i - 1);  // (i + kRingSteps) mod kWordsSteps
        }
        if ((kGroupUnits >= kStepUnits || kGroupRows) && u == kStepUnits - 1) {  // the step's one fold
          add_sums(step_sums, 0);
          if constexpr (kGroupRows)
            fold_group_rows(step_words);
          else
            fold_group(step_words, 0);
        }
        if constexpr (!kBulkRing) cp_async_commit();
      }
    } else if constexpr (!kBulkRing) {
      // An idle warp (past the last column tile) keeps its commit count. (The
      // bulk ring has nothing to keep, because once a warp's step is past the
      // last tile so are all its later ones: tile_of grows with the column
      // group, and every k-step of a tile has a unit. Their runs were 0-byte
      // arrivals that no one waits for, and every run that carried bytes was
      // waited for in its own step, so no bulk copy is in flight when the
      // block ends. A grid where an idle step could precede a real one would
      // have to wait and refill on idle steps too.)
#pragma unroll
      for (int u = 0; u < kStepUnits; ++u) cp_async_commit();
    }
    // (The group cluster's one segment is added up after the loop.)
    if (!kTileSplit && !kGroupCluster && segment_ends && valid > 0) {
      int slot = 0;
      const int parts = group_parts(ng, &slot);
      flush(ng, parts, slot);
    }
    ng = ng1;
    ks = ks1;
    valid = valid1;
    if constexpr (kRingSteps == 2) {
      // Step i + 2 is the one this step refilled for: its place and units are
      // known (valid_fill has valid1's condition, i + 2 < n_steps). Advancing
      // a third copy cost 11 instructions a step in the GEMV's SASS.
      ng1 = ng_fill;
      ks1 = ks_fill;
      valid1 = valid_fill;
    } else {
      advance(ng1, ks1);
      valid1 = i + 2 < n_steps ? units_in(ng1, ks1) : 0;
    }
    advance(ng_fill, ks_fill);
    words_i = words_i + 1 == kWordsSteps ? 0 : words_i + 1;
    words_slot_of >>= 2;  // (on every step: an idle one's fields are never read)
  };
  if constexpr (kPhases) {
    // Phases of P steps, staged in the slot at 0 or P in turn (stream_plan.h).
    // The phase work runs between the phases' loops, so a phase's loop is the
    // unphased kernel's step loop. In stream-K the block's warps share its
    // steps (n_steps = n_stage, own_first = own_slots = 0) and are at the same
    // step at a phase's start; under the tile split each warp runs its own
    // phases over its own steps and slots, so its syncs are warp-wide (kWarpA):
    // - each thread waits for its own copies of this phase's A: at least
    //   kRingSteps + 1 steps of commit groups came after them in stream-K (one a
    //   step on the bulk ring, kStepUnits on the cp.async ring, an idle warp's
    //   empty ones included; the ring's own waits run only in warps with a
    //   unit), P >= kRingSteps steps of kStepUnits under the tile split, whose
    //   cp.async wait leaves only the newest kRingUnits groups in flight;
    // - after the barrier (the warp's sync) they are visible to all that read
    //   them, and none reads the other slot any more: the next phase's copy
    //   goes there;
    // - this phase's sums, and a barrier before any of them is read.
    const int phase = p.a_phase_steps;
    for (int first = 0, a_slot = 0; first < n_steps; first += phase, a_slot = phase - a_slot) {
      if (first > 0) {
        if constexpr (kBulkRing)
          cp_async_wait<kRingSteps>();
        else
          cp_async_wait<kRingUnits>();
        staged_a_sync();
        if (first + phase < n_steps) {
          stage_a(own_first + first + phase, min(phase, n_steps - first - phase),
                  own_slots + phase - a_slot);
          cp_async_commit();
        }
        if constexpr (!kPrescale) {
          compute_sums(own_slots + a_slot, min(phase, n_steps - first));
          staged_a_sync();
        }
      }
      const int end = min(first + phase, n_steps);
      uint32_t a_step = a_lane + (own_slots + a_slot) * a_lane_step;
      uint32_t step_sums = sums_base + (own_slots + a_slot) * sums_step_bytes;
      for (int i = first; i < end; ++i, a_step += a_lane_step, step_sums += sums_step_bytes) {
        run_step(i, a_step, step_sums);
        if (i == 0) timeline_mark(kMarkFirstStep);
        timeline_step(i);
      }
    }
  } else {
    uint32_t a_step = a_lane + (s_begin - stage_begin) * a_lane_step;
    uint32_t step_sums = sums_base + (s_begin - stage_begin) * sums_step_bytes;
    for (int i = 0; i < n_steps; ++i, a_step += a_lane_step, step_sums += sums_step_bytes) {
      run_step(i, a_step, step_sums);
      if (i == 0) timeline_mark(kMarkFirstStep);
      timeline_step(i);
    }
  }
  // The last steps' refills were zero-fills of nothing; let them land before
  // the block's shared memory is handed to the next block (or, under
  // kTileSplit, before this warp's ring takes its sums).
  cp_async_wait<0>();
  timeline_mark(kMarkLoopEnd);
  // The tile split's and the group cluster's epilogues: this warp's 64 x M
  // sums go to its own ring (private: no block barrier before the writes;
  // drained, since the loop waited for every copy), as [m][column]. A lane's
  // sums land on other lanes' ring slots: the warp-wide sync orders every
  // lane's last copy (waited for above) before any lane's store.
  auto sums_to_own_ring = [&] {
    __syncwarp();
    float* sums = reinterpret_cast<float*>(smem + warp * (kRingUnits * kUnitBytes));
    if constexpr (kGroupRows) {
      with_group_row_totals([&](int m, const float (&total)[4][2]) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) sums[m * 64 + 16 * j + g + 8 * c] = total[j][c];
      });
    } else {
      for_each_output([&](float& v, int m, int column) {
        if (m < rows) sums[m * 64 + column] = v;
      });
    }
    return sums;
  };
#if __CUDA_ARCH__ >= 900
  // The cluster epilogues' two halves (the tile split's and the group
  // cluster's). A quad of outputs for `owner`'s inbox `slot`: a store where
  // this block owns it, else one st.async of 16 bytes counted on the owner's
  // barrier. And the C totals an owner received for output `offset` of its
  // slice, added in rank order (the same sums every run).
  auto deliver_quad = [&](uint32_t slot, int owner, int rank, float4 v, uint32_t barrier) {
    if (owner == rank)
      *reinterpret_cast<float4*>(smem + (slot - smem_base)) = v;
    else
      st_async_16(peer_shared_address(slot, owner), v, peer_shared_address(barrier, owner));
  };
  auto received_total = [&](const float* received, int slot_floats, int offset, int C) {
    float v = 0.f;
#pragma unroll
    for (int c = 0; c < kTileSplitMaxCluster; ++c)
      if (c < C) v += received[c * slot_floats + offset];
    return v;
  };
#endif
  if constexpr (kTileSplit) {
    // Every output then adds the eight warps' values in warp order, so the
    // sum is the same every run.
    sums_to_own_ring();
    __syncthreads();
    const int tile = blockIdx.x / p.tile_split;
    auto warp_total = [&](int idx) {
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < kStreamWarps; ++w)
        v += reinterpret_cast<const float*>(smem + w * (kRingUnits * kUnitBytes))[idx];
      return v;
    };
    auto store = [&](int idx, float v) {
      const int64_t n = static_cast<int64_t>(tile) * 64 + idx % 64;
      if (n < p.N) store_with_bias(out, bias, idx / 64, n, p.N, v);
    };
    if (p.tile_split == 1) {
      for (int idx = threadIdx.x; idx < rows * 64; idx += kStreamThreads)
        store(idx, warp_total(idx));
    } else {
#if __CUDA_ARCH__ >= 900
      // Block rank r stores slice r of the tile's outputs (stream_plan.h's
      // tile_quad_first). Each block adds its warps' sums a quad at a time and
      // pushes each quad to its slice's owner, into the owner's inbox slot for
      // this block: one st.async of 16 bytes, counted on the owner's barrier.
      // Then each block waits for its C - 1 peers' bytes and adds the C totals
      // in rank order (the same sums every run). A peer's push is one one-way
      // trip through the cluster; pulling the totals needed a cluster barrier
      // first (with a MEMBAR.ALL.GPU: its release waits for every store of
      // the block), the remote loads' round trip, and a second barrier so that
      // no block exits while a peer still reads it. The kernels' timestamps put 1.4-1.5 us between the loop's
      // end and the exit of the pulling kernels at C = 2, 0.36 us at C = 1
      // (session 13, call 2). Nothing reads a block's shared memory from
      // outside now, and its inbox has received every byte before it exits,
      // so no barrier holds the exit.
      const int C = p.tile_split;
      const int rank = blockIdx.x % C;  // 1-D grid, clusters of (C, 1, 1)
      const int n_quads = rows * 16;
      const int slot_floats = 4 * tile_quad_slot(n_quads, C);
      const int first = 4 * tile_quad_first(rank, n_quads, C);
      const int slice_end = 4 * tile_quad_first(rank + 1, n_quads, C);
      asm volatile("barrier.cluster.wait;\n" ::: "memory");  // the peers' barriers are ready
      for (int q = threadIdx.x; q < n_quads; q += kStreamThreads) {
        const int idx = 4 * q;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < kStreamWarps; ++w) {
          const float4 s =
              *reinterpret_cast<const float4*>(smem + w * (kRingUnits * kUnitBytes) + 4 * idx);
          v.x += s.x;
          v.y += s.y;
          v.z += s.z;
          v.w += s.w;
        }
        const int owner = tile_quad_owner(q, n_quads, C);
        deliver_quad(
            inbox + 4 * (rank * slot_floats + idx - 4 * tile_quad_first(owner, n_quads, C)),
            owner, rank, v, inbox_bar);
      }
      __syncthreads();  // this block's own slot
      mbarrier_wait_cluster(inbox_bar, 0);
      const float* received = reinterpret_cast<const float*>(smem + (inbox - smem_base));
      for (int idx = first + threadIdx.x; idx < slice_end; idx += kStreamThreads)
        store(idx, received_total(received, slot_floats, idx - first, C));
#else
      __trap();  // never planned: sm90_code_loaded() is false for this code
#endif
    }
  } else if constexpr (kGroupCluster) {
#if __CUDA_ARCH__ >= 900
    // The group cluster's epilogue, the tile split's push with stream-K's
    // layout: each warp's sums go to its own ring (an idle warp past the last
    // tile has copied nothing and pushes its zeros, which its slices' owners
    // count on), then each warp pushes its quads to their owners without
    // waiting for the other warps. Quad q of the block is row q / 128, group
    // columns 4 (q % 128) ..; the owner adds slot 0, 1, .. C - 1 to 0, as the
    // reduce kernel adds the parts in block order, so the output is the
    // aligned split's bit for bit.
    const float* sums = sums_to_own_ring();
    __syncwarp();
    const int C = -p.tile_split;
    const int rank = blockIdx.x % C;  // 1-D grid, clusters of (C, 1, 1)
    const int group_quads = rows * (kGroupColumns / 4);
    const int group_slot_floats = 4 * tile_quad_slot(group_quads, C);
    const uint32_t inbox_barrier = group_inbox_bar();
    asm volatile("barrier.cluster.wait;\n" ::: "memory");  // the peers' barriers are ready
    for (int i = lane; i < rows * 16; i += 32) {
      const int m = i / 16, c = i % 16;
      const float4 v = *reinterpret_cast<const float4*>(sums + m * 64 + 4 * c);
      const int q = m * (kGroupColumns / 4) + warp * 16 + c;
      const int owner = tile_quad_owner(q, group_quads, C);
      deliver_quad(inbox + 16 * (rank * (group_slot_floats / 4) + q -
                                 tile_quad_first(owner, group_quads, C)),
                   owner, rank, v, inbox_barrier);
    }
    __syncthreads();  // this block's own slot
    mbarrier_wait_cluster(inbox_barrier, 0);
    const float* received = reinterpret_cast<const float*>(smem + (inbox - smem_base));
    const int first = 4 * tile_quad_first(rank, group_quads, C);
    const int slice_end = 4 * tile_quad_first(rank + 1, group_quads, C);
    const int64_t n_group = static_cast<int64_t>(blockIdx.x / C) * kGroupColumns;
    for (int idx = first + threadIdx.x; idx < slice_end; idx += kStreamThreads) {
      const float v = received_total(received, group_slot_floats, idx - first, C);
      const int64_t n = n_group + idx % kGroupColumns;
      if (n < p.N) store_with_bias(out, bias, idx / kGroupColumns, n, p.N, v);
    }
#else
    __trap();  // never planned: sm90_code_loaded() is false for this code
#endif
  }
#endif
  timeline_mark(kMarkExit);
}

// out[m, n] = T(sum of the partials + bias[n]) for the columns of cut groups,
// always in the same order: bitwise the same result every run. Groups inside
// one block were written by the main kernel and are left alone.
//
// The partials sit in L2, so the cost is latency, index math and the launch,
// not bytes. Block (x, y) works on column group x: one thread learns how many
// blocks cut the group (64-bit divisions: done by every thread they cost more
// than the sums) and the block returns at once if none did. Otherwise, when
// no group has more than kReduceSerialParts partials, each thread adds the
// partials of 4 (or 2: reduce_rows) rows of one column with every load issued before
// the first add (grid y = ceil(M / rows) x 2 halves of 256 columns:
// one row a block made 1,792 blocks of ~6 loads a thread at M = 16 on 8192 x
// 28672, two waves of block latency, 7.7 us against 2.0 at M = 1; session
// 15's probe); when some group has more (a short GEMV cut 32
// ways), 8 threads share an output (slice s adds partials s, s + 8, ...) and
// the slice sums are added in slice order (grid y = M x 16 chunks of 32
// columns), so a 32-way cut costs one round trip to L2, not four. The mode is
// the plan's, the same for every block: no block is launched only to leave.
constexpr int kReduceThreads = 256;
constexpr int kReduceSlices = 8;
constexpr int kReduceSerialParts = 16;
constexpr int kReduceRows = 4;  // rows a thread adds, where no group has more than 8 parts
// Where no group has more than 8 parts the serial sums keep 8 loads a row, not
// 16: 48 registers instead of 80, so 5 blocks an SM instead of 3 and 16 x 8192
// x 28672's 448 blocks run in one wave (session 16: 5.3 -> 3.5 us).
constexpr int kReduceShortParts = 8;
// With 9-16 parts a thread adds half the rows, so that it too holds 32 loads:
// 16 x 4096 x 14336 (10 parts) spent 3.47 us in the 4-row, 16-load reduce where
// its one-block-an-SM grid (6 parts, the 8-load one) spent 2.45 (session 29,
// call D).
__host__ __device__ constexpr int reduce_rows(int serial_parts) {
  return serial_parts <= kReduceShortParts ? kReduceRows : kReduceRows / 2;
}
// Blocks per column group and row block (reduce_rows rows serial, one sliced):
// 512 columns, 256 or 32 at a time.
constexpr int kReduceSerialChunks = kGroupColumns / kReduceThreads;
constexpr int kReduceSlicedChunks = kGroupColumns * kReduceSlices / kReduceThreads;
static_assert(kReduceSlices * kReduceSerialParts >= kMaxStreamParts,
              "a sliced sum must reach every partial the planner allows");

template <typename T, int kSerialParts>
__global__ void __launch_bounds__(kReduceThreads) stream_reduce_kernel(const StreamParams p) {
  static_assert(kSerialParts <= kReduceSerialParts, "the serial mode's most parts");
  __shared__ int parts_shared;
  __shared__ float slice_sums[kReduceSlices][kReduceThreads / kReduceSlices];
  timeline_reduce_mark(0);
  const int chunks = p.reduce == kReduceSliced ? kReduceSlicedChunks : kReduceSerialChunks;
  const int64_t ng = blockIdx.x;
  const int chunk = blockIdx.y % chunks;
  if (threadIdx.x == 0) {
    const int64_t s0 = ng * p.k_steps;
    parts_shared = owner_block(s0 + p.k_steps - 1, p.total_steps, p.blocks) -
                   owner_block(s0, p.total_steps, p.blocks) + 1;
  }
  __syncthreads();
  const int parts = parts_shared;
  if (parts == 1) return;
#if __CUDA_ARCH__ >= 900 && JAX_MARLIN_STREAM_REDUCE_PDL
  // Launched while the main kernel still runs (JAX_MARLIN_STREAM_REDUCE_PDL):
  // its partials are all written and visible once it has completed. Nothing
  // above reads memory the main kernel writes.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const bool sliced = p.reduce == kReduceSliced;
  const T* bias = static_cast<const T*>(p.bias);
  T* out = static_cast<T*>(p.out);
  const int64_t part_stride = p.M * p.n_pad;
  // The main kernel wrote every column < n_pad of a cut group; the last group
  // may end before 512 columns, so columns >= n_pad load nothing and columns
  // >= N are summed and dropped.
  if (!sliced) {
    // Chunk c < 2 holds columns 256 c + thread; rows m0 .. m0 + kRows - 1.
    constexpr int kRows = reduce_rows(kSerialParts);
    const int64_t m0 = static_cast<int64_t>(blockIdx.y / chunks) * kRows;
    const int64_t n = ng * kGroupColumns + kReduceThreads * chunk + threadIdx.x;
    float v[kRows][kSerialParts];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const float* src = p.workspace + (m0 + i) * p.n_pad + n;
      const bool row = m0 + i < p.M && n < p.n_pad;
#pragma unroll
      for (int r = 0; r < kSerialParts; ++r)
        v[i][r] = row && r < parts ? __ldcg(src + r * part_stride) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float sum = 0.f;
#pragma unroll
      for (int r = 0; r < kSerialParts; ++r) sum += v[i][r];
      if (m0 + i < p.M && n < p.N) store_with_bias(out, bias, m0 + i, n, p.N, sum);
    }
    timeline_reduce_mark(1);
    return;
  }
  // Sliced: chunk c < 16 holds columns 32 c + lane, slice = warp; one row.
  const int64_t m = blockIdx.y / chunks;
  const int lane = threadIdx.x % 32;
  const int slice = threadIdx.x / 32;
  const int64_t n = ng * kGroupColumns + 32 * chunk + lane;
  const float* src = p.workspace + m * p.n_pad + n;
  float sum = 0.f;
  if (n < p.n_pad) {
    float v[kReduceSerialParts];
#pragma unroll
    for (int r = 0; r < kReduceSerialParts; ++r) {
      const int part = slice + kReduceSlices * r;
      v[r] = part < parts ? __ldcg(src + part * part_stride) : 0.f;
    }
#pragma unroll
    for (int r = 0; r < kReduceSerialParts; ++r) sum += v[r];
  }
  slice_sums[slice][lane] = sum;
  __syncthreads();
  if (slice != 0) return;
  sum = 0.f;
#pragma unroll
  for (int s = 0; s < kReduceSlices; ++s) sum += slice_sums[s][lane];
  if (n < p.N) store_with_bias(out, bias, m, n, p.N, sum);
  timeline_reduce_mark(1);
}

// ---------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------

template <typename T, ZeroPointKind kZP, int kMT, int kGroupUnits, bool kTileSplit,
          bool kGroupRows, bool kPhases, bool kGroupCluster = false>
cudaError_t launch_main(const StreamParams& p, const StreamPlan& plan, const DeviceLimits& device,
                        cudaStream_t stream) {
  constexpr auto kernel =
      stream_gemm_kernel<T, kZP, kMT, kGroupUnits, kTileSplit, kGroupRows, kPhases, kGroupCluster>;
  cudaError_t err = configure_shared_memory<kernel>(device);
  if (err != cudaSuccess) return err;
  // A tile's (the tile split) or a column group's (the group cluster, -C)
  // blocks run as one thread-block cluster.
  const int cluster = p.tile_split < 0 ? -p.tile_split : p.tile_split;
  if (cluster > 1) {
    const ClusterLaunch launch(dim3(static_cast<unsigned>(p.blocks)),
                               dim3(static_cast<unsigned>(cluster)), kStreamThreads,
                               plan.smem_bytes, stream);
    return cudaLaunchKernelEx(&launch.config, kernel, p);
  }
  kernel<<<static_cast<unsigned>(p.blocks), kStreamThreads, plan.smem_bytes, stream>>>(p);
  return cudaGetLastError();
}

// Whether this module's kernels run their sm_90 code on this device: a build
// for sm_80 alone runs on an sm_90 part as compute_80 PTX compiled on the fly,
// in which the cluster epilogues and the reduce's griddepcontrol.wait are
// compiled out. Asked once per device.
bool sm90_code_loaded(const DeviceLimits& device) {
  if (device.compute_capability < 90) return false;
  static std::atomic<int> known[kMaxCachedDevices];
  return cached_per_device(known, device.ordinal, [] {
    cudaFuncAttributes attributes{};
    const bool loaded =
        cudaFuncGetAttributes(&attributes, stream_reduce_kernel<__half, kReduceSerialParts>) ==
            cudaSuccess &&
        attributes.ptxVersion >= 90;
    if (!loaded) cudaGetLastError();  // not an error of the launch to come
    return loaded;
  });
}

template <typename T, int kSerialParts>
cudaError_t launch_reduce(const StreamParams& p, dim3 grid, const DeviceLimits& device,
                          cudaStream_t stream) {
  constexpr auto kernel = stream_reduce_kernel<T, kSerialParts>;
  cudaError_t err = configure_shared_memory<kernel>(device);
  if (err != cudaSuccess) return err;
  // Only where the reduce's code on this device is sm_90's, which waits.
  if (JAX_MARLIN_STREAM_REDUCE_PDL && sm90_code_loaded(device)) {
    const DependentLaunch launch(grid, kReduceThreads, 0, stream);
    return cudaLaunchKernelEx(&launch.config, kernel, p);
  }
  kernel<<<grid, kReduceThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, ZeroPointKind kZP, int kMT, int kGroupUnits, bool kGroupRows>
cudaError_t launch_stream(const StreamParams& p, const StreamPlan& plan, const DeviceLimits& device,
                          cudaStream_t stream) {
  // The phased kernels (the tile split's and stream-K's) are instances of their
  // own (kMT = 2 only), so that the unphased plans run the kernels without the
  // phase code.
  auto launch_phased_or_not = [&](auto tile_split) -> cudaError_t {
    constexpr bool kTileSplit = decltype(tile_split)::value;
    if (!stream_a_phased(plan))
      return launch_main<T, kZP, kMT, kGroupUnits, kTileSplit, kGroupRows, false>(p, plan, device,
                                                                                 stream);
    if constexpr (kMT == 2)  // M >= kAPhaseFromM: the 16-row kernels only
      return launch_main<T, kZP, kMT, kGroupUnits, kTileSplit, kGroupRows, true>(p, plan, device,
                                                                                stream);
    else
      return cudaErrorInvalidValue;
  };
  cudaError_t err =
      p.tile_split < 0
          ? launch_main<T, kZP, kMT, kGroupUnits, false, kGroupRows, false, true>(p, plan, device,
                                                                                   stream)
      : p.tile_split > 0 ? launch_phased_or_not(std::true_type{})
                         : launch_phased_or_not(std::false_type{});
  if (err != cudaSuccess) return err;
  if (p.reduce != kNoReduce) {
    // One block row per column group (gridDim.x < 2^31: N < 2^40), and row
    // blocks x chunks blocks per group (gridDim.y <= 65535: M <= 16 here).
    const int serial_parts = plan.max_parts <= kReduceShortParts ? kReduceShortParts
                                                                 : kReduceSerialParts;
    const int64_t row_blocks =
        p.reduce == kReduceSliced ? p.M : ceil_div(p.M, int64_t{reduce_rows(serial_parts)});
    const int chunks = p.reduce == kReduceSliced ? kReduceSlicedChunks : kReduceSerialChunks;
    const dim3 grid(static_cast<unsigned>(ceil_div(p.n_pad, int64_t{kGroupColumns})),
                    static_cast<unsigned>(row_blocks * chunks));
    err = serial_parts == kReduceShortParts
              ? launch_reduce<T, kReduceShortParts>(p, grid, device, stream)
              : launch_reduce<T, kReduceSerialParts>(p, grid, device, stream);
  }
  return err;
}

// Groups of 32 and 64 at M x G <= 8 take the group rows (stream_plan.h's
// stream_group_rows, which also sized the staged A).
template <typename T, ZeroPointKind kZP, int kMT, int kGroupUnits>
cudaError_t launch_group_rows(const StreamParams& p, const StreamPlan& plan, const DeviceLimits& device,
                              cudaStream_t stream) {
  if constexpr (kMT == 1) {
    if (stream_group_rows(p.M, int64_t{16} * kGroupUnits))
      return launch_stream<T, kZP, kMT, kGroupUnits, true>(p, plan, device, stream);
  }
  return launch_stream<T, kZP, kMT, kGroupUnits, false>(p, plan, device, stream);
}

template <typename T, ZeroPointKind kZP, int kMT>
cudaError_t dispatch_group_units(const StreamParams& p, const StreamPlan& plan,
                                 const DeviceLimits& device, cudaStream_t stream) {
  switch (p.log2_group_units) {
    case 1: return launch_group_rows<T, kZP, kMT, 2>(p, plan, device, stream);
    case 2: return launch_group_rows<T, kZP, kMT, 4>(p, plan, device, stream);
    default: return launch_stream<T, kZP, kMT, kStepUnits, false>(p, plan, device, stream);
  }
}

template <typename T, ZeroPointKind kZP>
cudaError_t dispatch_rows(const StreamParams& p, const StreamPlan& plan, const DeviceLimits& device,
                          cudaStream_t stream) {
  return p.M <= 8 ? dispatch_group_units<T, kZP, 1>(p, plan, device, stream)
                  : dispatch_group_units<T, kZP, 2>(p, plan, device, stream);
}

template <typename T>
cudaError_t dispatch_zero_points(const MarlinGemmArgs& args, const StreamParams& p,
                                 const StreamPlan& plan, const DeviceLimits& device,
                                 cudaStream_t stream) {
  return args.zero_point_kind == ZeroPointKind::kPacked4
             ? dispatch_rows<T, ZeroPointKind::kPacked4>(p, plan, device, stream)
             : dispatch_rows<T, ZeroPointKind::kImplicit>(p, plan, device, stream);
}

}  // namespace

// The cluster residency query's kernel: never launched, only its occupancy read
// with the largest dynamic shared memory (one block an SM), so the count is the
// GPCs' packing of clusters, not the streaming kernel's registers.
static __global__ void cluster_residency_kernel() {}

cudaError_t QueryClusterBlocks(DeviceLimits* device) {
  if (device->compute_capability < 90) return cudaSuccess;
  const int smem = device->max_shared_bytes_per_block;
  cudaError_t error = cudaFuncSetAttribute(
      cluster_residency_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int blocks[3] = {0, 0, 0};
  for (int i = 0, C = 2; i < 3 && error == cudaSuccess; ++i, C *= 2) {
    const ClusterLaunch launch(dim3(C), dim3(C), kStreamThreads, smem, nullptr);
    int clusters = 0;
    error = cudaOccupancyMaxActiveClusters(&clusters, cluster_residency_kernel, &launch.config);
    blocks[i] = clusters * C;
  }
  // A failed query leaves the counts unknown (the planner then assumes every SM
  // takes a cluster) and clears the error, which a later launch check would
  // otherwise report as its own.
  if (error != cudaSuccess) {
    cudaGetLastError();
    return error;
  }
  for (int i = 0; i < 3; ++i) device->cluster_blocks[i] = blocks[i] > 0 ? blocks[i] : -1;
  return cudaSuccess;
}

bool StreamGemmSupports(const MarlinGemmArgs& args) {
  return args.M >= 1 && args.M <= kStreamMaxM && args.group_size >= 32 &&
         (args.zero_point_kind == ZeroPointKind::kImplicit ||
          args.zero_point_kind == ZeroPointKind::kPacked4);
}

// plan_grid with what only the device can say: whether the cluster code is loaded.
static bool plan_on_device(const MarlinGemmArgs& args, const DeviceLimits& device,
                           int split_k_override, StreamPlan* plan) {
  return StreamGemmSupports(args) &&
         plan_grid(args, device, split_k_override, plan,
                   sm90_code_loaded(device) ? kTileSplitMaxCluster : 1);
}

bool PlanStreamGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                    int split_k_override, StreamGridInfo* info) {
  StreamPlan plan{};
  const bool planned = plan_on_device(args, device, split_k_override, &plan);
  *info = StreamGridInfo{plan.blocks,     plan.k_steps,   plan.total_steps,
                         plan.smem_bytes, plan.max_parts, plan.tile_split,
                         stream_group_rows(args.M, args.group_size) ? 1 : 0,
                         plan.a_phase_steps, plan.group_cluster};
  return planned;
}

cudaError_t LaunchStreamGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                             int split_k_override, cudaStream_t stream) {
  StreamPlan plan{};
  if (!plan_on_device(args, device, split_k_override, &plan)) return cudaErrorNotSupported;
  StreamParams p{};
  copy_operands(args, &p);
  p.kt_total = static_cast<int>(args.k_pad / 16);
  p.n_tiles = static_cast<int>(args.n_pad / 64);
  p.k_blocks = static_cast<int>(args.k_blocks);
  p.log2_group_units = log2_ceil(args.group_size / 16);
  p.k_steps = plan.k_steps;
  p.total_steps = plan.total_steps;
  p.blocks = plan.blocks;
  p.reduce = !plan.any_cut                           ? kNoReduce
             : plan.max_parts > kReduceSerialParts ? kReduceSliced
                                                   : kReduceSerial;
  p.tile_split = plan.group_cluster > 1 ? -plan.group_cluster : plan.tile_split;
  p.a_phase_steps = plan.a_phase_steps;
  return with_activation_type(args.dtype, [&](auto act) {
    return dispatch_zero_points<decltype(act)>(args, p, plan, device, stream);
  });
}

#ifdef JAX_MARLIN_STREAM_TIMELINE
cudaError_t ResetStreamTimeline() { return clear_timeline(g_timeline); }

cudaError_t ReadStreamTimeline(StreamTimeline* out) { return copy_timeline(g_timeline, out); }
#endif

}  // namespace jax_marlin
