// Where a small GEMM's time goes: each case is captured R times back to back
// into one CUDA graph (as XLA's command buffers run a jitted loop), the graph
// replayed, and the time per item reported. Empty kernels give the launch
// floor (with and without the streaming kernel's shared-memory footprint, and
// alternating with a kernel of the default carveout, as XLA's fusions are); the
// package's own launcher (LaunchMarlinGemm, weights rotated past the L2) gives
// the GEMM, alone and with a default-carveout kernel between calls.
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a \
//     -DJAX_MARLIN_WGMMA=1 -I ffi tools/latency_probe.cu ffi/marlin_kernel.cu \
//     ffi/stream_kernel.cu ffi/wgmma_kernel.cu -o /tmp/latency_probe && /tmp/latency_probe
// `latency_probe random` fills every buffer with random bits (fp16 ones kept
// finite and below 2) instead of zeros, to see whether the values move the time.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <cstdio>
#include <functional>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "marlin_kernel.h"

using jax_marlin::DeviceLimits;
using jax_marlin::MarlinGemmArgs;

#define CHECK(x)                                                              \
  do {                                                                        \
    cudaError_t e_ = (x);                                                     \
    if (e_ != cudaSuccess) {                                                  \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

namespace {

constexpr int kItems = 64;    // items a graph
constexpr int kReplays = 30;  // timed replays (after 3 untimed)

__global__ void empty_kernel() {}

bool g_random = false;

// Random bits; as fp16 pairs, finite and of magnitude < 2 (exponent bit 14 off).
__global__ void fill_random(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < words;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    p[i] = x & 0xBFFFBFFFu;
  }
}

// Stands in for an XLA fusion between two GEMMs: reads and writes a few values.
__global__ void small_kernel(float* x) {
  if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += 1.f;
}

// Microseconds per item of `items` (one call enqueues one item on `stream`)
// captured into one graph; the median of three timings of kReplays replays.
double graph_us(cudaStream_t stream, const std::function<void(int)>& item) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kItems; ++i) item(i);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int t = 0; t < 3; ++t) {
    CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < kReplays; ++r) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(1e3 * ms / (kReplays * kItems));
  }
  std::sort(times.begin(), times.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return times[1];
}

struct Gemm {
  int64_t K, N;
  std::vector<void*> buffers;
  std::vector<MarlinGemmArgs> copies;
};

// `count` copies of the weights of a K x N, group-128, packed-zero-point GEMM
// at M rows, sharing A, the output and the workspace.
Gemm make_gemm(int64_t M, int64_t K, int64_t N, int count) {
  Gemm g{K, N, {}, {}};
  const int64_t group = 128, n_pad = (N + 63) / 64 * 64, k_blocks = (K + group - 1) / group;
  const int64_t k_pad = k_blocks * group;
  const int64_t parts = std::min<int64_t>(64, (int64_t{1} << 23) / (M * n_pad));
  auto alloc = [&](size_t bytes) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaMemset(p, 0, bytes));
    if (g_random) {
      fill_random<<<1024, 256>>>(static_cast<uint32_t*>(p), bytes / 4,
                                 static_cast<uint32_t>(g.buffers.size()) * 7919u);
      CHECK(cudaGetLastError());
    }
    g.buffers.push_back(p);
    return p;
  };
  void* a = alloc(M * K * 2);
  void* out = alloc(M * N * 2);
  auto* workspace = static_cast<float*>(alloc(parts * M * n_pad * 4));
  for (int c = 0; c < count; ++c) {
    MarlinGemmArgs args{};
    args.a = a;
    args.codes = static_cast<const uint32_t*>(alloc(n_pad * k_pad / 2));
    args.scales = alloc(k_blocks * n_pad * 2);
    args.zero_points = alloc(k_blocks * n_pad / 2);
    args.out = out;
    args.workspace = workspace;
    args.workspace_elems = parts * M * n_pad;
    args.M = M;
    args.N = N;
    args.K = K;
    args.n_pad = n_pad;
    args.k_pad = k_pad;
    args.k_blocks = k_blocks;
    args.group_size = group;
    args.dtype = jax_marlin::ActDType::kFloat16;
    args.zero_point_kind = jax_marlin::ZeroPointKind::kPacked4;
    g.copies.push_back(args);
  }
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  g_random = argc > 1 && std::string(argv[1]) == "random";
  DeviceLimits device{};
  CHECK(cudaGetDevice(&device.ordinal));
  int major = 0, minor = 0;
  CHECK(cudaDeviceGetAttribute(&device.sm_count, cudaDevAttrMultiProcessorCount, device.ordinal));
  CHECK(cudaDeviceGetAttribute(&device.max_shared_bytes_per_block,
                               cudaDevAttrMaxSharedMemoryPerBlockOptin, device.ordinal));
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.ordinal));
  CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.ordinal));
  device.compute_capability = 10 * major + minor;
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* scratch = nullptr;
  CHECK(cudaMalloc(&scratch, 4));

  // The streaming kernel's footprint: most of an SM's shared memory a block.
  const int big_smem = device.max_shared_bytes_per_block - 1024;
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big_smem));
  const int sms = device.sm_count;
  std::printf("us per item, graphs of %d items (median of 3 x %d replays), %s buffers\n", kItems,
              kReplays, g_random ? "random" : "zero");
  std::printf("empty, 2 blocks                          %7.2f\n",
              graph_us(stream, [&](int) { empty_kernel<<<2, 256, 0, stream>>>(); }));
  std::printf("empty, %d blocks                        %7.2f\n", 2 * sms,
              graph_us(stream, [&](int) { empty_kernel<<<2 * sms, 256, 0, stream>>>(); }));
  std::printf("empty, %d blocks, %d KB shared          %7.2f\n", sms, big_smem / 1024,
              graph_us(stream, [&](int) { empty_kernel<<<sms, 256, big_smem, stream>>>(); }));
  std::printf("small kernel                             %7.2f\n",
              graph_us(stream, [&](int) { small_kernel<<<1, 64, 0, stream>>>(scratch); }));
  std::printf("empty (%d KB shared) + small kernel      %7.2f\n", big_smem / 1024,
              graph_us(stream, [&](int) {
                empty_kernel<<<sms, 256, big_smem, stream>>>();
                small_kernel<<<1, 64, 0, stream>>>(scratch);
              }));

  struct Shape { int64_t M, K, N; };
  const Shape shapes[] = {{1, 256, 512},    {1, 4096, 4096},  {1, 4096, 6144},
                          {1, 14336, 4096}, {1, 4096, 28672}, {1, 8192, 28672},
                          {16, 4096, 4096}};
  std::printf("\n     M      K      N  kernel  copies  GEMM us  GEMM + small kernel us  GB/s\n");
  for (const Shape& s : shapes) {
    // codes, fp16 scales and packed zero points of groups of 128
    const double bytes = double(s.N) * s.K * (0.5 + 2.0 / 128 + 0.5 / 128);
    const int count = std::max(1, std::min(kItems, static_cast<int>(200e6 / bytes) + 1));
    Gemm g = make_gemm(s.M, s.K, s.N, count);
    const char* kernel = jax_marlin::PlannedKernel(g.copies[0], device, 0);
    auto gemm = [&](int i) {
      CHECK(jax_marlin::LaunchMarlinGemm(g.copies[i % count], device, 0, stream));
    };
    const double alone = graph_us(stream, gemm);
    const double with_small = graph_us(stream, [&](int i) {
      gemm(i);
      small_kernel<<<1, 64, 0, stream>>>(scratch);
    });
    std::printf("%6lld %6lld %6lld  %-6s  %6d  %7.2f  %22.2f  %5.0f\n", (long long)s.M,
                (long long)s.K, (long long)s.N, kernel, count, alone, with_small,
                bytes / alone / 1e3);
    for (void* p : g.buffers) CHECK(cudaFree(p));
  }
  CHECK(cudaStreamSynchronize(stream));
  return 0;
}
