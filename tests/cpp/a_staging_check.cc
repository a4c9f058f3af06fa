// Runs the streaming kernel's A staging walk (ffi/stream_plan.h's AStagingWalk)
// on the host. stdin: one case per line, "threads rows count k_begin k_steps".
// stdout: one line per case, each thread's copies in its order, thread by thread,
// "i row chunk k_step" for each. tests/test_stream_plan.py checks them against
// the direct division of every chunk index.
#include <cstdio>

#include "stream_plan.h"

int main() {
  int threads, rows, count, k_begin, k_steps;
  while (std::scanf("%d %d %d %d %d", &threads, &rows, &count, &k_begin, &k_steps) == 5) {
    const int total = count * rows * jax_marlin::kAChunksPerRow;
    for (int t = 0; t < threads && t < total; ++t) {
      jax_marlin::AStagingWalk at(t, threads, rows, k_begin, k_steps);
      for (int c = t; c < total; c += threads, at.next())
        std::printf("%d %d %d %d ", at.i, at.row(), at.chunk(), at.ks);
    }
    std::printf("\n");
  }
  return 0;
}
