// Session 34: the two grid planners timed on the host (this machine's CPU), 20000 calls a
// case. Built from the repository root:
//   g++ -std=c++17 -O2 -I ffi -I tests/cpp -I /usr/local/cuda-13.0/include \
//     docs/perf/session34/plan_time.cc -o /tmp/tp && /tmp/tp   (output: plan_time.txt)
#include <chrono>
#include <cstdio>
#include "plan_args.h"
#include "stream_plan.h"
#include "wgmma_plan.h"
using namespace jax_marlin;
int main() {
  DeviceLimits device{0, 132, 232448, 90};
  device.cluster_blocks[0]=132; device.cluster_blocks[1]=120; device.cluster_blocks[2]=120;
  device.l2_bytes = 52428800;
  struct C { long long M,K,N; } cases[] = {{1,4096,4096},{16,4096,4096},{1,8192,28672},{16,14336,4096},{128,4096,4096},{512,4096,4096}};
  for (auto c : cases) {
    MarlinGemmArgs args = PlanArgs(c.M, c.K, c.N, 128, 100000000);
    args.stream_k_workspace = reinterpret_cast<float*>(256); args.stream_k_workspace_elems = 100000000;
    int reps = 20000; volatile int sink = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) { StreamPlan p{}; sink += plan_grid(args, device, 0, &p, kTileSplitMaxCluster); sink += p.blocks; }
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) { WgmmaGridInfo w = plan_wgmma_grid(args, device); sink += w.rows; }
    auto t2 = std::chrono::steady_clock::now();
    printf("%lld x %lld x %lld: stream plan %.3f us, wgmma plan %.3f us\n", c.M,c.K,c.N,
      std::chrono::duration<double,std::micro>(t1-t0).count()/reps, std::chrono::duration<double,std::micro>(t2-t1).count()/reps);
  }
}
