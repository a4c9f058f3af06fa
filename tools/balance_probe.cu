// Would dynamic balance shorten the streaming kernel's tail? A stand-in for the
// stream-K GEMV (ffi/stream_kernel.cu at M = 1) that only streams: the same
// grid (two blocks an SM, 8 warps, each warp a private 2-step ring filled by
// 2 KB bulk copies with the evict-first hint, one barrier a run), the same
// step size (a warp's 4 KB: 64 columns x 128 k of codes) and the same layout
// (a warp's tile contiguous along k), and ALU work a unit in place of the
// dequantization and MMAs. Two ways to hand out the steps:
// - static: block b takes steps [b S / B, (b + 1) S / B), as stream-K does;
// - dynamic: chunks of Q steps, block b's first chunk is b, every later one
//   is claimed from a global counter, so a block that runs slow takes fewer.
//   With D = 0 the first of the block's warps to need a chunk (two steps
//   ahead, for the ring) claims it, and the others wait for it; with D > 0
//   the first warp to need chunk k claims chunk k + D, so the atomic's
//   latency sits on one warp, D chunks early (chunks 1..D at the start).
//   Each chunk would leave its own partial sums (the slot is the chunk's
//   index, whoever computed it, so the sum stays deterministic); here each
//   warp writes a checksum to that slot.
// - hybrid (session 37): the first F% of the steps static, as stream-K cuts
//   them (each block's long run), the rest in chunks of Q steps claimed from
//   the counter by whichever block finishes its run first (every claim,
//   the first too), so only the tail is balanced and most of the bytes still
//   stream in long runs.
// Session 17 located the GEMV's tail (docs/perf/NOTES.md: blocks end 26-34 us
// at 8192 x 28672, the last 3.8 us after the median, a per-block scatter a
// static cut cannot follow). This says how much of it a dynamic hand-out
// removes before the kernel is changed for it: the time a launch and the
// spread of the blocks' end times (globaltimer), for each way.
// Measured (session 30, calls B-D, docs/perf/session30/): static 36.5-36.8 us at
// 8192 x 28672 and 28672 x 8192, blocks ending 20-33 us, median ~29 (the
// kernel's own shape); every dynamic form slower, 40.5-51 us, the more so the
// shorter the chunk (Q = 1 44-51, Q = 4 40.5-45), claiming D chunks ahead or
// spreading the chunks claimed together (P) no better: so a block's long
// contiguous run is worth more than the balance. Session 37 (call J, the hybrid):
// static 37.0 / 36.6 us, hybrids 37.9-42.6 at both large shapes (F = 92, Q = 1-2
// the least slow), 15.9-24.1 against 14.1 at 4096 x 14336; the first ends move
// later (20 -> 25-28 us) and so do the last (33 -> 34.4-39): what the fast blocks
// take from the tail they take from the slow blocks' bandwidth.
// Build and run (sm_90):
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I ffi \
//     -o /tmp/balance_probe tools/balance_probe.cu && /tmp/balance_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "marlin_device.cuh"
#include "probe_common.cuh"

namespace jax_marlin {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kStepBytes = 4096;  // a warp's step: 8 units of 512 bytes
constexpr int kRunBytes = 2048;   // one bulk copy, 4 units
constexpr int kRunsPerStep = kStepBytes / kRunBytes;
constexpr int kRingSteps = 2;
constexpr int kWarpRingBytes = kRingSteps * kStepBytes;
constexpr int kQueue = 64;  // a block's claimed chunks, by its sequence number mod kQueue
constexpr int kAlu = 6;  // dependent rounds a word a unit: ~72 ALU ops a unit a lane (the GEMV: ~65)

struct Params {
  const unsigned char* codes;
  int k_steps;      // steps a column group (K / 128)
  int total_steps;  // column groups x k_steps
  int chunk_steps;  // Q; 0: static
  int static_steps; // handed out statically, the rest in chunks: all (static), none (dynamic)
  int claim_ahead;  // D
  int stride;       // P: the c-th chunk claimed is chunk c P mod chunks (P coprime to it)
  unsigned* counters;  // two: this launch's (parity) and the next one's
  int parity;
  unsigned* out;                  // a checksum a (chunk or block, warp, lane)
  unsigned long long* block_ns;   // start and end a block
};

__global__ void __launch_bounds__(kThreads, 2) stream_kernel(const Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t run_barrier[kWarps][kRingSteps * kRunsPerStep];
  __shared__ int queue_id[kQueue];
  __shared__ int queue_seq[kQueue];
  __shared__ int queue_next;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int blocks = gridDim.x;
  const bool dynamic = p.chunk_steps > 0;
  const int Q = dynamic ? p.chunk_steps : 1;
  const int static_steps = p.static_steps;
  const int tail_steps = p.total_steps - static_steps;
  const int n_chunks = dynamic ? (tail_steps + Q - 1) / Q : 0;
  // Dynamic alone: block b's first chunk is b, the counter's claims follow the blocks';
  // hybrid: every chunk from the counter, so the blocks done first take the tail.
  const bool first_chunk_fixed = dynamic && static_steps == 0;
  const int claim_base = first_chunk_fixed ? blocks : 0;
  const int chunk_slot_base = first_chunk_fixed ? 0 : blocks;  // hybrid: after the runs' slots
  const int s_begin = static_cast<int>(static_cast<long long>(blockIdx.x) * static_steps / blocks);
  const int s_end =
      static_cast<int>(static_cast<long long>(blockIdx.x + 1) * static_steps / blocks);
  const int n_static = s_end - s_begin;
  unsigned long long t_start = 0;
  if (threadIdx.x == 0) {
    t_start = global_ns();
    if (blockIdx.x == 0) p.counters[p.parity ^ 1] = 0;  // the next launch's counter
    for (int k = 0; k < kQueue; ++k) queue_seq[k] = -1;
    if (first_chunk_fixed) {
      queue_id[0] = blockIdx.x;
      queue_seq[0] = 0;
    }
    if (first_chunk_fixed && p.claim_ahead > 0) {
      const int first = blocks + static_cast<int>(atomicAdd(&p.counters[p.parity], p.claim_ahead));
      for (int d = 1; d <= p.claim_ahead; ++d) {
        queue_id[d] = first + d - 1;
        queue_seq[d] = d;
      }
    }
    queue_next = first_chunk_fixed ? 1 + p.claim_ahead : 0;
  }
  if (lane == 0) {
    for (int r = 0; r < kRingSteps * kRunsPerStep; ++r)
      mbarrier_init(shared_address(&run_barrier[warp][r]), 1);
    fence_mbarrier_init();
  }
  __syncthreads();

  // Lane 0: the id of the block's k-th chunk. The first warp to need it
  // claims chunk k + D (queue_next goes k + D -> k + D + 1 once); chunk k is
  // then claimed, by this warp or earlier, or being published by another.
  auto chunk_id = [&](int k) {
    volatile int* seq = queue_seq;
    volatile int* ids = queue_id;
    const int claim = k + p.claim_ahead;
    if (seq[claim % kQueue] != claim && atomicCAS(&queue_next, claim, claim + 1) == claim) {
      ids[claim % kQueue] = claim_base + static_cast<int>(atomicAdd(&p.counters[p.parity], 1u));
      __threadfence_block();
      seq[claim % kQueue] = claim;
    }
    while (seq[k % kQueue] != k) {
    }
    __threadfence_block();
    return ids[k % kQueue];
  };
  // The block's i-th step (lane 0's answer), or -1 past its last.
  auto step_at = [&](int i) {
    if (i < n_static) return s_begin + i;
    if (!dynamic) return -1;
    const int j = i - n_static;
    const int id = chunk_id(j / Q);
    const int s = static_cast<int>(static_cast<long long>(id) * p.stride % n_chunks) * Q + j % Q;
    return id < n_chunks && s < tail_steps ? static_steps + s : -1;
  };
  const uint64_t policy = evict_first_policy();
  const uint32_t ring = shared_address(smem) + warp * kWarpRingBytes;
  auto fill = [&](int slot, int s) {  // lane 0
    const int ng = s / p.k_steps, ks = s - ng * p.k_steps;
    const unsigned char* src =
        p.codes + ((static_cast<long long>(ng) * kWarps + warp) * p.k_steps + ks) * kStepBytes;
    for (int h = 0; h < kRunsPerStep; ++h) {
      const uint32_t bar = shared_address(&run_barrier[warp][slot * kRunsPerStep + h]);
      mbarrier_arrive_expect_tx(bar, kRunBytes);
      bulk_copy_to_shared(ring + slot * kStepBytes + h * kRunBytes, src + h * kRunBytes, kRunBytes,
                          bar, policy);
    }
  };

  int s_cur = 0, s_next = 0;
  if (lane == 0) {
    s_cur = step_at(0);
    s_next = step_at(1);
    if (s_cur >= 0) fill(0, s_cur);
    if (s_next >= 0) fill(1, s_next);
  }
  s_cur = __shfl_sync(0xffffffffu, s_cur, 0);
  s_next = __shfl_sync(0xffffffffu, s_next, 0);
  unsigned acc = 0;
  for (int i = 0; s_cur >= 0; ++i) {
    const int slot = i % kRingSteps;
    const uint32_t parity = (i / kRingSteps) & 1u;
    int s_fill = lane == 0 ? step_at(i + kRingSteps) : 0;
    s_fill = __shfl_sync(0xffffffffu, s_fill, 0);
    for (int h = 0; h < kRunsPerStep; ++h) {
      mbarrier_wait(shared_address(&run_barrier[warp][slot * kRunsPerStep + h]), parity);
#pragma unroll
      for (int u = 0; u < kRunBytes / 512; ++u) {
        const uint4 q = lds_128(ring + slot * kStepBytes + h * kRunBytes + u * 512 + 16 * lane);
        uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int a = 0; a < kAlu; ++a)
#pragma unroll
          for (int j = 0; j < 4; ++j) w[j] = (w[j] * 0x9E3779B9u + a) ^ (w[j] >> 7);
        acc += (w[0] ^ w[1]) + (w[2] ^ w[3]);
      }
    }
    __syncwarp();  // every lane's reads of the slot before its refill
    if (lane == 0 && s_fill >= 0) fill(slot, s_fill);
    // A chunk's (or the static block's) sums leave at its end.
    const bool in_run = i < n_static;
    const bool chunk_ends =
        s_next < 0 || (in_run ? i == n_static - 1 : (i - n_static) % Q == Q - 1);
    if (chunk_ends) {
      // the block's run, or the chunk wherever it ran (after the runs' slots)
      const int part = in_run ? blockIdx.x : chunk_slot_base + (s_cur - static_steps) / Q;
      p.out[(static_cast<long long>(part) * kWarps + warp) * 32 + lane] = acc;
      acc = 0;
    }
    s_cur = s_next;
    s_next = s_fill;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    p.block_ns[2 * blockIdx.x] = t_start;
    p.block_ns[2 * blockIdx.x + 1] = global_ns();
  }
}

void run_shape(int K, int N, int sms) {
  const int k_steps = K / 128, groups = N / 512;
  const int total_steps = k_steps * groups;
  const size_t bytes = static_cast<size_t>(total_steps) * kWarps * kStepBytes;
  const int blocks = 2 * sms;
  unsigned char* codes;
  cudaMalloc(&codes, bytes);
  {
    std::vector<uint32_t> host(bytes / 4);
    for (size_t i = 0; i < host.size(); ++i) host[i] = probe_word(static_cast<uint32_t>(i));
    cudaMemcpy(codes, host.data(), bytes, cudaMemcpyHostToDevice);
  }
  unsigned* counters;
  cudaMalloc(&counters, 2 * sizeof(unsigned));
  cudaMemset(counters, 0, 2 * sizeof(unsigned));
  unsigned* out;
  // a slot a chunk (at most total_steps) after a slot a block's run (hybrid)
  cudaMalloc(&out, static_cast<size_t>(total_steps + blocks) * kWarps * 32 * sizeof(unsigned));
  unsigned long long* block_ns;
  cudaMalloc(&block_ns, 2 * blocks * sizeof(unsigned long long));
  const int smem = kWarps * kWarpRingBytes;
  cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  std::printf("%d x %d: %d steps, %.1f MB, %d blocks\n", K, N, total_steps, bytes / 1e6, blocks);
  // Q, D, spread: chunks claimed together lie P apart, P ~ chunks / blocks (as
  // stream-K's blocks start), instead of side by side (P = 1); F: the percent of
  // the steps handed out statically first (hybrid; 0: all dynamic). Session 30 ran
  // {0,0,0,0}, {4,0,0,0}, {1,0,1,0}, {2,0,1,0}, {4,0,1,0}, {2,1,1,0}, {4,1,1,0}.
  const int modes[][4] = {{0, 0, 0, 0}, {4, 0, 0, 0}, {2, 0, 0, 85}, {4, 0, 0, 85},
                          {4, 0, 0, 70}, {2, 0, 0, 92}, {1, 0, 0, 92}};
  for (const auto& mode : modes) {
    const int Q = mode[0], D = mode[1];
    if (Q > 0 && mode[3] > 0 && D > 0) {  // chunk_id claims chunk 0 itself only with D = 0
      std::printf("  hybrid F=%d Q=%d D=%d: not supported (the hybrid claims with D = 0)\n",
                  mode[3], Q, D);
      continue;
    }
    const int static_steps =
        Q > 0 ? static_cast<int>(static_cast<long long>(total_steps) * mode[3] / 100) : total_steps;
    int P = 1;
    if (Q > 0 && mode[2]) {
      const int chunks = (total_steps - static_steps + Q - 1) / Q;
      auto gcd = [](int a, int b) { while (b) { const int t = a % b; a = b; b = t; } return a; };
      for (P = std::max(1, chunks / blocks); gcd(P, chunks) != 1; ++P) {
      }
    }
    Params p{codes, k_steps, total_steps, Q, static_steps, D, P, counters, 0, out, block_ns};
    int parity = 0;
    auto launch = [&] {
      p.parity = parity;
      parity ^= 1;
      stream_kernel<<<blocks, kThreads, smem>>>(p);
    };
    // Medians of 21 timed launches, then the block ends of one more.
    std::vector<float> times;
    for (int r = 0; r < 21; ++r) times.push_back(best_launch_us(launch, 1));
    std::sort(times.begin(), times.end());
    launch();
    std::vector<unsigned long long> ns(2 * blocks);
    cudaMemcpy(ns.data(), block_ns, ns.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
    unsigned long long t0 = ns[0];
    for (int b = 0; b < blocks; ++b) t0 = std::min(t0, ns[2 * b]);
    std::vector<double> ends;
    for (int b = 0; b < blocks; ++b) ends.push_back((ns[2 * b + 1] - t0) * 1e-3);
    std::sort(ends.begin(), ends.end());
    const cudaError_t err = cudaDeviceSynchronize();
    std::printf("  %-8s F=%-3d Q=%d D=%d P=%-2d %7.2f us (median; best %.2f, %.2f TB/s)  block "
                "ends: min %.2f median %.2f p90 %.2f max %.2f us  %s\n",
                Q ? (mode[3] ? "hybrid" : "dynamic") : "static", Q ? mode[3] : 100, Q, D, P,
                times[times.size() / 2], times[0],
                bytes / (times[times.size() / 2] * 1e-6) / 1e12, ends[0], ends[blocks / 2],
                ends[blocks * 9 / 10], ends[blocks - 1],
                err == cudaSuccess ? "ok" : cudaGetErrorString(err));
  }
  cudaFree(codes);
  cudaFree(counters);
  cudaFree(out);
  cudaFree(block_ns);
}

}  // namespace
}  // namespace jax_marlin

int main() {
  const int sms = probe_banner();
  jax_marlin::run_shape(8192, 28672, sms);
  jax_marlin::run_shape(28672, 8192, sms);
  jax_marlin::run_shape(4096, 14336, sms);
  return 0;
}
