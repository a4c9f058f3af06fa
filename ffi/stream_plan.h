// The streaming kernel's grid: its geometry, the split of the work list
// between blocks, and the host-side planner that picks the block count.
//
// Kept apart from the kernel (stream_kernel.cu) so that the planner, whose
// mistakes would be out-of-bounds writes to the workspace or launches over the
// shared-memory limit, is tested on machines without a GPU
// (tests/test_stream_plan.py compiles tests/cpp/stream_plan_check.cc against
// it). No XLA, no device code beyond a few __host__ __device__ index functions and
// the A staging walk (AStagingWalk).
#pragma once

#include <algorithm>
#include <cstdint>

#include "marlin_kernel.h"

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
// Ring depth in steps: 2 (measured best), or 3 to measure (1 has never been
// built: the tile split's warps then hold their 64 x 16 sums in exactly the ring).
#ifndef JAX_MARLIN_STREAM_RING_STEPS
#define JAX_MARLIN_STREAM_RING_STEPS 2
#endif
constexpr int kRingSteps = JAX_MARLIN_STREAM_RING_STEPS;
constexpr int kRingUnits = kRingSteps * kStepUnits;
constexpr int kRingBytes = kStreamWarps * kRingUnits * kUnitBytes;  // 64 KB per block
// A group's words in the words ring: 64 scales (128 bytes) and 8 packed
// zero-point words (32 bytes). Each warp has kWordsSteps slots of a step's
// groups: one more than the code ring, because the words of step i +
// kRingSteps are copied before step i's last use of its own.
constexpr int kGroupWordBytes = 160;
constexpr int kWordsSteps = kRingSteps + 1;
template <int kGroupsPerStep>
constexpr int kWarpWordsBytes = kWordsSteps * kGroupsPerStep * kGroupWordBytes;
constexpr int64_t words_ring_bytes(int64_t groups_per_step) {
  return int64_t{kStreamWarps} * kWordsSteps * groups_per_step * kGroupWordBytes;
}
// The code ring's shared-memory barriers (sm_90's bulk-copy ring: one per
// run of kBulkRunUnits units per warp; reserved on every architecture).
constexpr int kBulkRunUnits = 4;
constexpr int kBulkRuns = kRingUnits / kBulkRunUnits;
constexpr int kBarrierBytes = kStreamWarps * kBulkRuns * 8;
// One staged A row per step: 128 halves plus 16 bytes of padding, so that the
// eight rows one ldmatrix reads start 4 banks apart (272 / 4 = 68 = 4 mod 32)
// and the read is conflict-free.
constexpr int kARowBytes = 2 * kStepK + 16;
// Staging A: a thread copies the 16-byte chunks c = thread, thread + threads, ...
// of `count` steps of `rows` rows, c = (i rows + row) kAChunksPerRow + chunk,
// step i from the global step k_begin (its k-step (k_begin + i) mod k_steps:
// stream-K's steps run on into the next tile's k-step 0). The walk carries
// (i, row kAChunksPerRow + chunk, k-step) from one copy to the next, since rows
// and k_steps are runtime values: dividing by them for every copy took ~75
// SASS instructions a copy (~45 with the walk), and the 16-row per-warp
// kernels copy 8 a lane a step (8 P a phase, 16-32 in the prologue).
constexpr int kAChunksPerRow = kStepK / 8;
struct AStagingWalk {
  int i, row_chunk, ks;
  int i_stride, row_chunk_stride, chunks_per_step, k_steps;

  __host__ __device__ __forceinline__ AStagingWalk(int thread, int threads, int rows,
                                                   int k_begin, int k_steps_)
      : chunks_per_step(rows * kAChunksPerRow), k_steps(k_steps_) {
    i = thread / chunks_per_step;
    row_chunk = thread - i * chunks_per_step;
    i_stride = threads / chunks_per_step;
    row_chunk_stride = threads - i_stride * chunks_per_step;
    ks = (k_begin + i) % k_steps;
  }
  __host__ __device__ __forceinline__ int row() const {
    return static_cast<unsigned>(row_chunk) / kAChunksPerRow;
  }
  __host__ __device__ __forceinline__ int chunk() const {
    return static_cast<unsigned>(row_chunk) % kAChunksPerRow;
  }
  __host__ __device__ __forceinline__ void next() {  // `threads` chunks on
    int steps = i_stride;
    row_chunk += row_chunk_stride;
    if (row_chunk >= chunks_per_step) row_chunk -= chunks_per_step, ++steps;
    i += steps;
    ks += steps;
    if (ks >= k_steps) ks %= k_steps;
  }
};
// Per staged step, row and group: the two fp32 sums of A the fold takes.
constexpr int kSumsBytes = 2 * sizeof(float);
// Group rows (groups of 32 or 64, G = 4 or 2 a step, and M x G <= 8): the
// streaming kernel gives each row and group of a step its own column of the
// MMA's n8 tile, the columns a GEMV leaves empty, so that every group is
// folded (its scale and zero point applied) once a step, as groups of 128
// are, instead of once per group (stream_kernel.cu). The staged A is the
// same; only the lanes' use of it changes.
__host__ __device__ constexpr bool stream_group_rows(int64_t M, int64_t group_size) {
  return group_size >= 32 && group_size < kStepK && M * (kStepK / group_size) <= 8;
}
// Groups of 32 at M = 9-16 dequantize at the scale before the MMA and fold
// nothing, so the planner reserves no sums of A for them (stream_kernel.cu's
// kPrescale; -DJAX_MARLIN_STREAM_PRESCALE=0 keeps the fold).
#ifndef JAX_MARLIN_STREAM_PRESCALE
#define JAX_MARLIN_STREAM_PRESCALE 1
#endif
__host__ __device__ constexpr bool stream_prescale(int64_t M, int64_t group_size) {
  return JAX_MARLIN_STREAM_PRESCALE && M > 8 && group_size == 32;
}
// A zero row for the ldmatrix lanes of rows >= M: the farthest any lane reads
// is unit 7's k 8-15, i.e. one unpadded row of a step.
constexpr int kZeroRowBytes = 2 * kStepK;
// The most blocks that may share one column group: the reduce kernel adds at
// most this many partials per output (jax_marlin/_shapes.py sizes the
// workspace for no more).
constexpr int kMaxStreamParts = 64;

// Block b owns the steps [first_step(b), first_step(b + 1)).
__host__ __device__ __forceinline__ int first_step(int64_t b, int64_t T, int64_t B) {
  return static_cast<int>(b * T / B);
}
// The block owning step s: the largest b with floor(b T / B) <= s.
__host__ __device__ __forceinline__ int owner_block(int64_t s, int64_t T, int64_t B) {
  return static_cast<int>(((s + 1) * B + T - 1) / T - 1);
}

// The tile split's M x 64 outputs, as 16 M quads of 4 floats, cut between the C
// blocks of a tile as first_step cuts steps (C need not divide them: a forced
// C = 3): block r stores quads [tile_quad_first(r), tile_quad_first(r + 1)), and
// each block's inbox holds C slots of the largest slice (stream_kernel.cu's
// cluster epilogue; the planner sizes the inbox). In 32 bits: the kernel runs
// them per quad, and 16 M <= 256, C <= 8.
__host__ __device__ __forceinline__ int tile_quad_first(int r, int quads, int C) {
  return r * quads / C;
}
__host__ __device__ __forceinline__ int tile_quad_owner(int q, int quads, int C) {
  return ((q + 1) * C + quads - 1) / quads - 1;
}
__host__ __device__ __forceinline__ int tile_quad_slot(int quads, int C) {
  return (quads + C - 1) / C;
}

struct StreamPlan {
  int k_steps;      // L: steps in one column group's k-range
  int total_steps;  // T = column groups x L
  int blocks;       // B
  int any_cut;      // some column group is cut: the reduce kernel must run
  int max_parts;    // the most blocks sharing one column group
  int tile_split;   // C > 0: C blocks (a cluster) per 64-column tile, splitting k; 0: stream-K
  int smem_bytes;   // dynamic shared memory per block
  int a_phase_steps;  // P: A is staged P steps at a time (>= a block's steps: all at once;
                      // the tile split in phases: a warp's P, stream_a_phased)
  int group_cluster;  // C > 1: stream-K's C blocks of each column group form a cluster
};

// The most partials any column group needs with B blocks (1 = direct).
int max_parts(int64_t n_groups, int64_t L, int64_t T, int64_t B) {
  int most = 1;
  for (int64_t ng = 0; ng < n_groups; ++ng) {
    most = std::max(most, owner_block(ng * L + L - 1, T, B) - owner_block(ng * L, T, B) + 1);
  }
  return most;
}

// The tile-split grid (kernel template kTileSplit) gives each 64-column tile
// C blocks, a thread-block cluster on sm_90 (C = 1 elsewhere), that split its
// k-steps and add their sums on chip: no partials, no reduce kernel. Where a
// stream-K grid would cut, the tile split is taken with the smallest power of
// two C that leaves each block at most kTileSplitTargetSteps steps (M <= 8;
// kTileSplitTargetStepsWide from M = 9, where a step costs more than the
// cluster's epilogue: with a target of 2 rather than 4 steps, the planned
// grids of session 15's call A ran 16 x 896 x 1152 in 4.98 us against 5.24,
// 12 x 2048 x 512 4.70 against 5.09, 9 x 896 x 896 4.66 against 4.91), or
// the largest C short of that, among the grids that run in one wave: one
// block an SM, less the SMs that clusters of C cannot use
// (cudaOccupancyMaxActiveClusters: clusters stay within a GPC), and two
// blocks an SM for C = 1 with at most kTileSplitTwoBlocksMaxSteps steps. No
// grid in one wave, more than kTileSplitMaxSteps steps a block, or a C short
// of the target in fewer than kTileSplitMinBlocks blocks (few blocks with
// long k: where no clusters are, 4096 x 1024 at C = 1 ran 14.0 -> 15.7 us,
// session 3): stream-K.
// Measured on the H200 (docs/perf/NOTES.md):
// - at M = 1 with C = 1 (session 3, call 7) the tile split won at 64, 96 and 128
//   tiles with k = 4096 and 8192 (4096 x 6144 18.6 -> 13.6 us, 8192 x 8192
//   23.4 -> 21.8); clusters (session 4, call 1) won where they keep one block an
//   SM (14336 x 4096 with C = 2: 22.7 -> 20.3) and lost where they put two on
//   some SMs (4096 x 6144 with C = 2, 192 blocks: 13.4 -> 16.2).
// - the probe in CUDA graphs (session 14, calls A and B; us, planned before ->
//   after): stream-K's reduce kernel costs ~2 us, which small grids never win
//   back: 896 x 896 6.25 -> 3.49 (C = 1, 7 steps), 4864 x 896 6.45 -> 4.04
//   (C = 8, 5 steps), 2048 x 512 6.13 -> 4.08 (C = 2), 896 x 9728 7.36 -> 5.35
//   (C = 1, 152 blocks, two an SM), 2048 x 16384 10.59 -> 8.67 (C = 1, 256
//   blocks); at M = 16, 4864 x 896 8.69 -> 5.31 (C = 8), 2048 x 512 7.16 ->
//   5.05 (C = 4). Clusters of 4 past the 120 blocks the H200 places lost a wave:
//   8192 x 2048 at M = 16 14.84 (C = 4, 128 blocks) against 12.41 (C = 2); at
//   M = 1 C = 2 won there too (7.31 against 8.09). Two blocks an SM with 32
//   steps: 4096 x 14336 at M = 1 14.41 against stream-K's 15.00, not taken
//   (k >= 4096 has stayed with the session-3 rule, measured at every M).
#ifndef JAX_MARLIN_TILE_SPLIT_MAX_CLUSTER
#define JAX_MARLIN_TILE_SPLIT_MAX_CLUSTER 8
#endif
constexpr int kTileSplitMaxCluster = JAX_MARLIN_TILE_SPLIT_MAX_CLUSTER;
static_assert(kTileSplitMaxCluster >= 1 && kTileSplitMaxCluster <= 8,
              "8 blocks is the portable cluster size, which every sm_90+ part can place");
constexpr int kTileSplitMaxSteps = 64;  // per block: k <= 8192 for C = 1
constexpr int kTileSplitMinBlocks = 64;  // short of the target steps, at least these blocks
constexpr int kTileSplitTargetSteps = 8;      // M <= 8
constexpr int kTileSplitTargetStepsWide = 2;  // M = 9-16: a step costs more
constexpr int kTileSplitTwoBlocksMaxSteps = 16;
// split_k_override = -C asks for the tile-split grid with C blocks per tile
// where it fits (-1: one block per tile).
constexpr bool is_forced_tile_split(int split_k_override) { return split_k_override < 0; }

// The group cluster (sm_90): an aligned split of every column group into C
// blocks, B = column groups x C, whose C blocks are a thread-block cluster.
// first_step then cuts exactly at the groups' edges (block g C + r takes
// steps g L + floor(r L / C) on), so a block's steps lie in one group, and
// the C partials of a group are added on chip as the tile split adds its
// blocks' totals (stream_kernel.cu's group-cluster epilogue): no partials in
// the workspace, no reduce kernel and its launch (2.0 us at M = 1, 7.7 at M
// = 16 on 8192 x 28672, session 15's probe). The sums are the reduce
// kernel's, in the same order: the results match the aligned split's bit
// for bit. split_k_override = kGroupClusterOverride + C asks for it where
// it fits.
//
// The planner takes it where stream-K would cut and no tile split is taken,
// at M <= kGroupClusterMaxM, with the largest C whose blocks fit one an SM
// (less the SMs clusters of C cannot use), if a block then has at most
// kGroupClusterExtraSteps steps more than stream-K's average per SM (T /
// SMs). Why (session 15, calls D-F, the probe at M = 1 with the kernels'
// timestamps): the time is set by the busiest SM. With the group cluster's
// blocks one an SM, each SM streams ceil(L / C) steps, and the stream
// starts ~1.7 us sooner than with stream-K's two blocks an SM (first step
// at 3.5 against 5.2 us), the reduce (2.0 us) is gone, the cluster's
// epilogue costs ~1 us, and a step takes ~0.9 us an SM: a gain of ~2.8 us
// less ~1.1 us per step of excess. Measured, planned stream-K -> group
// cluster: 4096 x 14336 14.62 -> 12.53 (C = 4, 112 blocks, 8 steps against
// 6.8 an SM), 4096 x 32000 22.99 -> 21.12 (C = 2, 126 blocks, 16 against
// 15.3); a tie on 4096 x 28672 (C = 2: 16 against 13.6), and a loss on 8192
// x 28672 (C = 2: 32 against 27.2; 35.7 -> 38.1). Where blocks outnumber
// the SMs, clusters leave SMs with one block and others with two (224 blocks
// of C = 4: 24 SMs with one, 100 with two, 8 with none), and the SMs with
// two finish last: 8192 x 28672 at C = 4 ran 37.38 against 35.06. No phases
// (M <= 8 here; at M = 16, A for ceil(L / C) steps plus the inbox would
// take one block an SM).
constexpr int64_t kGroupClusterMaxM = 8;
constexpr int64_t kGroupClusterExtraSteps = 2;
constexpr int kGroupClusterOverride = 1000;
constexpr bool is_forced_group_cluster(int split_k_override) {
  return split_k_override > kGroupClusterOverride;
}
// A group-cluster block's inbox: C slots of the largest slice of its M x 512
// outputs (128 M quads, cut as tile_quad_first cuts them), then the 8-byte
// barrier that counts the peers' bytes.
inline int64_t group_inbox_bytes(int64_t M, int64_t C) {
  return C * tile_quad_slot(static_cast<int>(128 * M), static_cast<int>(C)) * 16 + 8;
}

// A stream-K grid that two blocks an SM spread over more than one wave (a
// block stages A for all of its steps, 4.5 KB a step at M = 16, so past M = 8
// two blocks an SM can hold too few steps for one wave; unless A is staged in
// phases, below, which comes first) and that cuts some
// column group into more than this many partials is planned with one block an
// SM instead: one wave, fewer and shallower partials, half the warps. Measured
// on the H200 (session 10 call D, 7 repeats, docs/perf/NOTES.md): 28672 x 8192
// at M = 12 / 16, 33 -> 9 partials, 61.6 / 68.8 -> 57.5 / 57.6 us fp16 (bf16
// 64.7 / 71.3 -> 60.2 / 61.8); 8192 x 28672, 11 -> 4 partials, 58.7 / 65.0 ->
// 60.7 / 64.5 (a 3% loss and a tie), so that one keeps two blocks.
// Only from M = 9, the rows measured: below, the 99-227 KB parts' two-block
// grids are multi-wave at every M (A100: 864 blocks at M = 1 on 8192 x 28672)
// and nobody has timed the alternative there.
// -DJAX_MARLIN_STREAM_ONE_BLOCK_MIN_PARTS=N moves the bound (INT32_MAX: never).
#ifndef JAX_MARLIN_STREAM_ONE_BLOCK_MIN_PARTS
#define JAX_MARLIN_STREAM_ONE_BLOCK_MIN_PARTS 16
#endif
constexpr int kStreamOneBlockMinParts = JAX_MARLIN_STREAM_ONE_BLOCK_MIN_PARTS;
constexpr int64_t kStreamOneBlockFromM = 9;

// A staged in phases (stream-K, M > 8). A block stages A for all of its steps
// where they fit; where two blocks an SM would need two waves for that (M >=
// 12 on 8192 x 28672: 13.6 steps a block, 4.4 KB a step at M = 16, ~45 KB of
// A room), a one-wave grid stages P steps at a time instead, into two slots of
// P steps that alternate: phase q + 1 is copied while phase q is consumed,
// and a block barrier at each phase's first step hands the slot of phase q -
// 1 over (stream_kernel.cu). One wave halves the column groups' partials
// (8192 x 28672 at M = 16: 11 -> 6), which the reduce kernel adds. Taken only
// where the one-wave grid cuts no group into more than kStreamOneBlockMinParts
// (else the one-block grid above, measured). A phase spans at least
// kRingSteps + 1 steps: a phase's copy is committed at the previous phase's
// first step, and the code ring's waits (kRingSteps - 1 commit groups back on
// the bulk ring, kRingUnits - 1 unit groups on the cp.async ring) have seen
// it land within that many steps, before the barrier that publishes it.
// -DJAX_MARLIN_STREAM_A_PHASES=0 keeps the two-wave grids.
#ifndef JAX_MARLIN_STREAM_A_PHASES
#define JAX_MARLIN_STREAM_A_PHASES 1
#endif
constexpr int kAPhaseMinSteps = kRingSteps + 1;
constexpr int64_t kAPhaseFromM = 9;  // the 16-row kernels (kMT = 2) have phases

// The tile split's A in phases, per warp (M = 9-16). The tile split stages A for
// all of a block's ceil(L / C) steps, 4.4 KB a step at M = 16, so long k-ranges
// did not fit (10240 x 4096 at C = 2 from M = 15, 8192 x 8192 at C = 1 from M =
// 10), and those ran stream-K with its reduce. In the 16-row kernels each warp
// stages the A of its own steps (stream_kernel.cu's kWarpA), so there each warp
// can stage them P at a time instead, in two slots of its own that alternate
// (phase q + 1 copied while phase q is consumed, handed over with a warp-wide
// sync, no block barrier): the block holds kStreamWarps x 2 P steps. P is the
// most that fits, at least kRingSteps:
// a phase's copy is committed before the phase's P x kStepUnits unit groups,
// and the wait at the next phase's start (all but the newest kRingUnits
// groups) has then seen it land. Taken with clusters (C > 1) only up to
// kTilePhaseMaxBlockSteps steps a block. Measured on the H200 at M = 16 (session
// 39 calls W and X, kernels in CUDA graphs, us, stream-K -> phased tile split):
// C = 2 on N = 4096: 10240 x 4096 (40 steps a block) 19.19 -> 16.69, 11008 x 4096
// (43) 19.03 -> 17.77, 12288 x 4096 (48) 18.98 -> 18.69, but 14336 x 4096 (56)
// 20.90 -> 21.77; C = 1: 5120 x 5120 (40) 17.77 -> 15.68, 8192 x 8192 (64) 26.53
// -> 23.72 (M = 12: 23.81 -> 21.80). The phased split's time grows ~0.31 us a
// block step in all of them, while stream-K's stays ~19 us on N = 4096 up to K =
// 12288; the C = 1 shapes are the wider ones (more column groups), where
// stream-K measured slower. With the 16-row instances' A staging walk
// (stream_kernel.cu; session 42 calls A and D) 14336 x 4096 (56) reads 20.90 ->
// 20.04-20.10 phased, so the cap is 56 steps. -DJAX_MARLIN_STREAM_TILE_PHASES=0 keeps all such
// shapes on stream-K; -DJAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS=N moves the cap
// (for A/B runs of the longer blocks).
#ifndef JAX_MARLIN_STREAM_TILE_PHASES
#define JAX_MARLIN_STREAM_TILE_PHASES 1
#endif
#ifndef JAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS
#define JAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS 56
#endif
constexpr int kTilePhaseMinSteps = kRingSteps;
constexpr int64_t kTilePhaseMaxBlockSteps = JAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS;  // clusters

// Whether `plan` stages A in phases: a block's steps outnumber a phase's (the
// tile split: a warp's phase, which is then fewer than its block's steps).
inline bool stream_a_phased(const StreamPlan& plan) {
  if (plan.tile_split > 0)
    return plan.a_phase_steps < (plan.k_steps + plan.tile_split - 1) / plan.tile_split;
  return plan.tile_split == 0 && plan.blocks > 0 &&
         plan.a_phase_steps < (plan.total_steps + plan.blocks - 1) / plan.blocks;
}

// Chooses the grid and fills `plan`; false if nothing fits (the
// caller then uses the tiled kernel). Runs on every call, so every candidate B
// is tested at most once and a hopeless shape is given up on at once.
// max_cluster caps C (1: no clusters, where the kernels' code has none).
bool plan_grid(const MarlinGemmArgs& args, const DeviceLimits& device, int split_k_override,
               StreamPlan* plan, int max_cluster = kTileSplitMaxCluster) {
  const int64_t n_groups = ceil_div(args.n_pad / 64, kGroupTiles);
  const int64_t L = ceil_div(args.k_pad / 16, kStepUnits);
  const int64_t T = n_groups * L;
  if (T > INT32_MAX / 2) return false;
  // Per step of the block: A's rows, and two fp32 sums of A per row and group
  // (none where the kernel folds nothing).
  const int64_t groups_per_step = std::max<int64_t>(1, kStepK / args.group_size);
  const int64_t step_bytes =
      args.M *
      (kARowBytes + (stream_prescale(args.M, args.group_size) ? 0 : kSumsBytes * groups_per_step));
  // The rings (codes and group words), the zero row and the ring's barriers:
  // the fixed part.
  const int64_t fixed_bytes =
      kRingBytes + words_ring_bytes(groups_per_step) + kZeroRowBytes + kBarrierBytes;
  const int64_t parts_cap = std::min<int64_t>(
      kMaxStreamParts,
      args.workspace != nullptr ? args.workspace_elems / (args.M * args.n_pad) : 0);
  // A block cuts at most ceil((L - 1) / q) + 1 column groups' ranges when every
  // block has at least q = floor(T / B) steps: an O(1) test first, the exact
  // count over all groups only when the bound says no.
  auto parts_fit = [&](int64_t B) {
    const int64_t q = T / B;
    if ((L - 1 + q - 1) / q + 1 <= parts_cap) return true;
    const int parts = max_parts(n_groups, L, T, B);
    return parts == 1 || parts <= parts_cap;
  };

  // Shared memory per block when two blocks share an SM.
  const int64_t two_block_smem_cap = std::min<int64_t>(
      device.max_shared_bytes_per_block, (device.max_shared_bytes_per_block + 1024) / 2 - 1024);
  // Tile split: a block stages A for its part of k, and its warps' sums
  // (64 x M floats each) reuse the rings. With C > 1, an inbox past A
  // (16-byte aligned) receives the cluster's totals of the block's slice of
  // the outputs: C slots of the largest slice, ceil(16 M / C) quads of 4
  // floats (stream_kernel.cu).
  const int64_t n_tiles = args.n_pad / 64;
  auto tile_split_inbox = [&](int64_t C) -> int64_t {
    return C > 1 ? C * tile_quad_slot(16 * static_cast<int>(args.M), static_cast<int>(C)) * 16 + 16
                 : 0;
  };
  // A warp's phase of A under the tile split with C blocks a tile: 0 where the
  // block's A fits whole (no phases), else P (above), or -1 where nothing fits.
  auto tile_split_phase = [&](int64_t C) -> int64_t {
    const int64_t room = device.max_shared_bytes_per_block - fixed_bytes - tile_split_inbox(C);
    if (ceil_div(L, C) * step_bytes <= room) return 0;
    const int64_t P = room / (2 * kStreamWarps * step_bytes);
    return JAX_MARLIN_STREAM_TILE_PHASES && args.M >= kAPhaseFromM && P >= kTilePhaseMinSteps &&
                   (C == 1 || ceil_div(L, C) <= kTilePhaseMaxBlockSteps)
               ? P
               : -1;
  };
  auto tile_split_smem = [&](int64_t C) {
    const int64_t P = tile_split_phase(C);
    return fixed_bytes + (P > 0 ? 2 * kStreamWarps * P : ceil_div(L, C)) * step_bytes +
           tile_split_inbox(C);
  };
  // Whether C blocks per tile can run: clusters need sm_90 (and at most
  // max_cluster blocks), and every block needs a step of k and its shared
  // memory.
  auto tile_split_fits = [&](int64_t C) {
    return (C == 1 || (C <= max_cluster && device.compute_capability >= 90)) && C <= L &&
           tile_split_phase(C) >= 0 && n_tiles * C <= INT32_MAX / 2 &&
           n_tiles * L <= INT32_MAX / 2;
  };
  auto plan_tile_split = [&](int64_t C) {
    const int64_t P = tile_split_phase(C);
    plan->k_steps = static_cast<int>(L);
    plan->total_steps = static_cast<int>(n_tiles * L);
    plan->blocks = static_cast<int>(n_tiles * C);
    plan->any_cut = 0;
    plan->max_parts = 1;
    plan->tile_split = static_cast<int>(C);
    plan->smem_bytes = static_cast<int>(tile_split_smem(C));
    plan->a_phase_steps = static_cast<int>(P > 0 ? P : ceil_div(L, C));
    plan->group_cluster = 0;
    return true;
  };
  if (is_forced_tile_split(split_k_override) && tile_split_fits(-int64_t{split_k_override}))
    return plan_tile_split(-int64_t{split_k_override});

  // The group cluster with C blocks a column group: each block stages A for
  // its at most ceil(L / C) = a_phase_steps steps, and the inbox lies past
  // A (16-byte aligned, where the kernel puts the tile split's), clear of
  // all a block uses before its epilogue, since a peer may push while it
  // still streams.
  auto plan_group_cluster = [&](int64_t C) {
    if (C < 2 || C > max_cluster || C > L || device.compute_capability < 90 ||
        n_groups * C > INT32_MAX / 2)
      return false;
    const int64_t most_steps = ceil_div(L, C);
    const int64_t inbox = (fixed_bytes + most_steps * step_bytes + 15) / 16 * 16;
    const int64_t smem = inbox + group_inbox_bytes(args.M, C);
    if (smem > device.max_shared_bytes_per_block) return false;
    plan->k_steps = static_cast<int>(L);
    plan->total_steps = static_cast<int>(T);
    plan->blocks = static_cast<int>(n_groups * C);
    plan->any_cut = 0;
    plan->max_parts = 1;
    plan->tile_split = 0;
    plan->smem_bytes = static_cast<int>(smem);
    plan->a_phase_steps = static_cast<int>(most_steps);
    plan->group_cluster = static_cast<int>(C);
    return true;
  };
  if (is_forced_group_cluster(split_k_override)) {
    if (plan_group_cluster(int64_t{split_k_override} - kGroupClusterOverride)) return true;
    split_k_override = 0;  // does not fit: the planner's own grid
  }

  int64_t B = 0;
  // The two-block grid set aside for one block an SM (kStreamOneBlockMinParts),
  // kept in case the one-block grid does not fit.
  int64_t two_block_B = 0;
  int64_t phase_steps = 0;  // > 0: the grid stages A in phases of this many steps
  // Two blocks per SM (the launch bounds' register budget), each with at most
  // half the SM's shared memory (~1 KB per block is the driver's); where that
  // cannot hold the ring (99 KB parts) or leaves no grid, one block per SM.
  for (int per_sm = 2; per_sm >= 1 && B == 0; --per_sm) {
    const int64_t smem_cap = per_sm == 2 ? two_block_smem_cap : device.max_shared_bytes_per_block;
    const int64_t steps_cap = (smem_cap - fixed_bytes) / step_bytes;
    if (steps_cap < 1) continue;
    const int64_t fewest = ceil_div(T, steps_cap);  // fewer blocks: too many A steps each
    // Fewer blocks need fewer partials: if even the fewest cut too finely for
    // the workspace, no grid fits.
    if (!parts_fit(fewest)) continue;
    if (split_k_override > 0) {
      // An aligned split-K: every column group cut into the same number of
      // blocks; fewer cuts where the workspace says so.
      for (int64_t s = std::min<int64_t>(split_k_override, L); s >= 1 && B == 0; --s) {
        const int64_t b = n_groups * s;
        if (b < fewest) break;
        if (b <= T && parts_fit(b)) B = b;
      }
    } else {
      // One block per resident slot (one wave) if its A steps fit in shared
      // memory, else whole waves of them (M > 8 with long k-ranges): a partial
      // last wave would leave SMs idle for a whole block's time. Within a
      // wave count, go down from the full waves until the partials fit.
      const int64_t slots = std::max(1, device.sm_count) * int64_t{per_sm};
      for (int64_t waves = 1, tried = 0; B == 0 && tried < T; ++waves) {
        const int64_t start = std::min(T, waves * slots);
        for (int64_t b = start; b >= std::max(fewest, tried + 1) && B == 0; --b)
          if (parts_fit(b)) B = b;
        tried = start;
      }
      // More than one wave: one wave with A in phases, where that fits and cuts
      // no group too finely.
      const int64_t phase_cap = (smem_cap - fixed_bytes) / (2 * step_bytes);
      if (JAX_MARLIN_STREAM_A_PHASES && args.M >= kAPhaseFromM && per_sm == 2 && B > slots &&
          phase_cap >= kAPhaseMinSteps) {
        int64_t one_wave = 0;
        for (int64_t b = std::min(T, slots); b >= 1 && one_wave == 0; --b)
          if (parts_fit(b)) one_wave = b;
        if (one_wave > 0 &&
            max_parts(n_groups, L, T, one_wave) <= kStreamOneBlockMinParts) {
          B = one_wave;
          phase_steps = phase_cap;
        }
      }
      if (per_sm == 2 && args.M >= kStreamOneBlockFromM && B > slots &&
          max_parts(n_groups, L, T, B) > kStreamOneBlockMinParts) {
        two_block_B = B;
        B = 0;
      }
    }
  }
  if (B == 0) B = two_block_B;
  if (B == 0) return false;
  // The largest block's A steps (with their sums) on top of the rings; in
  // phases, two phases' worth.
  const int64_t most_steps = ceil_div(T, B);
  const int64_t phase = phase_steps > 0 && phase_steps < most_steps ? phase_steps : most_steps;
  plan->smem_bytes = static_cast<int>(fixed_bytes + std::min(most_steps, 2 * phase) * step_bytes);
  plan->a_phase_steps = static_cast<int>(phase);
  plan->k_steps = static_cast<int>(L);
  plan->total_steps = static_cast<int>(T);
  plan->blocks = static_cast<int>(B);
  plan->max_parts = max_parts(n_groups, L, T, B);
  plan->any_cut = plan->max_parts > 1;
  plan->tile_split = 0;
  plan->group_cluster = 0;
  if (split_k_override == 0 && plan->any_cut) {
    // The blocks of one wave of a tile split with C blocks a tile: one an SM,
    // less the SMs no cluster of C can use (device.cluster_blocks); with C = 1
    // and short k, two an SM where their shared memory allows.
    const int64_t sms = std::max(1, device.sm_count);
    auto one_wave = [&](int64_t C) -> int64_t {
      if (C == 1)
        return L <= kTileSplitTwoBlocksMaxSteps && tile_split_smem(1) <= two_block_smem_cap
                   ? 2 * sms
                   : sms;
      const int known = device.cluster_blocks[C == 2 ? 0 : C == 4 ? 1 : 2];
      return known > 0 ? std::min<int64_t>(sms, known) : known < 0 ? 0 : sms;
    };
    const int64_t target = args.M > 8 ? kTileSplitTargetStepsWide : kTileSplitTargetSteps;
    int64_t chosen = 0;
    for (int64_t C = 1; C <= kTileSplitMaxCluster; C *= 2) {
      if (!tile_split_fits(C) || ceil_div(L, C) > kTileSplitMaxSteps) continue;
      if (n_tiles * C > one_wave(C)) break;  // a larger C: more blocks, no more room
      chosen = C;
      if (ceil_div(L, C) <= target) break;
    }
    if (chosen > 0 &&
        (ceil_div(L, chosen) <= target || n_tiles * chosen >= kTileSplitMinBlocks))
      return plan_tile_split(chosen);
    // Else the group cluster whose blocks fit one an SM, with the largest such C.
    int64_t group_C = 0;
    for (int64_t C = 2; C <= max_cluster && args.M <= kGroupClusterMaxM; C *= 2) {
      if (n_groups * C > one_wave(C)) break;
      group_C = C;
    }
    if (group_C > 0 && ceil_div(L, group_C) * sms <= T + kGroupClusterExtraSteps * sms &&
        plan_group_cluster(group_C))
      return true;
  }
  return true;
}

}  // namespace
}  // namespace jax_marlin
