// Stream-K's schedule for the wgmma kernel's 256-row grids
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
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define JM_SK_HD __host__ __device__
#else
#define JM_SK_HD
#endif

namespace jax_marlin {

struct StreamKSchedule {
  int64_t tiles = 0;     // T
  int stages = 0;        // S, stages of 64 of k a tile
  int blocks = 0;        // P, the persistent blocks (at most one an SM)
  int64_t dp_tiles = 0;  // tiles run whole, a multiple of P
  int64_t run = 0;       // the stream-K iterations of a run: run or run + 1 ...
  int64_t longer = 0;    // ... run + 1 for the first `longer` blocks
};

// The schedule of T tiles of S stages on P blocks: every whole wave of tiles
// data-parallel, the rest stream-K (where R x S < P, the last blocks' runs are
// empty; a planner would rather launch fewer blocks).
JM_SK_HD inline StreamKSchedule make_stream_k(int64_t tiles, int stages, int blocks) {
  StreamKSchedule s;
  s.tiles = tiles;
  s.stages = stages;
  s.blocks = blocks;
  s.dp_tiles = tiles / blocks * blocks;
  const int64_t iterations = (tiles - s.dp_tiles) * stages;
  s.run = iterations / blocks;
  s.longer = iterations % blocks;
  return s;
}

// Block b's first stream-K iteration (b = P: the end of the last run).
JM_SK_HD inline int64_t stream_k_begin(const StreamKSchedule& s, int64_t b) {
  return b * s.run + (b < s.longer ? b : s.longer);
}

// The block whose run holds iteration i (0 <= i < R x S; with run = 0 every
// such i is in the first branch).
JM_SK_HD inline int64_t stream_k_block_of(const StreamKSchedule& s, int64_t i) {
  const int64_t in_longer = s.longer * (s.run + 1);
  return i < in_longer ? i / (s.run + 1) : s.longer + (i - in_longer) / s.run;
}

// One tile's stages in one block: [stage_begin, stage_end) of tile `tile`.
// whole: all S (store it); owner: from stage 0 but not all (add the partials
// of blocks first_peer .. last_peer, then store); else a partial (publish it).
struct StreamKSegment {
  int64_t tile;
  int stage_begin, stage_end;
  bool whole, owner;
  int64_t first_peer, last_peer;  // owner only: the blocks holding the tile's other stages
};

// The segment of block b's stream-K run that starts at iteration i
// (begin(b) <= i < begin(b + 1)); the next one starts at i + its stages.
JM_SK_HD inline StreamKSegment stream_k_segment(const StreamKSchedule& s, int64_t b, int64_t i) {
  const int64_t end = stream_k_begin(s, b + 1);
  StreamKSegment seg{};
  const int64_t k = i / s.stages;  // the tile among the stream-K ones
  seg.tile = s.dp_tiles + k;
  seg.stage_begin = static_cast<int>(i - k * s.stages);
  const int64_t left = end - i;
  seg.stage_end = left < s.stages - seg.stage_begin ? static_cast<int>(seg.stage_begin + left)
                                                    : s.stages;
  seg.whole = seg.stage_begin == 0 && seg.stage_end == s.stages;
  seg.owner = seg.stage_begin == 0 && !seg.whole;
  if (seg.owner) {
    seg.first_peer = b + 1;
    seg.last_peer = stream_k_block_of(s, (k + 1) * s.stages - 1);
  }
  return seg;
}

}  // namespace jax_marlin

#undef JM_SK_HD
