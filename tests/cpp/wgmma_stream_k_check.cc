// Walks ffi/wgmma_stream_k.h's schedule on the host as the kernel's blocks
// would. stdin: one case per line, "tiles stages blocks". stdout: per case,
// one line per segment, "block tile stage_begin stage_end whole owner
// first_peer last_peer" (peers -1 where not an owner), data-parallel tiles
// first, then "end". tests/test_wgmma_plan.py checks coverage, balance and the
// owners' peers.
#include <cstdio>

#include "wgmma_stream_k.h"

int main() {
  long long tiles, stages, blocks;
  while (std::scanf("%lld %lld %lld", &tiles, &stages, &blocks) == 3) {
    const jax_marlin::StreamKSchedule s =
        jax_marlin::make_stream_k(tiles, static_cast<int>(stages), static_cast<int>(blocks));
    for (long long b = 0; b < blocks; ++b) {
      for (long long t = b; t < s.dp_tiles; t += blocks)
        std::printf("%lld %lld 0 %d 1 0 -1 -1\n", b, t, s.stages);
      const long long end = jax_marlin::stream_k_begin(s, b + 1);
      for (long long i = jax_marlin::stream_k_begin(s, b); i < end;) {
        const jax_marlin::StreamKSegment seg = jax_marlin::stream_k_segment(s, b, i);
        std::printf("%lld %lld %d %d %d %d %lld %lld\n", b, static_cast<long long>(seg.tile),
                    seg.stage_begin, seg.stage_end, seg.whole, seg.owner,
                    seg.owner ? static_cast<long long>(seg.first_peer) : -1LL,
                    seg.owner ? static_cast<long long>(seg.last_peer) : -1LL);
        i += seg.stage_end - seg.stage_begin;
      }
    }
    std::printf("end\n");
  }
  return 0;
}
