// The tensor pipe's ceiling for the wgmma kernel's shape of work: how many
// TFLOP/s wgmma m64nNk16 (fp16 in, fp32 accumulate) sustains when, as in
// ffi/wgmma_kernel.cu, A comes from registers and B (the activations) from
// shared memory, and each warpgroup keeps one commit group in flight (a
// commit per 4 MMAs, wait_group 1). N is the kernel's row count (M tokens);
// at M = 64 the kernel issues m64n64k16, and if that shape cannot reach the
// tensor pipe's peak, no amount of instruction trimming around it will.
// Also the same MMAs with A from shared memory, and warpgroups per SM 2..8,
// to tell the operand source and the occupancy apart.
// Build and run (sm_90a is required for wgmma):
//   nvcc -gencode arch=compute_90a,code=sm_90a -O2 -o /tmp/wgmma_rate tools/wgmma_rate.cu
//   /tmp/wgmma_rate
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

constexpr int kIters = 4096;  // stages of 4 k16 MMAs per warpgroup

// The descriptor of a K-major tile without swizzle: only the throughput
// matters here, so every MMA reads the same (zeroed) 8 KB.
__device__ uint64_t smem_descriptor(const void* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{128 >> 4} << 16) |
         (uint64_t{256 >> 4} << 32);
}

#define ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define ACC32(i) ACC8(i), ACC8(i + 8), ACC8(i + 16), ACC8(i + 24)

template <int N, bool kRegA>
__device__ __forceinline__ void mma(float* d, const uint32_t* a, uint64_t a_desc, uint64_t b_desc);

template <>
__device__ __forceinline__ void mma<64, true>(float* d, const uint32_t* a, uint64_t, uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
      "{%32,%33,%34,%35}, %36, 1, 1, 1, 0;\n"
      : ACC32(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
template <>
__device__ __forceinline__ void mma<64, false>(float* d, const uint32_t*, uint64_t a, uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
      "%32, %33, 1, 1, 1, 0, 0;\n"
      : ACC32(0)
      : "l"(a), "l"(b));
}

// N = 128: the accumulators as 64 registers.
#define ACC64(i) ACC32(i), ACC32(i + 32)
template <>
__device__ __forceinline__ void mma<128, true>(float* d, const uint32_t* a, uint64_t, uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63},"
      "{%64,%65,%66,%67}, %68, 1, 1, 1, 0;\n"
      : ACC64(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
template <>
__device__ __forceinline__ void mma<128, false>(float* d, const uint32_t*, uint64_t a, uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63},"
      "%64, %65, 1, 1, 1, 0, 0;\n"
      : ACC64(0)
      : "l"(a), "l"(b));
}

template <int N, bool kRegA>
__global__ void __launch_bounds__(128) rate_kernel(float* sink) {
  __shared__ __align__(1024) unsigned char tiles[2][8192];
  for (int i = threadIdx.x; i < 2 * 8192 / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(tiles)[i] = 0;
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  uint32_t a[4] = {threadIdx.x, 0, 0, 0};
  const uint64_t a_desc = smem_descriptor(tiles[0]);
  const uint64_t b_desc = smem_descriptor(tiles[1]);
  for (int it = 0; it < kIters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int u = 0; u < 4; ++u) mma<N, kRegA>(d, a, a_desc + 2 * u, b_desc + 2 * u);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) sum += d[i];
  if (sum != 0.f) sink[threadIdx.x] = sum;  // keeps the MMAs live; never true
}

template <int N, bool kRegA>
void measure(int warpgroups_per_sm, int sms, float* sink) {
  const int blocks = warpgroups_per_sm * sms;  // one warpgroup a block
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  rate_kernel<N, kRegA><<<blocks, 128>>>(sink);  // warm-up
  cudaEventRecord(t0);
  rate_kernel<N, kRegA><<<blocks, 128>>>(sink);
  cudaEventRecord(t1);
  cudaEventSynchronize(t1);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, t0, t1);
  const double flops = 2.0 * 64 * N * 16 * 4 * double(kIters) * blocks;
  int resident = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, rate_kernel<N, kRegA>, 128, 0);
  std::printf("m64n%dk16 A from %s, %d warpgroups/SM (fit %d): %8.1f TFLOP/s, %6.1f us  %s\n", N,
              kRegA ? "registers" : "shared   ", warpgroups_per_sm, resident,
              flops / (ms * 1e-3) / 1e12, ms * 1e3, cudaGetErrorString(cudaGetLastError()));
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  float* sink;
  cudaMalloc(&sink, 1024 * sizeof(float));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (int wg : {2, 4, 8}) {
    measure<64, true>(wg, prop.multiProcessorCount, sink);
    measure<64, false>(wg, prop.multiProcessorCount, sink);
    measure<128, true>(wg, prop.multiProcessorCount, sink);
    measure<128, false>(wg, prop.multiProcessorCount, sink);
  }
  cudaFree(sink);
  return 0;
}
