// Checks on the GPU the wgmma facts the large-M kernel design relies on
// (docs/design/wgmma.md), before any kernel is built on them:
//   1. a warp's A fragment from registers is the mma.sync m16n8k16 A fragment,
//      warp w of the warpgroup holding rows 16w..16w+15;
//   2. the m64nNk16 f32 accumulator layout: thread (w, lane) holds d[i] at
//      row 16w + lane/4 + 8((i >> 1) & 1), column 8(i >> 2) + 2(lane % 4) + (i & 1);
//   3. the shared-memory descriptor of a K-major B (N x K, fp16) with the
//      128-byte swizzle (LBO 16 B, SBO 1024 B, +32 B per k16, 64-k slabs N x 128 B
//      apart) and without swizzle (8 x 16 B core matrices, K-adjacent ones
//      128 B apart, 8-row groups K/8 x 128 B apart).
// One warpgroup computes D = A B^T for A 64 x 128 and B N x 128 and compares
// with a host sum. Build and run (sm_90a is required for wgmma):
//   nvcc -gencode arch=compute_90a,code=sm_90a -O2 -o /tmp/wgmma_probe tools/wgmma_probe.cu
//   /tmp/wgmma_probe      # every line must end "max |error| 0"
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

constexpr int kK = 128;

#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
              "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

template <int N>
__device__ void wgmma(float* d, const uint32_t* a, uint64_t b_desc);

template <>
__device__ void wgmma<64>(float* d, const uint32_t* a, uint64_t b_desc) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
      : D8(0), D8(8), D8(16), D8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}

template <>
__device__ void wgmma<128>(float* d, const uint32_t* a, uint64_t b_desc) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
      : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}

// Byte offset of B's 16-byte chunk c (k = 8c .. 8c + 7) of row n in shared memory.
__host__ __device__ int b_chunk_offset(int n, int c, int N, bool swizzle) {
  if (swizzle) return (c / 8) * N * 128 + n * 128 + (((c % 8) ^ (n & 7)) << 4);
  return (n / 8) * (kK / 8) * 128 + c * 128 + (n % 8) * 16;
}

__device__ uint64_t b_descriptor(uint32_t base, int k16, int N, bool swizzle) {
  if (swizzle) {
    const uint32_t start = base + (k16 / 4) * N * 128 + (k16 % 4) * 32;
    return ((start >> 4) & 0x3FFF) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
           (uint64_t{1} << 62);
  }
  const uint32_t start = base + k16 * 256;
  return ((start >> 4) & 0x3FFF) | (uint64_t{128 >> 4} << 16) |
         (uint64_t{(kK / 8) * 128 >> 4} << 32);
}

template <int N, bool kSwizzle>
__global__ void probe(const half* A, const half* B, float* D) {
  extern __shared__ __align__(1024) unsigned char b_smem[];
  const int t = threadIdx.x, w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  for (int i = t; i < N * kK / 8; i += 128) {
    const int n = i / (kK / 8), c = i % (kK / 8);
    *reinterpret_cast<uint4*>(b_smem + b_chunk_offset(n, c, N, kSwizzle)) =
        *reinterpret_cast<const uint4*>(B + n * kK + 8 * c);
  }
  // Generic-proxy stores, read by wgmma through the async proxy.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  auto pair = [&](int row, int k) { return *reinterpret_cast<const uint32_t*>(A + row * kK + k); };
  uint32_t a[kK / 16][4];
  const int row = 16 * w + g;
  for (int k16 = 0; k16 < kK / 16; ++k16) {
    const int k = 16 * k16 + 2 * q;
    a[k16][0] = pair(row, k);
    a[k16][1] = pair(row + 8, k);
    a[k16][2] = pair(row, k + 8);
    a[k16][3] = pair(row + 8, k + 8);
  }
  float d[N / 2] = {};
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(b_smem));
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  for (int k16 = 0; k16 < kK / 16; ++k16) wgmma<N>(d, a[k16], b_descriptor(base, k16, N, kSwizzle));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (int i = 0; i < N / 2; ++i)
    D[(row + 8 * ((i >> 1) & 1)) * N + 8 * (i >> 2) + 2 * q + (i & 1)] = d[i];
}

template <int N, bool kSwizzle>
void check() {
  std::vector<half> a(64 * kK), b(N * kK);
  for (int i = 0; i < 64 * kK; ++i) a[i] = __float2half(((i * 37 + 11) % 17 - 8) / 8.f);
  for (int i = 0; i < N * kK; ++i) b[i] = __float2half(((i * 53 + 5) % 13 - 6) / 4.f);
  half *da, *db;
  float* dd;
  cudaMalloc(&da, a.size() * 2);
  cudaMalloc(&db, b.size() * 2);
  cudaMalloc(&dd, 64 * N * 4);
  cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  const int smem = N * kK * 2;
  cudaFuncSetAttribute(probe<N, kSwizzle>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  probe<N, kSwizzle><<<1, 128, smem>>>(da, db, dd);
  const cudaError_t err = cudaDeviceSynchronize();
  std::vector<float> d(64 * N);
  cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost);
  double worst = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;  // small integers over 8 and 4: exact in fp32 and here
      for (int k = 0; k < kK; ++k) s += double(__half2float(a[m * kK + k])) * __half2float(b[n * kK + k]);
      worst = std::fmax(worst, std::fabs(d[m * N + n] - s));
    }
  std::printf("N = %d, %s: %s, max |error| %g\n", N, kSwizzle ? "128B swizzle" : "no swizzle",
              cudaGetErrorString(err), worst);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
}

int main() {
  check<64, true>();
  check<128, true>();
  check<64, false>();
  check<128, false>();
  return 0;
}
