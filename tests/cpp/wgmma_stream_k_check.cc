// Walks ffi/wgmma_stream_k.h's schedule on the host as the kernel's blocks
// would (stream_k_next, the walk the producer and the consumers share).
// stdin: one case per line, "tiles stages blocks". stdout: per case, one line
// per segment, "block tile stage_begin stage_end whole owner first_peer
// last_peer" (peers -1 where not an owner), in each block's order, then "end".
// tests/test_wgmma_plan.py checks coverage, balance and the owners' peers.
#include <cstdio>

#include "wgmma_stream_k.h"

int main() {
  int tiles, stages, blocks;
  while (std::scanf("%d %d %d", &tiles, &stages, &blocks) == 3) {
    const jax_marlin::StreamKSchedule s = jax_marlin::make_stream_k(tiles, stages, blocks);
    for (int b = 0; b < blocks; ++b) {
      jax_marlin::StreamKWalk walk = jax_marlin::stream_k_walk(s, b);
      jax_marlin::StreamKSegment seg;
      while (jax_marlin::stream_k_next(s, b, walk, &seg))
        std::printf("%d %d %d %d %d %d %d %d\n", b, seg.tile, seg.stage_begin, seg.stage_end,
                    seg.whole, seg.owner, seg.first_peer, seg.last_peer);
    }
    std::printf("end\n");
  }
  return 0;
}
