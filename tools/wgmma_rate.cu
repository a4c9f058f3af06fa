// The tensor pipe's ceiling for the wgmma kernel's MMA shapes: how many TFLOP/s
// wgmma m64nNk16 (fp16 in, fp32 accumulate, A from registers, B through the
// kernel's 128-byte-swizzle descriptor) sustains when each warpgroup issues
// as ffi/wgmma_kernel.cu does: 4 MMAs a commit group, wait_group 1. N is the
// kernel's rows (M tokens). If that shape could not reach the pipe's peak, no
// trimming of the instructions around it would help. Operands are pseudo-random
// finite values (tools/probe_common.cuh), not zeros. Session 8 measured
// ~965 TFLOP/s at N = 64 and 128 with only 2 warpgroups an SM, the same with
// A from shared memory, on zero operands (docs/perf/NOTES.md, Variant 8).
// Also N = 8 and 16, the shapes a wgmma form of the streaming kernel would take
// at M <= 8 and 9-16 (session 29's design study, docs/perf/session29/wip/
// wgmma-stream/DESIGN.md, stage 0): how close to the pipe's rate so small an MMA gets.
// Build and run (sm_90a is required for wgmma):
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I ffi \
//     -o /tmp/wgmma_rate tools/wgmma_rate.cu && /tmp/wgmma_rate
#include <cuda_runtime.h>

#include <cstdio>

#include "probe_common.cuh"
#include "wgmma_device.cuh"

namespace jax_marlin {
namespace {

constexpr int kIters = 4096;  // stages of 4 k16 MMAs a warpgroup

template <int kRows>
__global__ void __launch_bounds__(128) rate_kernel(float* sink) {
  // The B operand: kRows rows of 64 k, on the 1024-byte boundary the swizzle
  // needs.
  __shared__ __align__(1024) unsigned char tile[kRows * 128];
  for (int i = threadIdx.x; i < kRows * 128 / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(tile)[i] = probe_word(i);
  fence_proxy_async_shared();
  __syncthreads();
  float d[kRows / 2];
#pragma unroll
  for (int i = 0; i < kRows / 2; ++i) d[i] = 0.f;
  uint32_t frag[4][4];
#pragma unroll
  for (int u = 0; u < 4; ++u)
#pragma unroll
    for (int r = 0; r < 4; ++r) frag[u][r] = probe_word(16 * threadIdx.x + 4 * u + r + 99991);
  const uint64_t desc = act_descriptor(shared_address(tile));
  for (int it = 0; it < kIters; ++it) wgmma_stage<__half, kRows>(d, frag, desc);
  wgmma_wait<0>();
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kRows / 2; ++i) sum += d[i];
  if (sum != 0.f) sink[threadIdx.x] = sum;  // keeps the MMAs live; never true
}

template <int kRows>
void measure(int warpgroups_per_sm, int sms, float* sink) {
  const int blocks = warpgroups_per_sm * sms;  // one warpgroup a block
  const float us = best_launch_us([&] { rate_kernel<kRows><<<blocks, 128>>>(sink); }, 3);
  int resident = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, rate_kernel<kRows>, 128, 0);
  const double flops = 2.0 * 64 * kRows * 16 * 4 * double(kIters) * blocks;
  std::printf("m64n%dk16, %d warpgroups an SM (%d fit): %7.1f TFLOP/s  %s\n", kRows,
              warpgroups_per_sm, resident, flops / (us * 1e-6) / 1e12,
              cudaGetErrorString(cudaGetLastError()));
}

}  // namespace
}  // namespace jax_marlin

int main() {
  using namespace jax_marlin;
  const int sms = probe_banner();
  float* sink;
  cudaMalloc(&sink, 1024 * sizeof(float));
  for (int wg : {1, 2, 4}) {
    measure<8>(wg, sms, sink);
    measure<16>(wg, sms, sink);
    measure<64>(wg, sms, sink);
    measure<128>(wg, sms, sink);
    measure<256>(wg, sms, sink);
  }
  cudaFree(sink);
  return 0;
}
