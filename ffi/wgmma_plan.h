// The wgmma kernel's geometry and the host-side planner of its grid: the
// block's rows, column and row blocks, and the k-split.
//
// Kept apart from the kernel (wgmma_kernel.cu, sm_90a only) so that the
// planner, whose mistakes would be partials past the workspace or a launch
// over the shared-memory limit, is tested on machines without a GPU
// (tests/test_wgmma_plan.py compiles tests/cpp/wgmma_plan_check.cc against
// it). No XLA, no device code beyond one __host__ __device__ constexpr.
#pragma once

#include <algorithm>
#include <cstdint>

#include "marlin_kernel.h"
#include "wgmma_kernel.h"
#include "wgmma_stream_k.h"

namespace jax_marlin {
namespace {

constexpr int kWgThreads = 256;          // two warpgroups
// The producer warpgroup (on by default; -DJAX_MARLIN_WGMMA_PRODUCER=0 builds
// the cp.async ring alone): 256-row blocks run with a third warpgroup whose
// warp 8 feeds the ring through full/empty mbarriers (TMA for the
// activations, bulk copies for codes and group words), so the two consumer
// warpgroups only wait, load, dequantize and multiply (wgmma_kernel.cu
// wgmma_producer). Measured on an H200 (kernels alone in CUDA graphs, session
// 23 call H): 256 x 8192 x 28672 196.3 -> 173.6 us, 1024 x 8192 x 28672
// 734.8 -> 638.6, 256 x 28672 x 8192 181.7 -> 158.5, 256 x 14336 x 4096 50.9
// -> 45.5; racecheck 0 hazards, memcheck 0 errors. A ragged last row block
// takes its activations through a tensor map of its own rows (wgmma_kernel.cu
// launch_rows): with the whole grid's 256-row box, mostly zero fill, it was
// 20-50% slower (300 x 4096 x 4096 37.0 us against 26.1, session 23 calls I
// and K). At 32, 64 and 128 rows it lost 9-22% (session 22 call F: 62.4 ->
// 76.4 us at 32 x 8192 x 28672), so those keep the cp.async ring and its
// block barrier. The cp.async ring stays compiled for 256 rows too: the
// fallback where the runtime has no cuTensorMapEncodeTiled, and the tests'
// reference (kForceWgmmaCpAsync).
#ifndef JAX_MARLIN_WGMMA_PRODUCER
#define JAX_MARLIN_WGMMA_PRODUCER 1
#endif
constexpr int kWgProducerRows = 256;  // the block rows the producer runs
constexpr int kWgProducerThreads = JAX_MARLIN_WGMMA_PRODUCER ? 128 : 0;
constexpr int kWgBlockThreads = kWgThreads + kWgProducerThreads;
constexpr int kWgTiles = 2;              // 64-column tiles per block, one per warpgroup
constexpr int kWgStageK = 64;            // k per stage: 4 units of 16
constexpr int kWgStageUnits = kWgStageK / 16;
constexpr int kWgPrefetch = 4;  // stages copied ahead of the ones a stage reads
#ifndef JAX_MARLIN_WGMMA_STAGES_PER_BARRIER
#define JAX_MARLIN_WGMMA_STAGES_PER_BARRIER 2
#endif
constexpr int kWgUnitBytes = 512;        // 16 k x 64 columns x 4 bits
constexpr int kWgCodesBytes = kWgTiles * kWgStageUnits * kWgUnitBytes;  // 4 KB
constexpr int kWgMaxGroups = kWgStageK / 32;  // groups of >= 32: at most 2 a stage
// A group's words for one tile: 64 scales (128 B), then the zero points (8
// packed words, 32 B) or the float-zero-point offsets (64 values, 128 B).
constexpr int kWgGroupWordBytes = 256;
constexpr int kWgWordsBytes = kWgMaxGroups * kWgTiles * kWgGroupWordBytes;  // 1 KB

template <int kRows>
struct WgmmaConfig {
  static_assert(kRows == 32 || kRows == 64 || kRows == 128 || kRows == 256,
                "wgmma N of the block");
  // The activations of a stage: kRows rows of 64 k (128 B), a whole number of
  // 1024-byte swizzle atoms (8 rows), so every stage stays 1024-aligned.
  static constexpr int kActBytes = kRows * 128;
  static constexpr int kStageBytes = kActBytes + kWgCodesBytes + kWgWordsBytes;
  static_assert(kStageBytes % 1024 == 0, "stages must keep the 1024-byte alignment");
  // Up to 128 rows a stage's shared loads (its code words and group words) are
  // issued a stage early, during the stage before, so that its dequantization
  // does not wait on their latency: each warp's barrier -> loads ->
  // dequantization -> MMA chain is what idles the tensor pipe there (session 9's
  // loop probe at 64 rows: 68.0 -> 63.1 us). Stage s + 1 must then have landed
  // by stage s's barrier, so one stage more is copied ahead and the ring keeps
  // one slot more (seven; eight with two stages a barrier, below). At 256 rows
  // the pipe is the wall and the slot would not fit.
  static constexpr bool kEarlyLoads = kRows <= 128;
  // Stages computed between two barriers: 2 up to 128 rows, so each warp waits
  // at half as many barriers and a barrier refills two slots at once (session
  // 10 call A, 8192 x 28672: M = 32 81.9 -> 73.9 us, M = 64 94.8 -> 87.1, M =
  // 128 145.8 -> 136.6; early loads alone gave 75.7 / 92.7 / 142.8).
  // -DJAX_MARLIN_WGMMA_STAGES_PER_BARRIER=1 builds the one-stage loop for
  // comparison. At 256 rows the tensor pipe is the wall: one.
  static constexpr int kStagesPerBarrier = kRows <= 128 ? JAX_MARLIN_WGMMA_STAGES_PER_BARRIER : 1;
  static_assert(kStagesPerBarrier == 1 || kStagesPerBarrier == 2, "one or two stages a barrier");
  // Stages that have landed at a barrier: those computed before the next one
  // (and, with early loads, the one after them, whose words the last loads).
  static constexpr int kLanded = kStagesPerBarrier + (kEarlyLoads ? 1 : 0);
  // Stages still in flight at a barrier's wait: kWgPrefetch - 1, one fewer
  // with two stages a barrier (else two 64-row blocks' rings would not fit).
  static constexpr int kInFlight = kWgPrefetch - kStagesPerBarrier;
  // Stages copied ahead (the prologue's).
  static constexpr int kLead = kInFlight + kLanded;
  // The ring: + the stages a barrier refills + the one whose wgmmas may still run.
  static constexpr int kStages = kLead + kStagesPerBarrier + 1;
  // + 1 KB to align the dynamic shared memory's base to 1024 by hand.
  // (+ the producer's full/empty barriers: 16 B a slot past the exchange's 16.)
  static constexpr int kBarrierBytes =
      JAX_MARLIN_WGMMA_PRODUCER && kRows == kWgProducerRows ? 256 : 0;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024 + kBarrierBytes;
};
static_assert(WgmmaConfig<256>::kSmemBytes <= 227 * 1024, "the 256-row ring fits an sm_90 block");
static_assert(WgmmaConfig<128>::kSmemBytes <= 227 * 1024, "the 128-row ring fits an sm_90 block");
// Two blocks an SM at <= 64 rows (the launch bounds cap registers for two): 228 KB
// an SM, 1 KB of it the driver's per block.
static_assert(2 * (WgmmaConfig<64>::kSmemBytes + 1024) <= 228 * 1024 &&
                  2 * (WgmmaConfig<32>::kSmemBytes + 1024) <= 228 * 1024,
              "two 64-row blocks share an sm_90 SM");

// The launch bounds' minimum blocks an SM, which the k-split heuristic also
// counts as resident: one definition, so the two cannot disagree.
__host__ __device__ constexpr int wgmma_blocks_per_sm(int rows) { return rows <= 64 ? 2 : 1; }

// ChooseSplits' costs in stage times (64 of k). The fill: the prologue's DRAM
// round trip and the first stages. The reduce: its launch plus M x n_pad x 4 B
// written and read per split, ~5 us at M = 64, N = 8192 against the ~0.4 us
// a stage took there unsplit (session 7 call 2: 195 us for 448 stages). A flat
// price, unlike wgmma_plan_us's reduce by its bytes (session 33): the split
// count it picks was measured with this one (sessions 7-17), and the byte
// price has only been checked on the choice of rows below.
constexpr int kWgFillStages = 4;
constexpr int kWgReduceStages = 12;
constexpr int kWgMinStagesPerSplit = 8;
constexpr int kWgMaxSplits = 16;

// The block's rows: the smallest wgmma N of 32, 64, 128, 256 that holds M (M
// <= 256: one row block, so each weight is dequantized once; two 128-row
// blocks at M = 256 did the dequantization twice, 220 instructions a stage
// each against 277 for one 256-row stage), else 256-row blocks, ceil(M / 256)
// of them along gridDim.y (M <= kWgmmaMaxM). 256 rows take 128
// accumulators a thread (242 registers, no spill: one block an SM) and a
// 223 KB ring, within sm_90's 227 KB.
// -DJAX_MARLIN_WGMMA_MAX_ROWS=128 caps the rows at 128 (M > 128 then runs
// 128-row blocks along gridDim.y), to time the split of rows against the
// doubled dequantization where the columns alone make a small grid (4096 x
// 4096 at M = 256: 32 column blocks).
// The on-chip k-split (JAX_MARLIN_WGMMA_CLUSTER_K, 1 unless built with
// -DJAX_MARLIN_WGMMA_CLUSTER_K=0; a value, not a flag): a k-split in two runs
// as clusters of 2 blocks along gridDim.z that add their fp32 halves through
// distributed shared memory, so no partials reach the workspace and no reduce
// kernel runs (wgmma_kernel.cu's epilogue). Session 18 on an H200 at M = 256:
// 4096 x 4096 22.7 -> 19.1 us, 8192 x 8192 59.2 -> 54.3, no shape slower.
#ifndef JAX_MARLIN_WGMMA_CLUSTER_K
#define JAX_MARLIN_WGMMA_CLUSTER_K 1
#endif
#ifndef JAX_MARLIN_WGMMA_MAX_ROWS
#define JAX_MARLIN_WGMMA_MAX_ROWS 256
#endif
static_assert(JAX_MARLIN_WGMMA_MAX_ROWS == 128 || JAX_MARLIN_WGMMA_MAX_ROWS == 256,
              "the wgmma kernel's largest block: 128 or 256 rows");
inline int wgmma_rows(int64_t M) {
  if (M <= 32) return 32;
  if (M <= 64) return 64;
  if (M <= 128) return 128;
  return JAX_MARLIN_WGMMA_MAX_ROWS;
}

inline int wgmma_smem_bytes(int rows) {
  switch (rows) {
    case 32:
      return WgmmaConfig<32>::kSmemBytes;
    case 64:
      return WgmmaConfig<64>::kSmemBytes;
    case 128:
      return WgmmaConfig<128>::kSmemBytes;
  }
  return WgmmaConfig<256>::kSmemBytes;
}

// Stages of 64 of k over k_pad (the last may hold fewer than 4 units).
inline int wgmma_stages(const MarlinGemmArgs& args) {
  return static_cast<int>(ceil_div(args.k_pad / 16, kWgStageUnits));
}

// Blocks of `rows` rows an SM holds at once: the launch bounds' count, or fewer
// where the shared memory (about 1 KB a block reserved by the driver) does not
// hold them.
inline int wgmma_blocks_resident_per_sm(const DeviceLimits& device, int rows) {
  const int by_smem =
      std::max(1, (device.max_shared_bytes_per_block + 1024) / (wgmma_smem_bytes(rows) + 1024));
  return std::min(wgmma_blocks_per_sm(rows), by_smem);
}

// Blocks of `rows` rows resident at once on the device.
inline int wgmma_slots(const DeviceLimits& device, int rows) {
  return std::max(1, device.sm_count) * wgmma_blocks_resident_per_sm(device, rows);
}

// The grid with blocks of `rows` rows. The k-split: as many splits as the
// workspace holds and the heuristic finds worth a reduce, each of at least
// kWgMinStagesPerSplit stages, none empty; `forced_splits` > 0 takes that many
// instead (as far as the workspace and the stages allow).
inline WgmmaGridInfo plan_wgmma_rows(const MarlinGemmArgs& args, const DeviceLimits& device,
                                     int rows, int forced_splits) {
  WgmmaGridInfo info{};
  info.rows = rows;
  info.smem_bytes = wgmma_smem_bytes(info.rows);
  info.n_blocks = ceil_div(args.n_pad / 64, kWgTiles);
  info.m_blocks = ceil_div(args.M, info.rows);
  const int stages = wgmma_stages(args);
  int splits = 1;
  if (args.workspace != nullptr) {
    const int64_t ws_splits = args.workspace_elems / (args.M * args.n_pad);
    const int max_splits = static_cast<int>(std::min<int64_t>(
        {ws_splits, int64_t{stages / kWgMinStagesPerSplit}, int64_t{kWgMaxSplits}}));
    if (forced_splits > 0)
      splits = std::max(1, std::min(forced_splits, max_splits));
    else if (max_splits > 1)
      splits = ChooseSplits(info.n_blocks * info.m_blocks, stages, max_splits,
                            wgmma_slots(device, info.rows), kWgFillStages, kWgReduceStages);
  }
  info.stages_per_split = static_cast<int>(ceil_div(stages, splits));
  info.splits = static_cast<int>(ceil_div(stages, info.stages_per_split));
  // A k-split in two whose blocks all fit at once as clusters of 2: the halves
  // add on chip. The device's count is of blocks that clusters of 2 place one an
  // SM; where two blocks share an SM (32 and 64 rows: the launch bounds' two, and
  // the registers hold no more than two at 32 rows), every such placement can take
  // each cluster twice, so twice the count fit (a lower bound; the H200 measured
  // exactly 2 x 132 = 264 at 64 rows' shared memory, session 18 call D). An unknown
  // count (0: no query, or a failed one) plans no cluster here, unlike the
  // streaming planner's tile split: this split has the reduce to fall back on.
  // (ChooseSplits still charges such a split the reduce it no longer runs.)
  const int64_t blocks = info.n_blocks * info.m_blocks * info.splits;
  const int64_t cluster_room = static_cast<int64_t>(device.cluster_blocks[0]) *
                               wgmma_blocks_resident_per_sm(device, info.rows);
  info.cluster_k = JAX_MARLIN_WGMMA_CLUSTER_K && info.splits == 2 &&
                   device.compute_capability >= 90 && device.cluster_blocks[0] > 0 &&
                   blocks <= cluster_room;
  return info;
}

// A grid's time in us, roughly: waves x (stages + 10) x a stage's time (the 10
// stages: the launch, the prologue's DRAM round trip and the epilogue), plus the
// k-split's cost: the on-chip exchange ~0.3 us, or the reduce kernel, ~0.95 us and
// its traffic (each split's fp32 partials read, the output written) at ~4.2 TB/s.
// A stage: 0.178 + 0.00208 rows us at 128 and 256 rows (0.444 and 0.71), fitted to
// session 18's probe of the kernel alone at M = 256, K = 4096-14336, N = 4096, each
// within 1 us of the measured 17.7-54.4 us with the flat reduce (with the reduce by
// its bytes the 256-row plans there model 1.2-1.7 us above what they measured; the
// choice between 128 and 256 rows at M = 129-256 was checked with it, session 33
// call B); 0.33 us at 64 rows (and 32, never compared) and one block an SM
// (session 33 call A: the 64-row halves of 128 x K x N read 13.8 / 25.1 / 9.0 /
// 6.6 us at K x N = 4096 x 4096 / 8192 x 4096 / 2048 x 4096 / 1056 x 200, 0.32-0.335 a
// stage, where the line gives 0.311). The reduce's terms, from the same call: after
// 128-row blocks with k in 4 on 4096 x 4096 it took 2.1 / 2.4 / 3.2 us at M = 65 /
// 96 / 128 (4.8 / 7.1 / 9.4 MB); the flat 4.8 us this model used before priced a
// 128-row block's k in 4 ~1.6 us too high at M = 128 and 2.7 at 65.
inline double wgmma_stage_us(int rows) { return rows <= 64 ? 0.33 : 0.178 + 0.00208 * rows; }
inline double wgmma_reduce_us(const WgmmaGridInfo& plan, const MarlinGemmArgs& args) {
  const double bytes = static_cast<double>(plan.splits * 4 + 2) * static_cast<double>(args.M) *
                       static_cast<double>(args.n_pad);
  return 0.95 + bytes / 4.2e6;
}
inline double wgmma_plan_us(const WgmmaGridInfo& plan, const MarlinGemmArgs& args,
                            const DeviceLimits& device) {
  const int64_t waves = ceil_div(plan.n_blocks * plan.m_blocks * plan.splits,
                                 int64_t{wgmma_slots(device, plan.rows)});
  return static_cast<double>(waves * (plan.stages_per_split + 10)) * wgmma_stage_us(plan.rows) +
         (plan.splits > 1 ? (plan.cluster_k ? 0.3 : wgmma_reduce_us(plan, args)) : 0.0);
}

// The grid of one GEMM. The launch runs exactly this and PlanWgmmaGemm
// reports it, so a test's assertion on the plan is one on the launched grid.
// With the on-chip split (JAX_MARLIN_WGMMA_CLUSTER_K), M = 129-256 may run
// 128-row blocks with k in 2 as clusters instead of 256-row blocks and a
// reduce, where the cost model says that is faster (measured: 4096 x 4096
// 22.7 -> 19.1 us, 8192 x 4096 33.9 -> 33.2; 14336 x 4096, with 3.5x the stages
// of the first, keeps 256 rows: 50.8 against 54.4). With the reduce priced by its
// bytes (session 33), shapes with few partial bytes (a small M x n_pad) go back to
// 256 rows and the reduce, which measured faster there (session 33 call B: 256 x
// 3072 x 1024 15.0 -> 12.7 us, 129 x 8192 x 4096 32.4 -> 29.4, 192 x 6144 x 3072
// 25.7 -> 21.9).
// -DJAX_MARLIN_WGMMA_HALVES=0 keeps 256 rows there, to time the two choices.
// M = kWgHalves64MinM-128 (JAX_MARLIN_WGMMA_HALVES64, 0 to turn it off) may likewise
// run 64-row blocks with k in 2 on chip instead of 128-row blocks (k in 4 and the
// reduce on ~4096-column shapes), where the model says so and the grid still
// gives each block an SM of its own (n_blocks x m_blocks x splits <= SMs: up to ~4224
// columns on an H200; the model's 64-row stage held for one block an SM and not for
// two, 64 x 8192 x 28672: 45.5 modelled against 88.7 measured). Session 33 call A
// (the kernels alone): 128 x K x 4096 at K = 4096 14.7 -> 13.8 us, K = 2048 11.3 ->
// 9.0, 128 x 1056 x 200 12.3 -> 6.6; at K = 8192 25.1 against 22.7, which the
// model now declines. Not below kWgHalves64MinM rows: a 128-row block's time falls
// with its rows (11.4 us at 128, 10.4 at 65, 4096 x 4096) where the model prices all
// 128, so it would take the halves from M = 95 at 4096 x 4096, and the halves, whose
// time does not fall, lost at 65, 96 and 100 rows (+1.1, +0.3, +0.7 us on ~4096 x
// 4096) and won at 113, 120 and 128 (call B). The cut sits in the unmeasured 101-112
// and rests on ~4096 x 4096 alone; other K (2048, 3072) and narrow N were measured
// at 115-128 rows only.
constexpr int kWgHalves64MinM = 113;
#ifndef JAX_MARLIN_WGMMA_HALVES
#define JAX_MARLIN_WGMMA_HALVES 1
#endif
#ifndef JAX_MARLIN_WGMMA_HALVES64
#define JAX_MARLIN_WGMMA_HALVES64 1
#endif
inline WgmmaGridInfo plan_wgmma_grid(const MarlinGemmArgs& args, const DeviceLimits& device) {
  const WgmmaGridInfo info = plan_wgmma_rows(args, device, wgmma_rows(args.M), 0);
  // Half the rows with k in 2 on chip, where the model says it beats `info`.
  auto halves_if_faster = [&](bool one_block_an_sm) {
    const WgmmaGridInfo halves = plan_wgmma_rows(args, device, info.rows / 2, 2);
    const bool fits = halves.cluster_k &&
                      (!one_block_an_sm ||
                       halves.n_blocks * halves.m_blocks * halves.splits <= device.sm_count);
    return fits && wgmma_plan_us(halves, args, device) < wgmma_plan_us(info, args, device)
               ? halves
               : info;
  };
  if (!JAX_MARLIN_WGMMA_CLUSTER_K) return info;
  if (JAX_MARLIN_WGMMA_HALVES && info.rows == 256 && args.M <= 256)
    return halves_if_faster(false);
  if (JAX_MARLIN_WGMMA_HALVES64 && info.rows == 128 && args.M >= kWgHalves64MinM &&
      args.M <= 128)
    return halves_if_faster(true);
  return info;
}

// Whether the build plans the producer warpgroup for `plan` (its rows); the
// launch may still fall back to the cp.async ring at run time (wgmma_kernel.cu
// launched_plan: no cuTensorMapEncodeTiled, registers off the budget, a test's
// kForceWgmmaCpAsync).
inline bool wgmma_plans_producer(const WgmmaGridInfo& plan) {
  return JAX_MARLIN_WGMMA_PRODUCER && plan.rows == kWgProducerRows;
}

// Stream-K for the producer's 256-row grids (docs/design/wgmma_stream_k.md,
// wgmma_stream_k.h): where one block a tile leaves the last wave part-empty
// (256 x 8192 x 28672: 224 tiles of 128 stages on 132 SMs, the second wave
// 70% full, 256 stage times where 224 x 128 / 132 = 217 would do), the tiles
// run on one persistent block an SM, whole waves as before and the rest cut
// into even runs, the cut tiles added through fp32 partials in the stream-K
// workspace. Taken where the stage times (+ kWgStreamKFixupStages for the
// partials' round trip and the flags' memset) come to at most
// kWgStreamKMaxPercent of the grid's, a kernel split (splits, cluster_k) never,
// and not where the activations (M x K) pass kWgStreamKMaxL2Percent of the L2:
// the grid's waves walk k together, so the L2 holds a slice of each row
// block's activations, while stream-K's blocks sit at scattered k across
// the tiles and every row block's activations are live at once. At 768 x
// 28672 x 8192 (44 MB of activations, a 60 MB L2) stream-K ran 4% slower
// than its grid on random bits while it saved 10% on zeros, whose DRAM
// traffic draws little power; at 768 x 8192 x 28672 (12.6 MB) it saved 9%
// on random bits (session 27 calls D and E).
// -DJAX_MARLIN_WGMMA_STREAM_K=0 builds without it.
#ifndef JAX_MARLIN_WGMMA_STREAM_K
#define JAX_MARLIN_WGMMA_STREAM_K 1
#endif
constexpr int kWgStreamKFixupStages = 5;
constexpr int kWgStreamKMaxPercent = 97;
constexpr int kWgStreamKMaxL2Percent = 50;

// The persistent blocks of `plan` under stream-K, or 0 where it keeps its grid.
// `forced` (kForceWgmmaStreamK): wherever the kernel can run it, whatever it
// would save.
inline int wgmma_stream_k_blocks(const WgmmaGridInfo& plan, const MarlinGemmArgs& args,
                                 const DeviceLimits& device, bool forced = false) {
  if (!JAX_MARLIN_WGMMA_STREAM_K || !plan.producer || plan.splits != 1 || plan.cluster_k)
    return 0;
  // (The partials move as float4: a slot's base must be 16-byte aligned; ops.py
  // rounds the split-K floats before it to 64.)
  if (args.stream_k_workspace == nullptr ||
      args.stream_k_workspace_elems < kStreamKWorkspaceFloats ||
      reinterpret_cast<uintptr_t>(args.stream_k_workspace) % 16 != 0)
    return 0;
  // One persistent block a slot, up to the workspace's partial slots; the grid
  // it would replace runs on every slot (a GPU with more SMs than
  // kStreamKMaxBlocks runs more blocks at once than stream-K would).
  const int slots = wgmma_slots(device, plan.rows);
  const int blocks = std::min(slots, kStreamKMaxBlocks);
  const int64_t tiles = plan.n_blocks * plan.m_blocks;
  const int64_t stages = plan.stages_per_split;
  // (32-bit schedule arithmetic: longer x (run + 1) stays under tiles x stages + P.)
  if ((tiles <= slots && !forced) || tiles * stages > INT32_MAX / 2) return 0;
  if (forced) return blocks;
  const int64_t activation_bytes = args.M * args.K * 2;  // fp16 or bf16
  if (device.l2_bytes > 0 && activation_bytes * 100 > device.l2_bytes * kWgStreamKMaxL2Percent)
    return 0;
  const StreamKSchedule s =
      make_stream_k(static_cast<int>(tiles), static_cast<int>(stages), blocks);
  const int64_t grid = ceil_div(tiles, int64_t{slots}) * stages;
  const int64_t streamed = s.dp_tiles / blocks * stages + s.run + (s.longer > 0 ? 1 : 0) +
                           kWgStreamKFixupStages;
  return streamed * 100 <= grid * kWgStreamKMaxPercent ? blocks : 0;
}

}  // namespace
}  // namespace jax_marlin
