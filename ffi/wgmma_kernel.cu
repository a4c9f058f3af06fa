// Hopper wgmma W4A16 kernel for M = 17..4096 (sm_90a only; design and sources:
// docs/design/wgmma.md; tools/wgmma_probe.cu checks the layout facts below on
// the GPU).
//
// Past M = 16 the tensor pipe is the limit: 8192 x 28672 at M = 64 is 30
// GFLOP, and the issue's 2.5x over fp16 (48 us) needs >= 625 TFLOP/s, which
// only the asynchronous warpgroup MMA reaches (mma.sync measured 181 us there).
//
// Operands (the streaming kernel's swap, kept): the dequantized weights are
// wgmma's A, from registers, 64 output columns x 16 of k per warpgroup. Warp
// w's share (columns 16w..16w+15) is exactly an mma.sync m16n8k16 A fragment,
// and word w of each lane's 16 bytes of a tile unit holds it (the repack's
// order, jax_marlin/_layout.py), so a warp reads one 32-bit word per lane per
// k16 and dequantizes it straight into its four A registers, scales applied
// (rounded once, at the scale, as the tiled kernel and the reference do). The
// activations are wgmma's B, read from shared memory through a descriptor:
// [M, K] row-major is the K-major N x K operand wgmma wants, with N = the
// block's rows. The accumulators then hold D[column][row]: the epilogue
// transposes on the way out.
//
// Block: two warpgroups (two 64-column tiles) sharing one activation stage,
// kRows activation rows (32, 64, 128 or 256; past 256, 256-row blocks along
// gridDim.y), and one range of k (all of it, or a
// k-split's share where the column and row blocks alone leave SMs idle; a
// split in two whose blocks fit at once runs as clusters of 2 that add on chip,
// other splits' fp32 partials are added by the tiled kernel's reduce). Stages of 64
// of k go through a kStages-deep cp.async ring: 4 KB of codes, kRows x 128 B
// of activations (stored with the 128-byte swizzle wgmma's descriptor names),
// and the stage's one or two groups of scales and zero points. 256-row blocks
// feed the same ring from a producer warpgroup instead (wgmma_producer below;
// wgmma_plan.h JAX_MARLIN_WGMMA_PRODUCER; the design study is
// docs/perf/session21/wip/wgmma-producer/DESIGN.md): TMA for the activations,
// bulk copies for the codes and group words, full/empty mbarriers instead of
// the block barrier (-DJAX_MARLIN_WGMMA_PRODUCER=0 builds without it).
// Smaller blocks lost with it and keep the cp.async ring (wgmma_plan.h).

#include "wgmma_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "marlin_device.cuh"
#include "stream_timeline.h"
#include "wgmma_device.cuh"
#include "wgmma_plan.h"

#if JAX_MARLIN_WGMMA_PRODUCER
#include <cuda.h>          // CUtensorMap (a type; nothing of the driver is linked)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled, reached through cudart
#endif

namespace jax_marlin {
namespace {

// workspace: with num_splits > 1 and no cluster_k, fp32 partials [split][M][n_pad].
struct WgmmaParams : GemmOperands {
  int kt_total;   // k_pad / 16
  int n_tiles;    // n_pad / 64
  int k_blocks;
  int group_size;
  int stages;     // ceil(kt_total / 4)
  int stages_per_split;  // blockIdx.z's stages: [z, z + 1) * stages_per_split
  int num_splits;
  int cluster_k;  // 1: blockIdx.z = 0, 1 are a cluster adding on chip (num_splits = 2)
  int tail_box_rows;  // the producer's last row block: its tail map's box rows (0: none)
  int m_blocks;       // row blocks (gridDim.y, or stream-K's tiles t = x m_blocks + y)
};
// Past 128 bytes the parameters cost the 128-row cp.async kernel 4-5% (128 x
// 4096 x 4096: 11.6 -> 12.2 us, session 26 call U): with stream-K's fields
// here (160 bytes) ptxas scheduled that instance differently from its
// prologue on, though none of its code reads them; at 128 bytes, or with the
// same fields as a kernel parameter of their own, its SASS is unchanged.
static_assert(sizeof(WgmmaParams) <= 128, "stream-K's fields go in StreamKParams");

// The producer kernel's stream-K (wgmma_stream_k.h), a kernel parameter of
// its own (above says why).
struct StreamKParams {
  StreamKSchedule schedule;  // schedule.blocks > 0: the tiles run stream-K
  float* workspace = nullptr;  // its flags and partials (kStreamKWorkspaceFloats)
};

// Timestamps for tools/latency_probe.cu (stream_timeline.h's WgmmaMark);
// nothing unless built with -DJAX_MARLIN_WGMMA_TIMELINE. Thread 0 is a
// consumer in every build (the producer warpgroup is threads 256..). For grid
// plans (one k-range a block); a stream-K block stamps each segment over the
// last one's, so its stage marks are its last segment's.
#ifdef JAX_MARLIN_WGMMA_TIMELINE
__device__ StreamTimeline g_wgmma_timeline;
__device__ __forceinline__ unsigned timeline_block() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
__device__ __forceinline__ void timeline_mark(WgmmaMark mark) {
  stamp_mark(g_wgmma_timeline, timeline_block(), mark);
}
// Stage s's wgmmas issued (the first one also a mark).
__device__ __forceinline__ void timeline_stage(int s) {
  stamp_step(g_wgmma_timeline, timeline_block(), s);
  if (s == 0) timeline_mark(kWgMarkFirstIssued);
}
#else
__device__ __forceinline__ void timeline_mark(WgmmaMark) {}
__device__ __forceinline__ void timeline_stage(int) {}
#endif

// ---------------------------------------------------------------------------
// The kernel.
// ---------------------------------------------------------------------------

// kTwoGroups: groups of 32, two a stage (units 0-1 and 2-3); else one group
// covers the stage (groups of 64 or more, powers of two).
#if JAX_MARLIN_WGMMA_PRODUCER
// The producer's activation copy (sm_90): the box of 64 k x kRows rows,
// 128-byte swizzle, zeros past M and K, by the tensor map. (Codes and group
// words go by marlin_device.cuh's bulk_copy_to_shared, no cache hint.)
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// The ring's barriers, past the on-chip exchange's two (ring_free, halves_in:
// 16 B past the last slot), in the + 256 B the knob adds to the shared memory
// (wgmma_plan.h kBarrierBytes): full[slot] at full + 8 slot, then empty[slot].
struct RingBarriers {
  uint32_t full, empty;
};
template <int kRows>
__device__ __forceinline__ RingBarriers wgmma_ring_barriers(uint32_t smem_base) {
  using Cfg = WgmmaConfig<kRows>;
  static_assert(16 + 2 * 8 * Cfg::kStages <= Cfg::kBarrierBytes,
                "the exchange's and the ring's barriers fit the bytes added");
  const uint32_t full = smem_base + Cfg::kStages * Cfg::kStageBytes + 16;
  return {full, full + 8 * Cfg::kStages};
}

// setmaxnreg's budgets (multiples of 8 in [24, 256]). The CTA's pool is what
// the launch gave: the launch bounds' registers a thread (ptxas sets the
// kernel's count to that cap when the kernel holds setmaxnreg) x 384. inc
// blocks until the pool holds enough, so producer + 2 x consumer must not
// exceed 3 x launch, or the consumers wait forever. One 256-row block an SM:
// 65536 / 384 -> 168 a thread; 40 + 2 x 232 = 504 = 3 x 168. The consumers'
// 232 hold the 128 accumulators a thread of 256 rows with room (the cp.async
// ring's 256 threads take 240-244).
constexpr int kWgProducerRegs = 40;
constexpr int kWgConsumerRegs = 232;
constexpr int kWgLaunchRegs = 168;
static_assert(wgmma_blocks_per_sm(kWgProducerRows) == 1 &&
                  kWgProducerRegs + 2 * kWgConsumerRegs <= 3 * kWgLaunchRegs,
              "setmaxnreg.inc would wait for registers the pool never holds");
static_assert(!JAX_MARLIN_WGMMA_PRODUCER || kWgLaunchRegs == 65536 / kWgBlockThreads / 8 * 8,
              "the launch's registers a thread (384-thread blocks, one an SM): "
              "ptxas -v must report exactly this for the producer instances");

// How the consumers free a slot (-DJAX_MARLIN_WGMMA_RELEASE, for the producer
// build): 0 (default), every consumer thread arrives, its own arrive ordering
// its own shared loads of the slot before the producer's next copy into it
// (the empty barriers count 256); 1, each warpgroup meets a named barrier
// (bar.sync orders its 128 threads' loads) and the warpgroup's thread 0
// arrives (they count 2): fewer arrivals a stage, one more barrier. Lane 0 of
// each warp arriving, with or without a __syncwarp before it, drew racecheck
// hazards (session 22 calls F and G: ptxas drops the __syncwarp of a converged
// warp, so racecheck saw no order for lanes 1-31's loads). Session 23 call H:
// 0 reads 0 hazards; against 1 it is faster at 1024 x 8192 x 28672 (638.6
// against 646.6 us), within 1 us on four other 256-row shapes, and slower on
// 300 x 4096 x 4096 (38.6 against 36.7-38.5), timed before the tail map.
#ifndef JAX_MARLIN_WGMMA_RELEASE
#define JAX_MARLIN_WGMMA_RELEASE 0
#endif
constexpr int kWgReleaseArrivals = JAX_MARLIN_WGMMA_RELEASE ? kWgThreads / 128 : kWgThreads;

// A 16-bit load or store made only where `inside`, as one predicated
// instruction (no branch: stream-K's epilogue runs inside the segment loop).
template <typename T>
__device__ __forceinline__ T ldg_16_if(const T* src, bool inside) {
  static_assert(sizeof(T) == 2, "16-bit values");
  uint16_t bits = 0;
  asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %2, 0;\n@q ld.global.nc.u16 %0, [%1];\n}\n"
               : "+h"(bits)
               : "l"(src), "r"(static_cast<int>(inside)));
  T v;
  memcpy(&v, &bits, sizeof v);
  return v;
}
template <typename T>
__device__ __forceinline__ void stg_16_if(T* dst, T v, bool inside) {
  static_assert(sizeof(T) == 2, "16-bit values");
  uint16_t bits;
  memcpy(&bits, &v, sizeof bits);
  asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %2, 0;\n@q st.global.u16 [%0], %1;\n}\n"
               ::"l"(dst), "h"(bits), "r"(static_cast<int>(inside))
               : "memory");
}

__device__ __forceinline__ void stg_128_if(void* dst, uint4 v, bool inside) {
  asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\n"
               "@q st.global.v4.u32 [%0], {%1, %2, %3, %4};\n}\n"
               ::"l"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(static_cast<int>(inside))
               : "memory");
}

// A block's work, segment by segment, which the producer and the consumers
// walk alike: its grid cell (blockIdx: tile pair x, row block y, the k-split's
// stages), once; or with stream-K its list (wgmma_stream_k.h), tile t being
// tile pair t / m_blocks, row block t % m_blocks.
struct BlockSegment {
  int x, y;               // tile pair, row block
  int s_first, n_stages;  // its stages
  StreamKSegment sk;      // stream-K only: how it ends (store, publish, or add then store)
};

// The walk's start: the grid cell's one pass is iteration 0 of [0, 1).
__device__ __forceinline__ StreamKWalk first_walk(const StreamKSchedule& sk) {
  return sk.blocks ? stream_k_walk(sk, blockIdx.x) : StreamKWalk{0, 0, 1};
}

__device__ __forceinline__ bool next_block_segment(const WgmmaParams& p, const StreamKSchedule& sk,
                                                   StreamKWalk& walk, BlockSegment* seg) {
  if (sk.blocks == 0) {
    if (walk.i == walk.end) return false;
    ++walk.i;
    seg->x = blockIdx.x;
    seg->y = blockIdx.y;
    seg->s_first = blockIdx.z * p.stages_per_split;
    seg->n_stages = min(p.stages - seg->s_first, p.stages_per_split);
    return true;
  }
  if (!stream_k_next(sk, blockIdx.x, walk, &seg->sk)) return false;
  seg->x = seg->sk.tile / p.m_blocks;
  seg->y = seg->sk.tile - seg->x * p.m_blocks;
  seg->s_first = seg->sk.stage_begin;
  seg->n_stages = seg->sk.stage_end - seg->sk.stage_begin;
  return true;
}

// The producer warpgroup (threads 256..383 of a 256-row block).
// Warp 8 fills slot after slot as the consumers free them; warps 9-11 only
// take part in the block and cluster barriers (setmaxnreg needs the whole
// warpgroup) and exit. Everything is recomputed here from the parameters
// (constant bank) and threadIdx: nothing was live across setmaxnreg.
//
// A stage's copies, all completing on full[slot]:
//  - activations: one TMA box of 64 k x kRows rows at (64 s, m0), 128-byte
//    swizzle (the layout act_descriptor names); k past K is zero-filled and
//    counted. A ragged last row block (M % kRows rows) reads through the tail
//    map, whose box is its rows rounded up to 8 (tail_box_rows x 128 B): the
//    slot's rows past it keep stale bytes, which meet only output rows past M
//    (an activation row feeds its own output row alone), never stored;
//  - codes: per tile the stage's units, 512 B each, fewer in the last stage
//    (min(4, kt_total - 4 s)); the slot's stale codes past kt_total meet the
//    next item's zero scales;
//  - group words per group slot and tile: 128 B of scales, then 32 B of
//    packed zero points or 128 B of offsets. A group slot past k_blocks (the
//    second group of 32 in a last stage of two units, the only stage with
//    units past kt_total: k_pad is a multiple of 64 for groups of 64 and
//    more) is zeroed with plain stores before the stage's arrive, which
//    releases them: its units dequantize to exactly 0, as the cp.async
//    ring's zero fill makes them (the stale codes times a real scale could
//    overflow to Inf, and Inf x 0 activations is NaN).
//  - a tile past n_tiles copies nothing: its warpgroup's outputs are never
//    stored (nor pushed to a peer that stores them).
// expect_tx is the sum of exactly these copies' bytes.
template <typename T, ZeroPointKind kZP, int kRows, bool kTwoGroups>
__device__ __forceinline__ void wgmma_producer(const WgmmaParams& p, const StreamKSchedule& sk,
                                               const CUtensorMap* act_map,
                                               const CUtensorMap* tail_map) {
  using Cfg = WgmmaConfig<kRows>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t smem_base = (shared_address(smem_raw) + 1023u) & ~1023u;
  const RingBarriers bars = wgmma_ring_barriers<kRows>(smem_base);
  const int warp = threadIdx.x >> 5;
  // The prologue's barriers, as the consumers meet them: the cluster arrive
  // (the peer's epilogue waits for every non-exited thread of the cluster),
  // then the block barrier after thread 0's mbarrier setup.
  if (p.cluster_k) asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
  asm volatile("barrier.sync 0;\n" ::: "memory");
  if (warp == kWgThreads / 32) {
    // The maps live in parameter space (__grid_constant__): fetch their
    // descriptors into the TMA unit's cache before the first copy needs them.
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(act_map))
                 : "memory");
    if (p.tail_box_rows > 0)
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tail_map))
                   : "memory");
    constexpr int kGroups = kTwoGroups ? 2 : 1;
    constexpr uint32_t kZpBytes = kZP == ZeroPointKind::kPacked4 ? 32
                                  : kZP == ZeroPointKind::kOffset ? 128 : 0;
    const int log_group = __ffs(p.group_size) - 1;
    const T* scales = static_cast<const T*>(p.scales);
    int slot = 0;
    uint32_t phase = 0;
    // The block's segments, as the consumers walk them (the slot and phase
    // carry on from one to the next).
    StreamKWalk walk = first_walk(sk);
    BlockSegment seg;
    while (next_block_segment(p, sk, walk, &seg)) {
      const bool tail = p.tail_box_rows > 0 && seg.y + 1 == p.m_blocks;
      const CUtensorMap* map = tail ? tail_map : act_map;
      const uint32_t act_bytes = tail ? p.tail_box_rows * 128 : Cfg::kActBytes;
      const int tile0 = seg.x * kWgTiles;
      const int m0 = seg.y * kRows;  // < kWgmmaMaxM
      const int s_first = seg.s_first, n_stages = seg.n_stages;
      const int tiles = min(kWgTiles, p.n_tiles - tile0);  // 1 or 2
      for (int j = 0; j < n_stages; ++j) {
        // Wait until the consumers freed the slot. try_wait.parity(P) returns
        // once the phase of parity P has completed; a fresh barrier is in phase
        // 0, so waiting on parity 1 passes at once: the first kStages stages go
        // straight in, the (n+1)-th use of a slot waits for its n-th release.
        mbarrier_wait(bars.empty + 8 * slot, phase ^ 1);
        const int s = s_first + j;
        const uint32_t base = smem_base + slot * Cfg::kStageBytes;
        const uint32_t full = bars.full + 8 * slot;
        const uint32_t unit_bytes =
            min(kWgStageUnits, p.kt_total - kWgStageUnits * s) * kWgUnitBytes;
        // One lane issues (the copies are whole-block operations, not per
        // lane); elect.sync picks it without a lane-0 branch, around which
        // ptxas wraps each UBLKCP/UTMALDG in an ELECT/BRA.U.ANY loop.
        uint32_t elected;
        asm volatile("{\n.reg .pred e;\nelect.sync _|e, 0xffffffff;\nselp.u32 %0, 1, 0, e;\n}\n"
                     : "=r"(elected));
        if (elected) {
          // Group slots past k_blocks: zeros (kGroups - 1 at most, the last stage).
          const int group0 = (s * kWgStageK) >> log_group;
          const int groups_in = min(kGroups, p.k_blocks - group0);
#pragma unroll 1
          for (int jj = groups_in; jj < kGroups; ++jj)
            for (int tt = 0; tt < tiles; ++tt)
              for (uint32_t b = 0; b < 128 + kZpBytes; b += 16)
                sts_zero_128(base + Cfg::kActBytes + kWgCodesBytes +
                             (jj * kWgTiles + tt) * kWgGroupWordBytes + b);
          // Under stream-K the slot is filled again later, by a bulk copy (the
          // async proxy) after these generic stores: the proxy fence orders them.
          if (groups_in < kGroups) fence_proxy_async_shared();
          // The expected bytes, then the copies: the phase completes when this
          // one arrival and every byte have landed (complete_tx), which also
          // makes the bytes (and the zeros above, released by this arrive)
          // visible to the threads whose wait sees it.
          mbarrier_arrive_expect_tx(
              full, act_bytes + tiles * (unit_bytes + groups_in * (128 + kZpBytes)));
          tma_load_2d(base, map, s * kWgStageK, m0, full);
          // Not unrolled: each tile's addresses are then computed in the loop
          // from the parameters (constant bank), not hoisted out of the stage
          // loop as per-tile invariants that the producer's 32-40 registers
          // cannot hold (ptxas spilled them).
#pragma unroll 1
          for (int tt = 0; tt < tiles; ++tt) {
            const int64_t tile = tile0 + tt;
            bulk_copy_to_shared(base + Cfg::kActBytes + tt * (kWgStageUnits * kWgUnitBytes),
                            p.codes + (tile * p.kt_total + kWgStageUnits * s) * 128, unit_bytes,
                            full);
#pragma unroll
            for (int jj = 0; jj < kGroups; ++jj) {
              if (jj >= groups_in) break;
              const int64_t gi = group0 + jj;
              const uint32_t dst = base + Cfg::kActBytes + kWgCodesBytes +
                                   (jj * kWgTiles + tt) * kWgGroupWordBytes;
              bulk_copy_to_shared(dst, scales + gi * p.n_pad + tile * 64, 128, full);
              if constexpr (kZP == ZeroPointKind::kPacked4)
                bulk_copy_to_shared(dst + 128,
                                static_cast<const uint32_t*>(p.zero_points) + gi * (p.n_pad / 8) +
                                    tile * 8,
                                32, full);
              if constexpr (kZP == ZeroPointKind::kOffset)
                bulk_copy_to_shared(dst + 128,
                                static_cast<const T*>(p.zero_points) + gi * p.n_pad + tile * 64,
                                128, full);
            }
          }
        }
        __syncwarp();
        if (++slot == Cfg::kStages) {
          slot = 0;
          phase ^= 1;
        }
      }
    }
  }
  // No copy is waited for here: the consumers wait for every stage's bytes
  // (full), and the CTA (its shared memory) lives until they exit. Before
  // exiting, the cluster wait that pairs with the arrive above (each arrive
  // is followed by a wait before the thread's next arrive or its exit).
  if (p.cluster_k) asm volatile("barrier.cluster.wait;\n" ::: "memory");
}
#endif

// The epilogue's outputs, bias added (no k-split: a k-split's partials are
// fp32 and go to the workspace as they are). d[i] is output column 64 tile +
// 16 wg_warp + g + 8 ((i >> 1) & 1) of activation row m0 + 8 (i >> 2) + 2 q +
// (i & 1): adjacent output columns sit in adjacent lanes, so stored from
// registers each value is its own 2-byte store with its own 64-bit address and
// bounds checks, ~2,000 instructions a warp and 14% of the warp samples of a
// 256-row block at K = 4096 (ncu, session 25 call P). Instead each warpgroup's tile (kRows
// rows x 64 columns) is transposed into shared memory by stmatrix (16 a
// thread at 256 rows) and leaves as 16-byte row chunks, a warp's stores four
// whole 128-byte rows. The ring holds it: every wgmma of both warpgroups has
// completed (each waited for its own group; the block barrier below waits for
// the other warpgroup) and no copy is in flight (the producer's or the cp.async
// ring's, every stage waited for). Rows are kStagedRowBytes apart, 16 B more
// than 128, so that a tile's eight rows and a warp's 16-byte reads of four rows
// fall on distinct banks.
constexpr int kStagedRowBytes = 144;
// `staging` holds both warpgroups' tiles, kPassRows rows at a time (the grid:
// the whole ring, one pass; stream-K: the segment's last slot, which the
// producer may not refill yet, two passes of 128 rows). kPredicated (stream-K:
// this runs inside the segment loop, see end_stream_k_segment): the loads, the
// stores and the edge checks are predicated, with no branch on the thread.
// Else they branch: the grid's epilogue runs once, after the mainloop, and
// predicated there it cost the cp.async mainloop 24 instructions a stage
// (ISETPs ptxas no longer kept in predicate registers) and the 128-row
// cluster plan 6-9% (256 x 4096 x 4096, session 26 call S).
template <typename T, int kRows, int kPassRows = kRows, bool kPredicated = false>
__device__ __forceinline__ void store_outputs(const WgmmaParams& p, const float (&d)[kRows / 2],
                                              uint32_t staging, int tile, int64_t m0) {
  static_assert(kRows % kPassRows == 0 && kPassRows % 16 == 0, "passes of whole x4 groups");
  static_assert(kPredicated || kPassRows == kRows, "a branching epilogue returns after one pass");
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, wg_warp = (tid >> 5) & 3;
  const bool tile_in = tile < p.n_tiles;
  // The thread's two columns' bias (h = 0, 1: + 8 h), added in fp32 as
  // store_with_bias does; without one, -0 (x + -0 is x bit for bit, -0
  // included, where + 0 would turn -0 into +0), so that every value takes the
  // same one addition and no select (in stream-K's first build a select
  // between the sums and the plain values kept both sets live and spilled).
  const T* bias = static_cast<const T*>(p.bias);
  const int64_t n_lane = static_cast<int64_t>(tile) * 64 + 16 * wg_warp + (lane >> 2);
  float column_bias[2] = {-0.f, -0.f};
  if (bias != nullptr) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if constexpr (kPredicated)
        column_bias[h] =
            to_float<T>(ldg_16_if(bias + n_lane + 8 * h, tile_in && n_lane + 8 * h < p.N));
      else if (tile_in && n_lane + 8 * h < p.N)
        column_bias[h] = to_float<T>(bias[n_lane + 8 * h]);
  }
  T* out = static_cast<T*>(p.out);
  const bool whole_chunks = (p.N & 7) == 0;
  const int wt = tid & 127;
  const uint32_t region = staging + wg * (kPassRows * kStagedRowBytes);
  // x4 tile j (lane / 8): activation rows + 8 (j >> 1), columns + 8 (j & 1),
  // i.e. d[8 b + 2 j], d[8 b + 2 j + 1] for rows 16 b ..; lane's row t = lane % 8.
  const int j = lane >> 3;
  const uint32_t lane_row = region + ((j >> 1) * 8 + (lane & 7)) * kStagedRowBytes +
                            (16 * wg_warp + 8 * (j & 1)) * 2;
#pragma unroll
  for (int pass = 0; pass < kRows / kPassRows; ++pass) {
    // Both warpgroups are done with the staging bytes: the wgmmas that read
    // them, or the last pass's loads (id 3: 0 is the prologue's, 1-2 the
    // warpgroups' own; 256 = the consumers, the producer warps never meet it).
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
#pragma unroll
    for (int b = 0; b < kPassRows / 16; ++b) {
      const int i0 = 8 * (pass * kPassRows / 16 + b);
      uint32_t r[4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const float lo = d[i0 + 2 * jj], hi = d[i0 + 2 * jj + 1];
        r[jj] = pair_bits<T>(lo + column_bias[jj & 1], hi + column_bias[jj & 1]);
      }
      stmatrix_x4_trans(lane_row + b * 16 * kStagedRowBytes, r);
    }
    // The warpgroup's rows are in (immediate barrier ids: an id in a register
    // makes ptxas reserve all 16 hardware barriers).
    if (wg == 0)
      asm volatile("bar.sync 1, 128;\n" ::: "memory");
    else
      asm volatile("bar.sync 2, 128;\n" ::: "memory");
    // Chunk id = it x 128 + thread: row id / 8, columns 8 (id % 8) .. + 7 of
    // the tile. Rows start 16-byte aligned when N % 8 == 0 (XLA's buffers
    // are); else each chunk's values go one by one.
    if constexpr (!kPredicated) {
      if (!tile_in) return;
#pragma unroll 4
      for (int it = 0; it < kPassRows * 8 / 128; ++it) {
        const int id = it * 128 + wt;
        const int64_t m = m0 + (id >> 3);
        const int64_t n = static_cast<int64_t>(tile) * 64 + 8 * (id & 7);
        if (m >= p.M || n >= p.N) continue;
        const uint4 v = lds_128(region + (id >> 3) * kStagedRowBytes + (id & 7) * 16);
        T* dst = out + m * p.N + n;
        if (whole_chunks) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else {
          const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            if (n + e >= p.N) break;
            const uint16_t bits = static_cast<uint16_t>(w[e >> 1] >> (16 * (e & 1)));
            memcpy(dst + e, &bits, 2);
          }
        }
      }
    } else if (whole_chunks) {
      // Predicated, the two cases in loops of their own (inside the unrolled
      // one, the 8 stores a chunk spilled).
#pragma unroll 4
      for (int it = 0; it < kPassRows * 8 / 128; ++it) {
        const int id = it * 128 + wt;
        const uint4 v = lds_128(region + (id >> 3) * kStagedRowBytes + (id & 7) * 16);
        const int64_t m = m0 + pass * kPassRows + (id >> 3);
        const int64_t n = static_cast<int64_t>(tile) * 64 + 8 * (id & 7);
        stg_128_if(out + m * p.N + n, v, tile_in && m < p.M && n < p.N);
      }
    } else {
#pragma unroll 1
      for (int it = 0; it < kPassRows * 8 / 128; ++it) {
        const int id = it * 128 + wt;
        const uint4 v = lds_128(region + (id >> 3) * kStagedRowBytes + (id & 7) * 16);
        const int64_t m = m0 + pass * kPassRows + (id >> 3);
        const int64_t n = static_cast<int64_t>(tile) * 64 + 8 * (id & 7);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const uint16_t bits = static_cast<uint16_t>(w[e >> 1] >> (16 * (e & 1)));
          T value;
          memcpy(&value, &bits, 2);
          stg_16_if(out + m * p.N + n + e, value, tile_in && m < p.M && n + e < p.N);
        }
      }
    }
  }
}

// kProducer (256 rows only): the producer warpgroup's mainloop, else the
// cp.async ring's (every row count; at 256 rows the fallback and the tests'
// reference). With JAX_MARLIN_WGMMA_PRODUCER=0 the template has no kProducer
// and its SASS is the cp.async-only kernel's of session 21.
#if JAX_MARLIN_WGMMA_PRODUCER
#define JM_WG_PRODUCER_TPARAM , bool kProducer
#define JM_WG_PRODUCER_TARG(x) , x
#define JM_WG_KERNEL_THREADS (kProducer ? kWgBlockThreads : kWgThreads)
#else
#define JM_WG_PRODUCER_TPARAM
#define JM_WG_PRODUCER_TARG(x)
#define JM_WG_KERNEL_THREADS kWgThreads
#endif

template <typename T, ZeroPointKind kZP, int kRows, bool kTwoGroups JM_WG_PRODUCER_TPARAM>
__global__ void __launch_bounds__(JM_WG_KERNEL_THREADS, wgmma_blocks_per_sm(kRows))
    wgmma_gemm_kernel(const WgmmaParams p
#if JAX_MARLIN_WGMMA_PRODUCER
                      , const StreamKParams stream_k
                      , const __grid_constant__ CUtensorMap act_map
                      , const __grid_constant__ CUtensorMap tail_map
#endif
                      ) {
#ifdef JAX_MARLIN_HAS_WGMMA
#if !JAX_MARLIN_WGMMA_PRODUCER
  constexpr bool kProducer = false;
#endif
  static_assert(!kProducer || kRows == kWgProducerRows, "the producer runs 256-row blocks only");
  using Cfg = WgmmaConfig<kRows>;
  extern __shared__ unsigned char smem_raw[];
#if JAX_MARLIN_WGMMA_PRODUCER
  // The role split, first of all, so that no value is live across setmaxnreg
  // (ptxas must then keep it within the smaller of the two budgets, and
  // spilled or warned where it could not). Threads 256.. (warps 8-11, one
  // warpgroup: setmaxnreg is .sync.aligned per warpgroup) are the producer;
  // the branch is warp-uniform. Nothing but threadIdx is read before it.
  if constexpr (kProducer) {
    if (threadIdx.x >= kWgThreads) {
      // Give registers back to the CTA's pool before anything else: the
      // consumers' setmaxnreg.inc blocks until the pool holds what it asks
      // for, so this dec must run before any producer warp could exit.
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kWgProducerRegs) : "memory");
      wgmma_producer<T, kZP, kRows, kTwoGroups>(p, stream_k.schedule, &act_map, &tail_map);
      return;
    }
    // The two consumer warpgroups take what the producer released. Budget
    // (per-CTA pool, in registers a thread): launch x 3 warpgroups >=
    // producer + 2 x consumer (kWgConsumerRegs above).
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kWgConsumerRegs) : "memory");
  }
#endif
  // After the role split: the mark's block index read before it stayed live across
  // setmaxnreg and spilled four producer instances of the timeline build.
  timeline_mark(kWgMarkEntry);
  // The swizzle pattern is a function of the address bits 4-9, so the stages
  // start on 1024-byte boundaries (the descriptors' base offset is then 0).
  const uint32_t smem_base = (shared_address(smem_raw) + 1023u) & ~1023u;
  auto stage_at = [&](int slot) { return smem_base + slot * Cfg::kStageBytes; };
  constexpr int kCodesOffset = Cfg::kActBytes;
  constexpr int kWordsOffset = Cfg::kActBytes + kWgCodesBytes;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wg = warp >> 2;      // warpgroup: which of the block's two tiles
  const int wg_warp = warp & 3;  // warp in the warpgroup: columns 16 wg_warp .. + 15
  const int g = lane >> 2, q = lane & 3;
  const int tile0 = blockIdx.x * kWgTiles;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kRows;
#if __CUDA_ARCH__ >= 900
  // The on-chip split's exchange through mbarriers (the epilogue): two
  // barriers past the ring, in the bytes the base's 1024-alignment leaves
  // (>= 16: the dynamic base is 16-byte aligned). ring_free counts the
  // peer's threads saying that the peer's ring may be written; halves_in
  // counts the bytes of the peer's half landing in this ring. Set up now,
  // before the cluster arrive that the epilogue's wait pairs with, so that
  // the peer sees them initialized.
  constexpr uint32_t kHalfBytes = (kRows / 4) * 4 * kWgThreads;
  const uint32_t ring_free = smem_base + Cfg::kStages * Cfg::kStageBytes;
  const uint32_t halves_in = ring_free + 8;
  if (p.cluster_k) {
    if (tid == 0) {
      mbarrier_init(ring_free, kWgThreads);
      mbarrier_init(halves_in, 1);
      mbarrier_arrive_expect_tx(halves_in, kHalfBytes);
      fence_mbarrier_init();
    }
    asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
  }
#endif
#if JAX_MARLIN_WGMMA_PRODUCER
  // The ring's barriers (wgmma_ring_barriers): thread 0 sets them up; the
  // fence makes the initialization visible to the async proxy (the TMA and
  // bulk copies' complete_tx) and the block barrier, which the producer
  // warpgroup meets too (wgmma_producer), to every thread. The last barrier
  // of all 384 threads: the producer never meets another. Not .aligned:
  // the two roles reach it from different instructions.
  if constexpr (kProducer) {
    const RingBarriers bars = wgmma_ring_barriers<kRows>(smem_base);
    if (tid == 0) {
      for (int i = 0; i < Cfg::kStages; ++i) {
        mbarrier_init(bars.full + 8 * i, 1);  // the producer's arrive.expect_tx
        mbarrier_init(bars.empty + 8 * i, kWgReleaseArrivals);  // the consumers' release
      }
      fence_mbarrier_init();
    }
    asm volatile("barrier.sync 0;\n" ::: "memory");
  }
#endif
  timeline_mark(kWgMarkRingReady);
  // The k-split: this block's stages. Where the grid of column tiles and row
  // blocks alone leaves SMs idle (N = 4096 or 8192: 32 or 64 blocks), the
  // stages are cut into num_splits ranges, one a blockIdx.z.
  const int s_first = blockIdx.z * p.stages_per_split;
  const int n_stages = min(p.stages - s_first, p.stages_per_split);

  const T* __restrict__ a = static_cast<const T*>(p.a);
  const T* __restrict__ scales = static_cast<const T*>(p.scales);
  const uint32_t* __restrict__ packed_zp = static_cast<const uint32_t*>(p.zero_points);
  const T* __restrict__ offsets = static_cast<const T*>(p.zero_points);
  const int log_group = __ffs(p.group_size) - 1;
  constexpr int kGroups = kTwoGroups ? 2 : 1;

  // Stage s: k = 64 s .. 64 s + 63, units 4 s .. 4 s + 3 (fewer at the end of
  // k_pad), groups (64 s) / group_size onwards. Every copy past an edge (a
  // tile past n_tiles, a unit past kt_total, a row past M, k past K, a group
  // past k_blocks) is a zero-fill: 0 source bytes. Each thread's chunks are
  // fixed for the whole k-range, so their addresses are computed once here
  // and a stage only adds its offset (per-stage 64-bit index math was ~340
  // instructions a stage per thread, more than the dequant and MMAs).
  //
  // Codes: 2 tiles x 4 units x 512 B, one 16-byte chunk per thread.
  const int code_chunk = tid % 128, code_unit = code_chunk / 32;
  const bool code_tile_ok = tile0 + tid / 128 < p.n_tiles;
  const uint32_t* const code_src =
      p.codes + (static_cast<int64_t>(tile0 + tid / 128) * p.kt_total + code_unit) * 128 +
      (code_chunk % 32) * 4;
  const uint32_t code_dst = kCodesOffset + (tid / 128) * (kWgStageUnits * kWgUnitBytes) +
                            code_unit * kWgUnitBytes + (code_chunk % 32) * 16;
  // Activations: kRows rows x 8 chunks (8 of k each), kRows / 32 a thread,
  // swizzled: chunk c of row n at n * 128 + ((c ^ (n & 7)) << 4).
  constexpr int kActChunks = kRows * 8 / kWgThreads;
  const int act_c = tid % 8;
  const T* act_src[kActChunks];
  uint32_t act_dst[kActChunks];
  bool act_row_ok[kActChunks];
#pragma unroll
  for (int i = 0; i < kActChunks; ++i) {
    const int n = (tid + i * kWgThreads) / 8;
    act_row_ok[i] = m0 + n < p.M;
    act_src[i] = a + (act_row_ok[i] ? (m0 + n) * p.K : 0) + 8 * act_c;
    act_dst[i] = n * 128 + ((act_c ^ (n & 7)) << 4);
  }
  // Group words: per group slot j and tile, 8 chunks of scales, then 2
  // chunks of packed zero points or 8 of offsets; threads 0 .. kWordChunks - 1.
  constexpr int kZpChunks = kZP == ZeroPointKind::kOffset ? 8 : 2;
  constexpr int kChunksPerGroupTile = 8 + (kZP == ZeroPointKind::kImplicit ? 0 : kZpChunks);
  constexpr int kWordChunks = kWgMaxGroups * kWgTiles * kChunksPerGroupTile;
  const int word_j = tid / (kWgTiles * kChunksPerGroupTile);
  const int word_tt = (tid / kChunksPerGroupTile) % kWgTiles;
  const int word_c = tid % kChunksPerGroupTile;
  // A second group slot exists only for groups of 32.
  const bool word_ok = tid < kWordChunks && tile0 + word_tt < p.n_tiles &&
                       (word_j == 0 || kTwoGroups);
  const uint32_t word_dst = kWordsOffset + (word_j * kWgTiles + word_tt) * kWgGroupWordBytes +
                            (word_c < 8 ? 16 * word_c : 128 + 16 * (word_c - 8));
  // The chunk's source in group 0 and the distance between groups.
  const void* word_src;
  int64_t word_group_stride;  // bytes
  {
    const int64_t tile = tile0 + word_tt;  // tile * 64 past 2^31 at N > 2^31
    if (word_c < 8) {
      word_src = scales + tile * 64 + 8 * word_c;
      word_group_stride = p.n_pad * static_cast<int64_t>(sizeof(T));
    } else if (kZP == ZeroPointKind::kPacked4) {
      word_src = packed_zp + tile * 8 + 4 * (word_c - 8);
      word_group_stride = p.n_pad / 2;  // n_pad / 8 words of 4 bytes
    } else {
      word_src = offsets + tile * 64 + 8 * (word_c - 8);
      word_group_stride = p.n_pad * static_cast<int64_t>(sizeof(T));
    }
  }

  // Interior stages (all of their k < K, units < kt_total, hence groups <
  // k_blocks) take the copies without edge checks: each chunk's source is a
  // base valid for every such stage plus the stage's offset (one IMAD.WIDE),
  // and a chunk outside the tile or the rows copies 0 bytes from a valid
  // address. The checked path's selects and 64-bit compares were ~9
  // instructions a chunk, 72 of the 277 a stage per thread at 256 rows.
  const int interior_stages =
      static_cast<int>(min(p.K / kWgStageK, static_cast<int64_t>(p.kt_total / kWgStageUnits)));
  const unsigned char* const code_base =
      reinterpret_cast<const unsigned char*>(code_tile_ok ? code_src : p.codes);
  const int code_stride = code_tile_ok ? kWgStageUnits * 512 : 0;  // bytes a stage
  const int code_bytes = code_tile_ok ? 16 : 0;
  int act_bytes[kActChunks];
#pragma unroll
  for (int i = 0; i < kActChunks; ++i) act_bytes[i] = act_row_ok[i] ? 16 : 0;  // row 0 if not
  const unsigned char* const word_base =
      static_cast<const unsigned char*>(word_ok ? word_src : p.scales);
  const int64_t word_stride = word_ok ? word_group_stride : 0;
  const int word_bytes = word_ok ? 16 : 0;

  // Up to 64 rows, each source is base + index x stride with index and
  // stride known to be non-negative 32-bit values (s, gi; a stage's bytes, a
  // group's bytes: n_pad x 2 < 2^32), so that each address is one unsigned
  // wide multiply-add; signed, ptxas adds the sign's IMADs, SHFs and LEA
  // pairs: the 64-row instance executes 146 instructions a stage a thread, 42
  // of them this path, 31 so (ncu, session 28 call A). Measured (call B,
  // kernels alone): 32 x 8192 x 28672 -4%, 64 x 4096 x 4096 -2.5%, 64 x 8192 x
  // 28672 unmoved; at 128 rows 136.4 -> 138.9 us on 8192 x 28672 though its
  // loop lost 93 of 545 instructions, so 128 and 256 rows keep the signed form.
  // (The words' copy is asked for predicated, cp_async_16_if, as measured.)
  constexpr bool kUnsignedAddresses = kRows <= 64;
  const uint32_t word_stride32 = static_cast<uint32_t>(word_stride);
  auto at = [](const void* base, uint32_t index, uint32_t stride) {
    uint64_t address;
    asm("mad.wide.u32 %0, %1, %2, %3;\n"
        : "=l"(address)
        : "r"(index), "r"(stride), "l"(reinterpret_cast<uint64_t>(base)));
    return reinterpret_cast<const void*>(address);
  };
  auto load_interior_stage = [&](int s, uint32_t base) {
    if constexpr (kUnsignedAddresses) {
      const uint32_t su = static_cast<uint32_t>(s);
      cp_async_16(base + code_dst, at(code_base, su, code_stride), code_bytes);
#pragma unroll
      for (int i = 0; i < kActChunks; ++i)
        cp_async_16(base + act_dst[i], at(act_src[i], su, kWgStageK * sizeof(T)), act_bytes[i]);
      const uint32_t gi = ((su * kWgStageK) >> log_group) + word_j;
      cp_async_16_if(base + word_dst, at(word_base, gi, word_stride32), word_bytes,
                     tid < kWordChunks);
    } else {
      cp_async_16(base + code_dst, code_base + static_cast<int64_t>(s) * code_stride, code_bytes);
#pragma unroll
      for (int i = 0; i < kActChunks; ++i)
        cp_async_16(base + act_dst[i], act_src[i] + s * kWgStageK, act_bytes[i]);
      if (tid < kWordChunks) {
        const int gi = ((s * kWgStageK) >> log_group) + word_j;
        cp_async_16(base + word_dst, word_base + gi * word_stride, word_bytes);
      }
    }
  };

  auto load_stage = [&](int s, int slot) {
    const uint32_t base = stage_at(slot);
    if (s < interior_stages) {
      load_interior_stage(s, base);
      return;
    }
    const bool code_ok = code_tile_ok && 4 * s + code_unit < p.kt_total;
    cp_async_16(base + code_dst,
                code_ok ? code_src + static_cast<int64_t>(s) * (kWgStageUnits * 128) : p.codes,
                code_ok ? 16 : 0);
    const bool k_ok = static_cast<int64_t>(s) * kWgStageK + 8 * act_c < p.K;
#pragma unroll
    for (int i = 0; i < kActChunks; ++i) {
      const bool ok = act_row_ok[i] && k_ok;
      cp_async_16(base + act_dst[i], ok ? act_src[i] + s * kWgStageK : a, ok ? 16 : 0);
    }
    if (tid < kWordChunks) {
      const int gi = ((s * kWgStageK) >> log_group) + word_j;
      const bool ok = word_ok && gi < p.k_blocks;
      cp_async_16(base + word_dst,
                  ok ? static_cast<const unsigned char*>(word_src) + gi * word_group_stride
                     : word_src,
                  ok ? 16 : 0);
    }
  };

  float d[kRows / 2];
#pragma unroll
  for (int i = 0; i < kRows / 2; ++i) d[i] = 0.f;

  // A stage's shared loads: the lane's code word of each unit (word wg_warp
  // of its 16 bytes of a unit: columns 16 wg_warp + g (+ 8) at k 2q, 2q + 1,
  // 2q + 8, 2q + 9) and its group words: its first group (units 0-3, or 0-1
  // for groups of 32) and, for groups of 32, its second (units 2-3). Lane
  // group g's eight scales (columns 16 j + 8 h + g, position 2 j + h) are the
  // 16 bytes at 16 g of a group's words, its packed zero points word g (nibble
  // 2 j + h), its offsets the 16 bytes at 128 + 16 g. This warp needs j =
  // wg_warp only: that pair is moved to position 0, so the constants are
  // indexed statically (a runtime index puts them in local memory).
  struct StageWords {
    uint32_t code[kWgStageUnits];
    uint32_t scale_pair[kGroups], zp_pair[kGroups], offset_pair[kGroups];
  };
  const uint32_t code_read = kCodesOffset + wg * (kWgStageUnits * kWgUnitBytes) + lane * 16 +
                             wg_warp * 4;
  const uint32_t words_read = kWordsOffset + wg * kWgGroupWordBytes;
  auto load_words = [&](uint32_t base) {
    StageWords w;
#pragma unroll
    for (int u = 0; u < kWgStageUnits; ++u) w.code[u] = lds_32(base + code_read + u * kWgUnitBytes);
#pragma unroll
    for (int i = 0; i < kGroups; ++i) {
      const uint32_t words = base + words_read + i * kWgTiles * kWgGroupWordBytes;
      w.scale_pair[i] = lds_32(words + 16 * g + 4 * wg_warp);
      w.zp_pair[i] = w.offset_pair[i] = 0;
      if constexpr (kZP == ZeroPointKind::kPacked4)
        w.zp_pair[i] = lds_32(words + 128 + 4 * g) >> (8 * wg_warp);
      if constexpr (kZP == ZeroPointKind::kOffset)
        w.offset_pair[i] = lds_32(words + 128 + 16 * g + 4 * wg_warp);
    }
    return w;
  };
  // A stage's words to its A registers: the group constants, then each unit's
  // code word dequantized, the scale applied to A before the MMA.
  auto dequantize_stage = [&](const StageWords& w, uint32_t (&frag)[kWgStageUnits][4]) {
    GroupConstants gc[kGroups];
#pragma unroll
    for (int i = 0; i < kGroups; ++i)
      make_group_constants<T, kZP>(gc[i], make_uint4(w.scale_pair[i], 0, 0, 0), w.zp_pair[i],
                                   make_uint4(w.offset_pair[i], 0, 0, 0));
#pragma unroll
    for (int u = 0; u < kWgStageUnits; ++u) {
      uint32_t col_lo[2], col_hi[2];  // columns +g and +g+8: k 2q.., k 2q+8..
      dequant_word<T, kZP>(w.code[u], gc[kTwoGroups && u >= 2 ? 1 : 0], 0, col_lo, col_hi);
      // The A fragment's order: (row g, k lo), (row g+8, k lo), (row g, k hi), (row g+8, k hi).
      frag[u][0] = col_lo[0];
      frag[u][1] = col_hi[0];
      frag[u][2] = col_lo[1];
      frag[u][3] = col_hi[1];
    }
  };

#if JAX_MARLIN_WGMMA_PRODUCER
  // A stream-K segment's end (wgmma_stream_k.h): a whole tile is stored; a
  // partial (the tail stages of a tile another block owns) goes to this
  // block's slot of the workspace, thread t's 128 floats as float4 c at c x
  // 256 + t (a warp's stores one 512-byte run), and the block's flag says so;
  // the owner (stage 0 on) adds its peers' partials in block order, the same
  // additions in the same order every run, then stores.
  // Ordering: the publishers' stores, the consumers' named barrier (id 3:
  // 1-2 are the release's, 0 the prologue's; only the 256 consumer threads
  // meet it), then each thread's release of the flag at GPU scope, cumulative
  // over every store the barrier ordered before it; each owner thread
  // acquires the flag itself before it loads. No branch here depends on the
  // thread: this runs inside the segment loop, and a divergent branch there
  // (a thread-0 flag store, a thread-0 spin) cost the mainloop its uniform
  // registers (slot addresses and wgmma descriptors through R2UR, BSSY and
  // WARPSYNC around every full-barrier wait): 18-40% slower (session 24 call
  // N). The spin's exit is a warp vote, uniform in the warp.
  // Progress: an owner waits only on blocks after it, and each block publishes
  // its one partial before it can wait (its run's first segment). With every
  // persistent block resident at once (one a slot, at most one an SM) the walk
  // always finishes. On a GPU shared with a kernel that holds SMs and never
  // yields them, a peer may wait for a slot while its owner spins; the spin is
  // unbounded, so that case hangs rather than returning a wrong sum.
  constexpr int kStreamKPassRows = kRows < 128 ? kRows : 128;
  auto end_stream_k_segment = [&](const StreamKSegment& sk, int tile, int64_t row0,
                                  uint32_t staging) {
    static_assert(!kProducer || kRows / 2 * kWgThreads == kStreamKPartialFloats,
                  "a partial slot holds a tile's accumulators");
    uint32_t* flags = reinterpret_cast<uint32_t*>(stream_k.workspace);
    float* partials = stream_k.workspace + kStreamKFlagFloats;
    if (!sk.whole && !sk.owner) {
      float4* mine = reinterpret_cast<float4*>(
          partials + static_cast<int64_t>(blockIdx.x) * kStreamKPartialFloats);
#pragma unroll
      for (int c = 0; c < kRows / 8; ++c)
        __stcg(mine + c * kWgThreads + tid,
               make_float4(d[4 * c], d[4 * c + 1], d[4 * c + 2], d[4 * c + 3]));
      asm volatile("bar.sync 3, 256;\n" ::: "memory");
      asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flags + blockIdx.x), "r"(1u)
                   : "memory");
      return;
    }
    if (sk.owner) {
      for (int peer = sk.first_peer; peer <= sk.last_peer; ++peer) {
        for (;;) {
          uint32_t published;
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n"
                       : "=r"(published)
                       : "l"(flags + peer)
                       : "memory");
          if (__all_sync(0xffffffffu, published != 0)) break;
          __nanosleep(100);
        }
        const float4* theirs = reinterpret_cast<const float4*>(
            partials + static_cast<int64_t>(peer) * kStreamKPartialFloats);
#pragma unroll
        for (int c = 0; c < kRows / 8; ++c) {
          const float4 v = __ldcg(theirs + c * kWgThreads + tid);
          d[4 * c] += v.x;
          d[4 * c + 1] += v.y;
          d[4 * c + 2] += v.z;
          d[4 * c + 3] += v.w;
        }
      }
    }
    // The tile leaves through `staging` (the segment's last slot, still
    // held) in two passes of 128 rows, its stores predicated (see above).
    static_assert(!kProducer || kWgTiles * kStreamKPassRows * kStagedRowBytes <= Cfg::kStageBytes,
                  "a pass of both warpgroups' rows fits a slot");
    store_outputs<T, kRows, kStreamKPassRows, true>(p, d, staging, tile, row0);
  };

  if constexpr (kProducer) {
  // Consumers: wait for a slot's full barrier, load, dequantize, multiply;
  // after stage s's wgmma wait (stage s - 1's group done), every consumer
  // thread frees stage s - 1's slot. (256 rows load a stage's words in the
  // stage, as the cp.async ring does there: no early loads.)
  static_assert(!Cfg::kEarlyLoads, "the producer's consumers load each stage's words in it");
  const RingBarriers bars = wgmma_ring_barriers<kRows>(smem_base);
  int read_slot = 0, release_slot = 0;
  uint32_t read_phase = 0;
  auto next_slot = [](int slot) { return slot + 1 == Cfg::kStages ? 0 : slot + 1; };
  // The slot's release (JAX_MARLIN_WGMMA_RELEASE above says why so).
  auto release = [&] {
    if constexpr (JAX_MARLIN_WGMMA_RELEASE != 0) {
      // Immediate ids (1, 2; barrier 0 is the prologue's): an id in a register
      // makes ptxas reserve all 16 hardware barriers for the kernel.
      if (wg == 0)
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
      else
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
      if (threadIdx.x % 128 == 0) mbarrier_arrive(bars.empty + 8 * release_slot);
    } else {
      mbarrier_arrive(bars.empty + 8 * release_slot);
    }
    release_slot = next_slot(release_slot);
  };
  auto compute_stage = [&](int s, uint32_t (&frag)[kWgStageUnits][4]) {
    const uint32_t base = stage_at(read_slot);
    mbarrier_wait(bars.full + 8 * read_slot, read_phase);
    if (s == 0) timeline_mark(kWgMarkFirstStage);
    const StageWords w = load_words(base);
    read_slot = next_slot(read_slot);
    if (read_slot == 0) read_phase ^= 1;
    dequantize_stage(w, frag);
    wgmma_stage<T, kRows>(d, frag, act_descriptor(base));
    timeline_stage(s);
    if (s > 0) release();
  };
  uint32_t frag_even[kWgStageUnits][4], frag_odd[kWgStageUnits][4];
  // The block's segments, as the producer walks them: the grid cell's one, or
  // stream-K's list, each ended here (store, publish, or add then store).
  // Each segment starts from zero accumulators, the grid cell's one too: a
  // zeroing under `if (stream_k.schedule.blocks)` made ptxas serialize the
  // mainloop's wgmmas (warning C7515; tests/test_sass.py checks it does not).
  StreamKWalk walk = first_walk(stream_k.schedule);
  BlockSegment seg;
  while (next_block_segment(p, stream_k.schedule, walk, &seg)) {
#pragma unroll
    for (int i = 0; i < kRows / 2; ++i) d[i] = 0.f;
    int s = 0;
    for (; s + 1 < seg.n_stages; s += 2) {
      compute_stage(s, frag_even);
      compute_stage(s + 1, frag_odd);
    }
    if (s < seg.n_stages) compute_stage(s, frag_even);
    // Every stage's full barrier was waited for by every consumer thread: no
    // copy of this segment is in flight (the on-chip split's peer may push
    // into the ring once every consumer says so). Under stream-K the producer
    // may be filling released slots for the next segment, never a held one.
    wgmma_wait<0>();
    timeline_mark(kWgMarkLoopEnd);
    if (stream_k.schedule.blocks == 0) break;  // the grid cell's epilogue, below
    // The segment's last slot (release_slot, not yet released) stages a
    // stored tile; then the producer may fill it for the next segment, its
    // bulk copies (the async proxy) after these generic accesses: the fence.
    end_stream_k_segment(seg.sk, seg.x * kWgTiles + wg, seg.y * kRows, stage_at(release_slot));
    fence_proxy_async_shared();
    release();
  }
  if (stream_k.schedule.blocks) {
    timeline_mark(kWgMarkExit);
    return;
  }
  } else
#endif
  {
  // The ring: Cfg::kLead stages copied ahead of the one computed, and the
  // wgmmas of one stage still running while the next is dequantized (one
  // wgmma commit group per stage, wait_group 1). So at a barrier before stage
  // s the slots refilled are stage s - 2's (and, with two stages a barrier,
  // s - 3's): every warp waited for their wgmmas by the end of stage s - 1,
  // before this barrier, and (with early loads) read their words by stage
  // s - 3. One cp.async group a stage, empty ones past the end.
  static_assert(Cfg::kStages == Cfg::kLead + Cfg::kStagesPerBarrier + 1,
                "the slots refilled at a barrier before stage s are stage s - 2's (and s - 3's)");
#pragma unroll
  for (int s = 0; s < Cfg::kLead; ++s) {
    if (s < n_stages) load_stage(s_first + s, s);
    cp_async_commit();  // (empty groups past the end keep the count)
  }

  // One stage, its A registers in `frag` (two sets, alternating by stage, so
  // that stage s - 1's wgmmas may still read theirs). Branch-free: units past
  // kt_total (the last stage of a k_pad not a multiple of 64) multiply
  // zero-filled activations and zero scales.
  // The slots read and refilled advance by one a stage, wrapping: counters,
  // not s % Cfg::kStages and a recomputed base every stage.
  int read_slot = 0, fill_slot = Cfg::kLead;
  auto next_slot = [](int slot) { return slot + 1 == Cfg::kStages ? 0 : slot + 1; };
  // With early loads, the words of the stage computed next (stage 0's first).
  StageWords next_words{};
  if constexpr (Cfg::kEarlyLoads) {
    cp_async_wait<Cfg::kLead - 1>();
    __syncthreads();
    next_words = load_words(stage_at(0));
  }

  auto compute_stage = [&](int s, uint32_t (&frag)[kWgStageUnits][4], bool barrier) {
    if (barrier) {
      // Stages s .. s + kLanded - 1 have landed for this thread; the fence
      // hands their writes to the async proxy (wgmma reads the activations
      // there), the barrier to all. Then the slots every warp is done with.
      cp_async_wait<Cfg::kInFlight>();
      fence_proxy_async_shared();
      __syncthreads();
      if (s == 0) timeline_mark(kWgMarkFirstStage);
#pragma unroll
      for (int i = 0; i < Cfg::kStagesPerBarrier; ++i) {
        if (s + Cfg::kLead + i < n_stages) load_stage(s_first + s + Cfg::kLead + i, fill_slot);
        cp_async_commit();
        fill_slot = next_slot(fill_slot);
      }
    }

    const uint32_t base = stage_at(read_slot);
    read_slot = next_slot(read_slot);
    StageWords w;
    if constexpr (Cfg::kEarlyLoads) {
      w = next_words;
      // Stage s + 1's words (past the last stage: a slot's stale bytes, unused).
      next_words = load_words(stage_at(read_slot));
    } else {
      w = load_words(base);
    }
    dequantize_stage(w, frag);
    // Stage s - 1's group is done when this returns: its slot and its A
    // registers are free.
    wgmma_stage<T, kRows>(d, frag, act_descriptor(base));
    timeline_stage(s);
  };

  // Stages in pairs, the odd one unconditional: with a conditional stage in
  // the loop body ptxas serializes every wgmma (warning C7513), and the two
  // register sets collapse into one.
  uint32_t frag_even[kWgStageUnits][4], frag_odd[kWgStageUnits][4];
  int s = 0;
  for (; s + 1 < n_stages; s += 2) {
    compute_stage(s, frag_even, true);
    compute_stage(s + 1, frag_odd, Cfg::kStagesPerBarrier == 1);
  }
  if (s < n_stages) compute_stage(s, frag_even, true);
  wgmma_wait<0>();
  cp_async_wait<0>();
  timeline_mark(kWgMarkLoopEnd);
  }

  // Epilogue: d[i] is output column 64 tile + 16 wg_warp + g + 8 ((i >> 1) & 1)
  // of activation row m0 + 8 (i >> 2) + 2 q + (i & 1).
  // With a k-split in clusters the halves add on chip (below); with any other
  // k-split the fp32 partial goes to the workspace (every column of the tile is
  // < n_pad) and LaunchSplitKReduce adds the splits and the bias; without one
  // the tile leaves through shared memory (store_outputs), as a cluster's kept
  // half does.
  const int tile = tile0 + wg;
#if __CUDA_ARCH__ >= 900
  // p.cluster_k, asked of the hardware here: read from the parameter, its
  // predicate was kept from the prologue across the mainloop, and spilled in
  // three of the producer's instances once the kept half left through
  // store_outputs (a cluster of 2 is launched exactly when p.cluster_k).
  uint32_t cluster_blocks;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(cluster_blocks));
  if (cluster_blocks > 1) {
    // The k-split's two blocks of this tile pair are a cluster (1, 1, 2): every
    // thread of both holds the same outputs (same tiles, same rows, its half of
    // k). Rank r keeps rows m0 + [r kRows / 2, (r + 1) kRows / 2), i.e. d[i]
    // for i in [r kHalf, (r + 1) kHalf), and sends the other half into its
    // peer's ring, chunk c of 4 values at (c x threads + tid) x 16 bytes: a
    // warp's 16-byte stores are consecutive. The sum is rank 0's + rank 1's
    // whoever adds it (fp32 addition commutes): the bits of the reduce kernel.
    constexpr int kHalf = kRows / 4;
    static_assert(kHalf % 4 == 0 && kHalf * 4 * kWgThreads <= Cfg::kSmemBytes - 1024,
                  "the peer's half fits the ring");
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    // Why mbarriers and st.async rather than two cluster barriers around plain
    // remote stores (as fast, session 20 call A): racecheck did not follow the
    // cluster barriers' ordering and reported 0-16 hazards a run between the
    // ring's copies and the peer's stores; on these release/acquire edges it
    // reports none.
    // The peer's barriers are set up (its prologue's arrive). This thread's
    // wgmmas and copies have completed (waited for above): it tells the peer
    // that its share of this ring is free, releasing at cluster scope, and
    // waits until every thread of the peer has said so of the peer's ring.
    // The pushes then count on the peer's halves_in, and this block reads
    // its own ring once the peer's kHalfBytes have landed. Neither block
    // touches the other's shared memory after the other's last wait.
    asm volatile("barrier.cluster.wait;\n" ::: "memory");
    mbarrier_arrive_peer(peer_shared_address(ring_free, rank ^ 1u));
    mbarrier_wait_cluster(ring_free, 0);
    const uint32_t peer = peer_shared_address(smem_base, rank ^ 1u);
    const uint32_t peer_halves_in = peer_shared_address(halves_in, rank ^ 1u);
    static_assert(kHalfBytes == kHalf * 4 * kWgThreads, "the bytes halves_in expects");
#pragma unroll
    for (int c = 0; c < kHalf / 4; ++c) {
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = rank ? d[4 * c + e] : d[kHalf + 4 * c + e];
      st_async_16(peer + (c * kWgThreads + tid) * 16, make_float4(v[0], v[1], v[2], v[3]),
                  peer_halves_in);
    }
    mbarrier_wait_cluster(halves_in, 0);
    timeline_mark(kWgMarkExchanged);
    // The kept half is a block of kRows / 2 rows in the accumulators' layout
    // (index i of it is row 8 (i >> 2) + 2 q + (i & 1) of m0 + r kRows / 2),
    // so it leaves as the grid's tiles do: staged by stmatrix in this ring
    // past the peer's half, then 16-byte row chunks. Stored from registers,
    // each value was a 2-byte store with its own address and bounds checks.
    // The sums go in place, into d[0, kHalf) (rank 1's own half is d[kHalf, ..)).
#pragma unroll
    for (int c = 0; c < kHalf / 4; ++c) {
      const uint4 got = lds_128(smem_base + (c * kWgThreads + tid) * 16);
      const float peer_v[4] = {__uint_as_float(got.x), __uint_as_float(got.y),
                               __uint_as_float(got.z), __uint_as_float(got.w)};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * c + e;
        d[i] = (rank ? d[kHalf + i] : d[i]) + peer_v[e];
      }
    }
    static_assert(kHalfBytes + kWgTiles * (kRows / 2) * kStagedRowBytes <=
                      Cfg::kStages * Cfg::kStageBytes,
                  "the peer's half and both warpgroups' kept rows fit the ring");
    store_outputs<T, kRows / 2>(p, reinterpret_cast<const float(&)[kHalf]>(d),
                                smem_base + kHalfBytes, tile, m0 + rank * (kRows / 2));
    timeline_mark(kWgMarkExit);
    return;
  }
#endif
  if (p.num_splits == 1) {
    static_assert(kWgTiles * kRows * kStagedRowBytes <= Cfg::kStages * Cfg::kStageBytes,
                  "both warpgroups' tiles fit the ring");
    store_outputs<T, kRows>(p, d, smem_base, tile, m0);
  } else if (tile < p.n_tiles) {
    float* partial = p.workspace + static_cast<int64_t>(blockIdx.z) * p.M * p.n_pad;
#pragma unroll
    for (int i = 0; i < kRows / 2; ++i) {
      const int64_t m = m0 + 8 * (i >> 2) + 2 * q + (i & 1);
      const int64_t n = static_cast<int64_t>(tile) * 64 + 16 * wg_warp + g + 8 * ((i >> 1) & 1);
      if (m < p.M) partial[m * p.n_pad + n] = d[i];
    }
  }
  timeline_mark(kWgMarkExit);
#else
  __trap();  // never launched: LaunchWgmmaGemm checks that the sm_90a code is loaded
#endif
}

// The launch's parameters but the split: operands, shape and stages.
WgmmaParams shape_params(const MarlinGemmArgs& args) {
  WgmmaParams p{};
  copy_operands(args, &p);
  p.kt_total = static_cast<int>(args.k_pad / 16);
  p.n_tiles = static_cast<int>(args.n_pad / 64);
  p.k_blocks = static_cast<int>(args.k_blocks);
  p.group_size = static_cast<int>(args.group_size);
  p.stages = wgmma_stages(args);
  return p;
}

#if JAX_MARLIN_WGMMA_PRODUCER
// cuTensorMapEncodeTiled through the runtime's driver entry point: no link
// against libcuda, asked once a process. Encoding is host arithmetic only
// (no allocation, no synchronization), so it may run in the FFI handler and
// under stream capture (the map is a by-value kernel parameter).
using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;
EncodeTiled tensor_map_encoder() {
  static const EncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(fn);
  }();
  return encode;
}

// A [M, K] (16-bit elements, rows K * 2 bytes apart, K % 8 == 0 so 16-byte
// aligned) in boxes of 64 k x `rows` rows, 128-byte swizzle: chunk c of box
// row n lands at n * 128 + ((c ^ (n & 7)) << 4), the layout the descriptor
// names; elements past M or K read as zeros (the cp.async path's zero fill).
cudaError_t encode_activations(const WgmmaParams& p, int rows, CUtensorMap* map) {
  const EncodeTiled encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(p.K), static_cast<cuuint64_t>(p.M)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(p.K) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kWgStageK), static_cast<cuuint32_t>(rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(p.a), dims,
                            strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
#endif

// `p` carries the plan's split; kRows is the plan's rows. kUseProducer (256
// rows): the producer warpgroup's mainloop, 384 threads and the
// activations' tensor map; else the cp.async ring's, 256 threads (its
// __syncthreads count every launched thread: the producer's warps must not
// be launched with it).
template <typename T, ZeroPointKind kZP, int kRows, bool kTwoGroups, bool kUseProducer>
cudaError_t launch_rows(const WgmmaParams& p, const StreamKParams& stream_k,
                        const WgmmaGridInfo& plan, const DeviceLimits& device,
                        cudaStream_t stream) {
  constexpr auto kernel =
      wgmma_gemm_kernel<T, kZP, kRows, kTwoGroups JM_WG_PRODUCER_TARG(kUseProducer)>;
  constexpr int threads = kUseProducer ? kWgBlockThreads : kWgThreads;
  if (cudaError_t err = configure_shared_memory<kernel>(device); err != cudaSuccess) return err;
  // Stream-K: one persistent block an SM walking its list; else one a tile.
  const dim3 grid = plan.stream_k_blocks > 0
                        ? dim3(static_cast<unsigned>(plan.stream_k_blocks))
                        : dim3(static_cast<unsigned>(plan.n_blocks),
                               static_cast<unsigned>(plan.m_blocks),
                               static_cast<unsigned>(plan.splits));
#if JAX_MARLIN_WGMMA_PRODUCER
  CUtensorMap act_map{}, tail_map{};  // the cp.async mainloop never reads them
  WgmmaParams q = p;
  if constexpr (kUseProducer) {
    if (stream_k.schedule.blocks > 0) {
      // The flags start unpublished: XLA hands the workspace over with
      // whatever it last held. A memset node under graph capture.
      if (cudaError_t err = cudaMemsetAsync(stream_k.workspace, 0,
                                            kStreamKFlagFloats * sizeof(float), stream);
          err != cudaSuccess)
        return err;
    }
    if (cudaError_t err = encode_activations(p, kRows, &act_map); err != cudaSuccess) return err;
    // A ragged last row block through a map of its own rows: with the grid's
    // box it copied mostly zero fill, and its grid ran 20-50% slower (300 x
    // 4096 x 4096: 37.0 against 26.1 us, session 23 calls I and K).
    const int tail = static_cast<int>(p.M % kRows);
    if (tail != 0) {
      q.tail_box_rows = (tail + 7) / 8 * 8;
      if (cudaError_t err = encode_activations(p, q.tail_box_rows, &tail_map); err != cudaSuccess)
        return err;
    }
  }
#define JM_WG_ARGS q, stream_k, act_map, tail_map
#else
#define JM_WG_ARGS p
#endif
  if (p.cluster_k) {  // the two splits of a tile pair: one cluster
    const ClusterLaunch launch(grid, dim3(1, 1, 2), threads, plan.smem_bytes, stream);
    return cudaLaunchKernelEx(&launch.config, kernel, JM_WG_ARGS);
  }
  kernel<<<grid, threads, plan.smem_bytes, stream>>>(JM_WG_ARGS);
#undef JM_WG_ARGS
  return cudaGetLastError();
}

// The kernel of the plan's rows.
template <typename T, ZeroPointKind kZP, bool kTwoGroups>
cudaError_t launch_cp_async_rows(const WgmmaParams& p, const WgmmaGridInfo& plan,
                                 const DeviceLimits& device, cudaStream_t stream) {
  constexpr StreamKParams kNoStreamK{};  // the cp.async ring runs grids only
  switch (plan.rows) {
    case 32:
      return launch_rows<T, kZP, 32, kTwoGroups, false>(p, kNoStreamK, plan, device, stream);
    case 64:
      return launch_rows<T, kZP, 64, kTwoGroups, false>(p, kNoStreamK, plan, device, stream);
    case 128:
      return launch_rows<T, kZP, 128, kTwoGroups, false>(p, kNoStreamK, plan, device, stream);
    case 256:
      return launch_rows<T, kZP, 256, kTwoGroups, false>(p, kNoStreamK, plan, device, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T, ZeroPointKind kZP, bool kTwoGroups>
cudaError_t launch_planned_rows(const WgmmaParams& p, const StreamKParams& stream_k,
                                const WgmmaGridInfo& plan, const DeviceLimits& device,
                                cudaStream_t stream) {
#if JAX_MARLIN_WGMMA_PRODUCER
  // Only 256-row plans take the producer (launched_plan), so only they are
  // built with it.
  if (plan.producer)
    return launch_rows<T, kZP, kWgProducerRows, kTwoGroups, true>(p, stream_k, plan, device,
                                                                  stream);
#endif
  return launch_cp_async_rows<T, kZP, kTwoGroups>(p, plan, device, stream);
}

template <typename T, ZeroPointKind kZP>
cudaError_t launch_zero_points(const WgmmaParams& p, const StreamKParams& stream_k,
                               const WgmmaGridInfo& plan, const DeviceLimits& device,
                               cudaStream_t stream) {
  return p.group_size == 32
             ? launch_planned_rows<T, kZP, true>(p, stream_k, plan, device, stream)
             : launch_planned_rows<T, kZP, false>(p, stream_k, plan, device, stream);
}

// Whether this module carries sm_90a code for the kernel and the device runs
// it: the file is compiled for sm_90a alone, so the attributes query succeeds
// only where that code loads (exactly compute capability 9.0). Asked once.
bool wgmma_code_loaded(const DeviceLimits& device) {
  if (device.compute_capability != 90) return false;
  static std::atomic<int> known[kMaxCachedDevices];
  return cached_per_device(known, device.ordinal, [] {
    cudaFuncAttributes attributes{};
    const bool loaded =
        cudaFuncGetAttributes(&attributes, wgmma_gemm_kernel<__half, ZeroPointKind::kPacked4, 64,
                                                             false JM_WG_PRODUCER_TARG(false)>) ==
        cudaSuccess;
    if (!loaded) cudaGetLastError();  // not an error of the launch to come
    return loaded;
  });
}

#if JAX_MARLIN_WGMMA_PRODUCER
// The producer's register hand-off uses the block's pool exactly (40 + 2 x 232
// = 3 x 168): were a kernel compiled to fewer than kWgLaunchRegs a thread, the
// consumers' setmaxnreg.inc would wait forever. So every producer instance's
// count is read once, and a mismatch plans the cp.async ring instead.
template <typename T, ZeroPointKind kZP, bool kTwoGroups>
bool producer_registers_as_budgeted() {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes,
                            wgmma_gemm_kernel<T, kZP, kWgProducerRows, kTwoGroups, true>) !=
      cudaSuccess) {
    cudaGetLastError();  // not an error of the launch to come
    return false;
  }
  return attributes.numRegs == kWgLaunchRegs;
}

template <ZeroPointKind kZP>
bool producer_registers_as_budgeted_for() {
  return producer_registers_as_budgeted<__half, kZP, false>() &&
         producer_registers_as_budgeted<__half, kZP, true>() &&
         producer_registers_as_budgeted<__nv_bfloat16, kZP, false>() &&
         producer_registers_as_budgeted<__nv_bfloat16, kZP, true>();
}

bool producer_registers_ok(const DeviceLimits& device) {
  static std::atomic<int> known[kMaxCachedDevices];
  return cached_per_device(known, device.ordinal, [] {
    return producer_registers_as_budgeted_for<ZeroPointKind::kImplicit>() &&
           producer_registers_as_budgeted_for<ZeroPointKind::kPacked4>() &&
           producer_registers_as_budgeted_for<ZeroPointKind::kOffset>();
  });
}
#endif

}  // namespace

bool WgmmaGemmApplies(const MarlinGemmArgs& args, const DeviceLimits& device) {
  return args.M >= kWgmmaMinM && args.M <= kWgmmaMaxM && args.group_size >= 32 &&
         args.k_pad / 16 <= INT32_MAX / 16 &&
         WgmmaConfig<256>::kSmemBytes <= device.max_shared_bytes_per_block &&
         wgmma_code_loaded(device);
}

namespace {
// The grid, with the on-chip split turned into partials and the reduce kernel
// where asked (the workspace holds them: the plan's 2 splits came from it).
// The mainloop: the producer warpgroup's at 256 rows (wgmma_plan.h), unless
// a test forces the cp.async ring (kForceWgmmaCpAsync), the runtime has no
// cuTensorMapEncodeTiled or a producer kernel's registers are not the budget's
// (then the cp.async ring, the same bits).
WgmmaGridInfo launched_plan(const MarlinGemmArgs& args, const DeviceLimits& device,
                            WgmmaOverrides overrides) {
  WgmmaGridInfo plan = plan_wgmma_grid(args, device);
  if (overrides.force_stream_k && wgmma_rows(args.M) == kWgProducerRows)
    plan = plan_wgmma_rows(args, device, kWgProducerRows, 1);  // unsplit: stream-K cuts it
  if (!overrides.on_chip_split) plan.cluster_k = 0;
#if JAX_MARLIN_WGMMA_PRODUCER
  plan.producer = wgmma_plans_producer(plan) && !overrides.force_cp_async &&
                          tensor_map_encoder() != nullptr && producer_registers_ok(device)
                      ? 1
                      : 0;
  plan.stream_k_blocks =
      overrides.stream_k ? wgmma_stream_k_blocks(plan, args, device, overrides.force_stream_k)
                         : 0;
  // A forced stream-K the launch cannot run (no producer at run time, no
  // stream-K workspace): the plan as with 0, not the unsplit grid.
  if (overrides.force_stream_k && plan.stream_k_blocks == 0) {
    overrides.force_stream_k = false;
    return launched_plan(args, device, overrides);
  }
#else
  plan.producer = 0;
  plan.stream_k_blocks = 0;
#endif
  return plan;
}
}  // namespace

int WgmmaProducerBuild() { return JAX_MARLIN_WGMMA_PRODUCER; }

WgmmaOverrides WgmmaOverridesFor(int split_k_override) {
  WgmmaOverrides o;
  o.on_chip_split = split_k_override != kForceWgmmaReduce;
  o.force_cp_async = split_k_override == kForceWgmmaCpAsync;
  o.stream_k = split_k_override != kForceWgmmaNoStreamK;
  o.force_stream_k = split_k_override == kForceWgmmaStreamK;
  return o;
}

bool PlanWgmmaGemm(const MarlinGemmArgs& args, const DeviceLimits& device, WgmmaGridInfo* info,
                   WgmmaOverrides overrides) {
  if (!WgmmaGemmApplies(args, device)) return false;
  *info = launched_plan(args, device, overrides);
  return true;
}

cudaError_t LaunchWgmmaGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                            cudaStream_t stream, WgmmaOverrides overrides) {
  WgmmaParams p = shape_params(args);
  const WgmmaGridInfo plan = launched_plan(args, device, overrides);
  p.stages_per_split = plan.stages_per_split;
  p.num_splits = plan.splits;
  p.cluster_k = plan.cluster_k;
  p.m_blocks = static_cast<int>(plan.m_blocks);
  StreamKParams stream_k{};
  if (plan.stream_k_blocks > 0) {
    stream_k.schedule = make_stream_k(static_cast<int>(plan.n_blocks * plan.m_blocks),
                                      plan.stages_per_split, plan.stream_k_blocks);
    stream_k.workspace = args.stream_k_workspace;
  }
  const cudaError_t err = with_activation_type(args.dtype, [&](auto act) {
    return with_zero_point_kind(args.zero_point_kind, [&](auto zp) {
      return launch_zero_points<decltype(act), decltype(zp)::value>(p, stream_k, plan, device,
                                                                    stream);
    });
  });
  if (err != cudaSuccess) return err;
  return plan.splits > 1 && !plan.cluster_k ? LaunchSplitKReduce(args, device, plan.splits, stream)
                                             : cudaSuccess;
}

#ifdef JAX_MARLIN_WGMMA_TIMELINE
cudaError_t ResetWgmmaTimeline() { return clear_timeline(g_wgmma_timeline); }

cudaError_t ReadWgmmaTimeline(StreamTimeline* out) { return copy_timeline(g_wgmma_timeline, out); }
#endif

}  // namespace jax_marlin
