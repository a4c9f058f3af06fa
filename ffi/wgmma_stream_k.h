// Stream-K's schedule for the wgmma kernel's 256-row producer grids
// (docs/design/wgmma_stream_k.md): which (tile, stage) iterations each
// persistent block runs, and how a tile cut between blocks is added up. Host
// and device alike (the producer and the consumers walk the same segments);
// no XLA, no CUDA runtime calls. tests/test_wgmma_plan.py checks it on the host
// through tests/cpp/wgmma_stream_k_check.cc.
//
// Tiles are numbered t = 0 .. T - 1 (the kernel maps t to a tile pair and a
// row block), each of S stages. P persistent blocks first run whole tiles in
// waves, block b taking b, b + P, ... below dp_tiles (a multiple of P), then
// the R = T - dp_tiles tiles left, R x S iterations, in P runs as even as
// integers allow: block b's run is [begin(b), begin(b + 1)), iteration i being
// stage i % S of tile dp_tiles + i / S. A run may start inside a tile (its
// tail stages: a "partial" segment, whose fp32 sum the block publishes) and end
// inside another (its head, from stage 0: the tile's "owner", which adds the
// partials of the blocks after it, in block order, and stores the tile).
//
// 32-bit throughout: the producer warpgroup walks this in 40 registers. The
// planner takes stream-K only where T x S <= INT32_MAX / 2 (wgmma_plan.h), so
// that longer x (run + 1) stays in range too.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define JM_SK_HD __host__ __device__
#else
#define JM_SK_HD
#endif

namespace jax_marlin {

// The workspace of a stream-K launch (fp32 words): P flags first (a block's
// "my partial is published", zeroed by the launch before the kernel), padded to
// kStreamKFlagFloats, then one partial slot a block, 256 rows x 128 columns:
// each consumer thread's 128 accumulators, as float4 c at (c x 256 + thread).
constexpr int kStreamKMaxBlocks = 160;  // P at most (the H200 and H100 SXM: 132)
constexpr int kStreamKFlagFloats = 256;
constexpr int kStreamKPartialFloats = 32768;  // 256 x 128
constexpr int64_t kStreamKWorkspaceFloats =
    kStreamKFlagFloats + int64_t{kStreamKMaxBlocks} * kStreamKPartialFloats;
static_assert(kStreamKMaxBlocks <= kStreamKFlagFloats, "a flag a block");

struct StreamKSchedule {
  int tiles = 0;     // T
  int stages = 0;    // S, stages of 64 of k a tile
  int blocks = 0;    // P, the persistent blocks (at most one an SM); 0: no stream-K
  int dp_tiles = 0;  // tiles run whole, a multiple of P
  int run = 0;       // the stream-K iterations of a run: run or run + 1 ...
  int longer = 0;    // ... run + 1 for the first `longer` blocks
};

// The schedule of T tiles of S stages on P blocks: the whole waves of tiles
// data-parallel, the rest stream-K; but where the rest is under half a wave
// (runs under S / 2 stages), the last whole wave joins it, so that no tile is
// cut among more than three blocks (the owner reads at most two partials:
// with 1 tile left over on 132 blocks, its owner would add 131). With T < P
// (only under kForceWgmmaStreamK, wgmma_kernel.h) there is no whole wave and
// a tile has about P / T holders; nothing here depends on the three.
JM_SK_HD inline StreamKSchedule make_stream_k(int tiles, int stages, int blocks) {
  StreamKSchedule s;
  s.tiles = tiles;
  s.stages = stages;
  s.blocks = blocks;
  int waves = tiles / blocks;
  if (waves > 0 && 2 * (tiles - waves * blocks) < blocks) --waves;
  s.dp_tiles = waves * blocks;
  const int iterations = (tiles - s.dp_tiles) * stages;
  s.run = iterations / blocks;
  s.longer = iterations % blocks;
  return s;
}

// Block b's first stream-K iteration (b = P: the end of the last run).
JM_SK_HD inline int stream_k_begin(const StreamKSchedule& s, int b) {
  return b * s.run + (b < s.longer ? b : s.longer);
}

// The block whose run holds iteration i (0 <= i < R x S; with run = 0 every
// such i is in the first branch).
JM_SK_HD inline int stream_k_block_of(const StreamKSchedule& s, int i) {
  const int in_longer = s.longer * (s.run + 1);
  return i < in_longer ? i / (s.run + 1) : s.longer + (i - in_longer) / s.run;
}

// One tile's stages in one block: [stage_begin, stage_end) of tile `tile`.
// whole: all S (store it); owner: from stage 0 but not all (add the partials
// of blocks first_peer .. last_peer, then store); else a partial (publish it).
struct StreamKSegment {
  int tile;
  int stage_begin, stage_end;
  bool whole, owner;
  int first_peer, last_peer;  // owner only: the blocks holding the tile's other stages
};

// Where block b stands in its list: the next data-parallel tile (or past
// dp_tiles), then the stream-K iterations [i, end) left.
struct StreamKWalk {
  int next_dp, i, end;
};

JM_SK_HD inline StreamKWalk stream_k_walk(const StreamKSchedule& s, int b) {
  return {b, stream_k_begin(s, b), stream_k_begin(s, b + 1)};
}

// Block b's next segment into *seg; false at the end of its list. The
// data-parallel tiles come first, then the run's segments in iteration order,
// so a partial (the run's first segment) is published before the block waits
// as an owner (its run's last), and an owner's peers, later blocks, publish at
// the start of their runs: no block waits on one that waits.
JM_SK_HD inline bool stream_k_next(const StreamKSchedule& s, int b, StreamKWalk& w,
                                   StreamKSegment* seg) {
  if (w.next_dp < s.dp_tiles) {
    *seg = StreamKSegment{w.next_dp, 0, s.stages, true, false, -1, -1};
    w.next_dp += s.blocks;
    return true;
  }
  if (w.i >= w.end) return false;
  const int k = w.i / s.stages;  // the tile among the stream-K ones
  seg->tile = s.dp_tiles + k;
  seg->stage_begin = w.i - k * s.stages;
  const int left = w.end - w.i;
  seg->stage_end = left < s.stages - seg->stage_begin ? seg->stage_begin + left : s.stages;
  seg->whole = seg->stage_begin == 0 && seg->stage_end == s.stages;
  seg->owner = seg->stage_begin == 0 && !seg->whole;
  seg->first_peer = seg->owner ? b + 1 : -1;
  seg->last_peer = seg->owner ? stream_k_block_of(s, (k + 1) * s.stages - 1) : -1;
  w.i += seg->stage_end - seg->stage_begin;
  return true;
}

}  // namespace jax_marlin

#undef JM_SK_HD
