// The wgmma kernel's stage loop without its memory traffic: what the compute
// half of ffi/wgmma_kernel.cu costs on its own, and which part of it.
//
// Each block is the kernel's (two warpgroups, one 64-column tile each, the
// same shared-memory ring and launch bounds) and runs the kernel's stage body
// over a ring that is never refilled: the proxy fence and barrier, four
// code-word loads and the group's words from shared memory, the dequantization
// (fp16, packed zero points, groups of 64 or more), and the four m64nNk16
// MMAs with wait_group 1. No cp.async, no DRAM. Modes take one part away:
//   full        the stage body as the kernel runs it
//   no-barrier  without the fence and __syncthreads
//   no-mma      dequantization only (its results xor-folded, so nothing is dead)
//   no-dequant  the MMAs on the code words as A registers, with all six loads
//               and the barrier
//   pair        the fence and barrier every second stage only (what a ring
//               refilled two stages at a time would need)
// Grids: the 8192 x 28672 GEMM's (224 blocks of 128 stages) and a full wave.
// The ring holds pseudo-random finite values (tools/probe_common.cuh), not zeros:
// codes, scales and zero points, and activations, as a real stage would.
// Compare with the kernel on that GEMM: ~90 us at M = 64 and ~219 us at M =
// 256 under ncu, 99 and 239 us in the benchmark (NOTES, Variant 8).
// Build and run (sm_90a):
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I ffi \
//     -o /tmp/wgmma_loop tools/wgmma_loop.cu && /tmp/wgmma_loop
#include <cuda_runtime.h>

#include <cstdio>

#include "probe_common.cuh"
#include "wgmma_device.cuh"
#include "wgmma_plan.h"

namespace jax_marlin {
namespace {

enum Mode { kFull, kNoBarrier, kNoMma, kNoDequant, kPairBarrier };
const char* const kModeNames[] = {"full", "no-barrier", "no-mma", "no-dequant", "pair"};

template <int kRows, int kMode>
__global__ void __launch_bounds__(kWgThreads, wgmma_blocks_per_sm(kRows))
    loop_kernel(int n_stages, uint32_t* sink) {
  using Cfg = WgmmaConfig<kRows>;
  using T = __half;
  constexpr ZeroPointKind kZP = ZeroPointKind::kPacked4;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t smem_base = (shared_address(smem_raw) + 1023u) & ~1023u;
  unsigned char* const ring = smem_raw + (smem_base - shared_address(smem_raw));
  for (int i = threadIdx.x; i < kWgStages * Cfg::kStageBytes / 4; i += kWgThreads)
    reinterpret_cast<uint32_t*>(ring)[i] = probe_word(i);
  fence_proxy_async_shared();
  __syncthreads();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, wg_warp = warp & 3, g = lane >> 2;
  constexpr int kCodesOffset = Cfg::kActBytes;
  constexpr int kWordsOffset = Cfg::kActBytes + kWgCodesBytes;
  const uint32_t code_read =
      kCodesOffset + wg * (kWgStageUnits * kWgUnitBytes) + lane * 16 + wg_warp * 4;
  const uint32_t words_read = kWordsOffset + wg * kWgGroupWordBytes;

  float d[kRows / 2];
#pragma unroll
  for (int i = 0; i < kRows / 2; ++i) d[i] = 0.f;
  uint32_t folded = 0;
  int read_slot = 0;

  auto stage = [&](uint32_t (&frag)[kWgStageUnits][4], bool even) {
    if (kMode != kNoBarrier && (kMode != kPairBarrier || even)) {
      fence_proxy_async_shared();
      __syncthreads();
    }
    const uint32_t base = smem_base + read_slot * Cfg::kStageBytes;
    read_slot = read_slot + 1 == kWgStages ? 0 : read_slot + 1;
    uint32_t word[kWgStageUnits];
#pragma unroll
    for (int u = 0; u < kWgStageUnits; ++u) word[u] = lds_32(base + code_read + u * kWgUnitBytes);
    const uint32_t words = base + words_read;
    const uint32_t scale_pair = lds_32(words + 16 * g + 4 * wg_warp);
    const uint32_t zp_pair = lds_32(words + 128 + 4 * g) >> (8 * wg_warp);
    if constexpr (kMode == kNoDequant) {
      // Finite fp16 pairs either way (probe_word's exponents); the group words
      // are folded in so that their loads stay.
      folded ^= scale_pair ^ zp_pair;
#pragma unroll
      for (int u = 0; u < kWgStageUnits; ++u)
        frag[u][0] = frag[u][1] = frag[u][2] = frag[u][3] = word[u] & 0xBBFFBBFFu;
    } else {
      GroupConstants gc;
      make_group_constants<T, kZP>(gc, make_uint4(scale_pair, 0, 0, 0), zp_pair,
                                   make_uint4(0, 0, 0, 0));
#pragma unroll
      for (int u = 0; u < kWgStageUnits; ++u) {
        uint32_t col_lo[2], col_hi[2];
        dequant_word<T, kZP>(word[u], gc, 0, col_lo, col_hi);
        frag[u][0] = col_lo[0];
        frag[u][1] = col_hi[0];
        frag[u][2] = col_lo[1];
        frag[u][3] = col_hi[1];
      }
    }
    if constexpr (kMode == kNoMma) {
#pragma unroll
      for (int u = 0; u < kWgStageUnits; ++u)
        folded ^= frag[u][0] ^ frag[u][1] ^ frag[u][2] ^ frag[u][3];
    } else {
      wgmma_stage<T, kRows>(d, frag, act_descriptor(base));
    }
  };

  // Stage pairs with two register sets, as the kernel runs them.
  uint32_t frag_even[kWgStageUnits][4], frag_odd[kWgStageUnits][4];
  for (int s = 0; s + 1 < n_stages; s += 2) {
    stage(frag_even, true);
    stage(frag_odd, false);
  }
  wgmma_wait<0>();
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kRows / 2; ++i) sum += d[i];
  if (sum != 0.f || folded == 0x12345678u) sink[tid] = folded + static_cast<uint32_t>(sum);
}

template <int kRows, int kMode>
void measure(int blocks, int n_stages, uint32_t* sink) {
  constexpr auto kernel = loop_kernel<kRows, kMode>;
  const int smem = WgmmaConfig<kRows>::kSmemBytes;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const float us =
      best_launch_us([&] { kernel<<<blocks, kWgThreads, smem>>>(n_stages, sink); }, 5);
  int resident = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kWgThreads, smem);
  cudaFuncAttributes attributes{};
  cudaFuncGetAttributes(&attributes, kernel);
  std::printf("rows %3d  %-10s  %3d blocks (%d an SM, %3d registers) x %d stages: %7.1f us  %s\n",
              kRows, kModeNames[kMode], blocks, resident, attributes.numRegs, n_stages, us,
              cudaGetErrorString(cudaGetLastError()));
}

template <int kRows>
void sweep(int sms, uint32_t* sink) {
  const int wave = sms * wgmma_blocks_per_sm(kRows);
  for (int blocks : {224, wave}) {
    measure<kRows, kFull>(blocks, 128, sink);
    measure<kRows, kNoBarrier>(blocks, 128, sink);
    measure<kRows, kNoMma>(blocks, 128, sink);
    measure<kRows, kNoDequant>(blocks, 128, sink);
    measure<kRows, kPairBarrier>(blocks, 128, sink);
  }
}

}  // namespace
}  // namespace jax_marlin

int main() {
  using namespace jax_marlin;
  const int sms = probe_banner();
  uint32_t* sink;
  cudaMalloc(&sink, 1024 * sizeof(uint32_t));
  sweep<64>(sms, sink);
  sweep<256>(sms, sink);
  cudaFree(sink);
  return 0;
}
