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
// Per shape it also times each of a call's kernels alone (copies of the
// captured kernel nodes), and the call under other grids (split_k_override 1:
// no k-split; -C: the tile split with C blocks a tile), and the calls each
// as a child graph node, as XLA's command buffers hold a traced FFI call.
// Tiny shapes' 64 copies fit in the L2 (256 x 512: 4.4 MB): their weights come
// from there, not from DRAM.
// Built with -DJAX_MARLIN_STREAM_TIMELINE (kernels and probe alike), it also
// prints, per shape, where one call's time goes by the blocks' own timestamps
// (ffi/stream_timeline.h); with -DJAX_MARLIN_WGMMA_TIMELINE, the same for the
// wgmma kernel's planned call (its marks: stream_timeline.h's WgmmaMark).
// `latency_probe random` fills every buffer with random bits (fp16 ones kept
// finite and below 2) instead of zeros, to see whether the values move the time;
// `latency_probe values` fills them as a model's would be: activations spread
// over (-2, 2) (no tiny exponents), codes and zero points random nibbles, scales
// in [2^-7, 2^-6), outputs and workspace zeros. At M >= 256 the wgmma kernel is
// power-bound, and zeros (the default) read ~20% faster than random bits there
// (session 24 call N); `values` is the probe's stand-in for the bench's operands;
// `latency_probe 1x4096x4096 16x896x1152 ...` times those shapes (M x K x N) instead.
// `latency_probe small` takes the projections of ~0.5B and ~1B decoders instead
// of the 8B-class shapes. `splits=` (empty) times no other grid, `replays=N` makes
// each timing N x 64 calls (30 by default): long enough runs to read the clock at
// the power cap (tools/power_sample.py). `layers=1,16`: instead of the shapes, a decoder
// layer's four projections chained with small kernels between them, at those M
// (time_layer_chain).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <cstdio>
#include <functional>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "marlin_kernel.h"
#include "stream_kernel.h"
#include "wgmma_stream_k.h"
#if defined(JAX_MARLIN_STREAM_TIMELINE) || defined(JAX_MARLIN_WGMMA_TIMELINE)
#include "stream_timeline.h"
#define JAX_MARLIN_ANY_TIMELINE 1
#endif

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
int g_replays = 30;  // timed replays (after 3 untimed); replays=N sets it

__global__ void empty_kernel() {}

// Word i of a seeded stream of random bits (a multiplicative hash, then a
// 32-bit finalizer's mixing).
__device__ __forceinline__ uint32_t random_word(size_t i, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  return x ^ (x >> 16);
}

bool g_random = false;
bool g_values = false;

// What a buffer holds: zeros; random bits (`random`, every buffer); or, for
// `values`, a model's activations, 4-bit codes or zero points, or scales.
enum class Fill { kZeros, kRandomBits, kActivations, kNibbles, kScales };

// fp16 pairs: random bits finite and of magnitude < 2 (exponent bit 14 off);
// activations with an exponent in [2^-4, 2) and a random sign and mantissa;
// scales positive in [2^-7, 2^-6); nibbles random bits.
__global__ void fill_buffer(uint32_t* p, size_t words, uint32_t seed, Fill fill) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < words;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t x = random_word(i, seed);
    if (fill == Fill::kRandomBits) {
      x &= 0xBFFFBFFFu;
    } else if (fill == Fill::kActivations) {
      // per half: sign, exponent 11..15 (2^-4 .. 2^0), 10 mantissa bits
      const uint32_t e_lo = 11 + (x >> 10 & 3) + (x >> 12 & 1), e_hi = 11 + (x >> 26 & 3) + (x >> 28 & 1);
      x = (x & 0x83FF83FFu) | (e_lo << 10) | (e_hi << 26);
    } else if (fill == Fill::kScales) {
      x = (x & 0x03FF03FFu) | (8u << 10) | (8u << 26);  // exponent 8: [2^-7, 2^-6)
    }
    p[i] = x;
  }
}

// Stands in for an XLA fusion between two GEMMs: reads and writes a few values.
__global__ void small_kernel(float* x) {
  if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += 1.f;
}

void small_kernels(cudaStream_t stream, float* scratch, int count) {
  for (int i = 0; i < count; ++i) small_kernel<<<1, 64, 0, stream>>>(scratch);
}

// The non-empty items of a comma-separated list ("1,-2,1004").
std::vector<std::string> comma_items(const std::string& list) {
  std::vector<std::string> items;
  for (size_t at = 0; at < list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) items.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

// Microseconds per item of `graph` (kItems items), which it destroys; the
// median of three timings of g_replays replays.
double time_graph_us(cudaStream_t stream, cudaGraph_t graph) {
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int t = 0; t < 3; ++t) {
    CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < g_replays; ++r) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(1e3 * ms / (g_replays * kItems));
  }
  std::sort(times.begin(), times.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return times[1];
}

// Microseconds per item of `item(i)` for i < kItems (each enqueues one item on
// `stream`), captured into one graph.
double graph_us(cudaStream_t stream, const std::function<void(int)>& item) {
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kItems; ++i) item(i);
  CHECK(cudaStreamEndCapture(stream, &graph));
  return time_graph_us(stream, graph);
}

// The kernel nodes of one captured call, in the order the call launched them
// (a one-stream capture makes a chain: followed from its root), and the graph
// that owns them.
struct CapturedCall {
  cudaGraph_t graph;
  std::vector<cudaGraphNode_t> kernels;
};

CapturedCall capture_call(cudaStream_t stream, const std::function<void()>& call) {
  CapturedCall c{};
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  call();
  CHECK(cudaStreamEndCapture(stream, &c.graph));
  size_t n = 1;
  cudaGraphNode_t node = nullptr;
  CHECK(cudaGraphGetRootNodes(c.graph, nullptr, &n));
  if (n != 1) {
    std::printf("capture_call: %zu root nodes, expected a chain\n", n);
    std::exit(1);
  }
  CHECK(cudaGraphGetRootNodes(c.graph, &node, &n));
  while (true) {
    cudaGraphNodeType type;
    CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) c.kernels.push_back(node);
    // With the edges' data: a programmatic edge (a dependent launch) fails
    // the query without it.
    cudaGraphNode_t next[2] = {};
    cudaGraphEdgeData edges[2] = {};
    n = 2;
    CHECK(cudaGraphNodeGetDependentNodes(node, next, edges, &n));
    if (n == 0) break;
    if (n > 1) {
      std::printf("capture_call: a node with %zu dependents, expected a chain\n", n);
      std::exit(1);
    }
    node = next[0];
  }
  return c;
}

// Microseconds per item of a chain of kItems kernel nodes, item i a copy of
// kernel `k` of call i % calls.size() (its arguments and launch attributes,
// cluster dimensions included): one of a GEMM's kernels without the other.
double kernel_alone_us(cudaStream_t stream, const std::vector<CapturedCall>& calls, size_t k) {
  cudaGraph_t graph;
  CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < kItems; ++i) {
    const cudaGraphNode_t source = calls[i % calls.size()].kernels[k];
    cudaKernelNodeParams params{};
    CHECK(cudaGraphKernelNodeGetParams(source, &params));
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, graph, prev ? &prev : nullptr, prev ? 1 : 0, &params));
    CHECK(cudaGraphKernelNodeCopyAttributes(node, source));
    cudaLaunchAttributeValue want{}, got{};
    CHECK(cudaGraphKernelNodeGetAttribute(source, cudaLaunchAttributeClusterDimension, &want));
    CHECK(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeClusterDimension, &got));
    if (want.clusterDim.x != got.clusterDim.x) {
      std::printf("kernel_alone_us: the clone lost its cluster dimension\n");
      std::exit(1);
    }
    prev = node;
  }
  return time_graph_us(stream, graph);
}

// Microseconds per item of a chain of kItems child-graph nodes, item i a copy
// of call i % calls.size()'s captured graph. XLA's command buffers hold a
// traced FFI call this way (stream capture into a nested graph) and their own
// kernels as plain kernel nodes; this against the flat chain of the same
// calls says what the nesting costs.
double child_graphs_us(cudaStream_t stream, const std::vector<CapturedCall>& calls) {
  cudaGraph_t graph;
  CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < kItems; ++i) {
    cudaGraphNode_t node;
    CHECK(cudaGraphAddChildGraphNode(&node, graph, prev ? &prev : nullptr, prev ? 1 : 0,
                                     calls[i % calls.size()].graph));
    prev = node;
  }
  return time_graph_us(stream, graph);
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
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(64, (int64_t{1} << 23) / (M * n_pad)));
  auto alloc = [&](size_t bytes, Fill fill = Fill::kZeros) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaMemset(p, 0, bytes));
    if (g_random) fill = Fill::kRandomBits;
    if (fill != Fill::kZeros && (g_random || g_values)) {
      fill_buffer<<<1024, 256>>>(static_cast<uint32_t*>(p), bytes / 4,
                                 static_cast<uint32_t>(g.buffers.size()) * 7919u, fill);
      CHECK(cudaGetLastError());
    }
    g.buffers.push_back(p);
    return p;
  };
  void* a = alloc(M * K * 2, Fill::kActivations);
  void* out = alloc(M * N * 2);
  auto* workspace = static_cast<float*>(alloc(parts * M * n_pad * 4));
  // The wgmma kernel's stream-K area, as ops.py adds it for M = 129..1024.
  const bool stream_k = M >= 129 && M <= 1024;
  auto* stream_k_workspace = stream_k ? static_cast<float*>(
                                            alloc(jax_marlin::kStreamKWorkspaceFloats * 4))
                                      : nullptr;
  for (int c = 0; c < count; ++c) {
    MarlinGemmArgs args{};
    args.a = a;
    args.codes = static_cast<const uint32_t*>(alloc(n_pad * k_pad / 2, Fill::kNibbles));
    args.scales = alloc(k_blocks * n_pad * 2, Fill::kScales);
    args.zero_points = alloc(k_blocks * n_pad / 2, Fill::kNibbles);
    args.out = out;
    args.workspace = workspace;
    args.workspace_elems = parts * M * n_pad;
    args.stream_k_workspace = stream_k_workspace;
    args.stream_k_workspace_elems = stream_k ? jax_marlin::kStreamKWorkspaceFloats : 0;
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
  // The fills ran on the legacy stream; the timed graphs run on a non-blocking one.
  CHECK(cudaDeviceSynchronize());
  return g;
}

// How many of the call's first kernel's clusters (or blocks, without clusters)
// the device holds at once, from the captured node's own function, block,
// shared memory and cluster size: a grid past it runs in more than one wave.
std::string resident(cudaStream_t stream, const std::function<void()>& call) {
  CapturedCall c = capture_call(stream, call);
  cudaKernelNodeParams params{};
  CHECK(cudaGraphKernelNodeGetParams(c.kernels[0], &params));
  cudaLaunchAttributeValue cluster{};
  CHECK(cudaGraphKernelNodeGetAttribute(c.kernels[0], cudaLaunchAttributeClusterDimension,
                                        &cluster));
  CHECK(cudaGraphDestroy(c.graph));
  char text[64];
  if (cluster.clusterDim.x > 1) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val = cluster;
    cudaLaunchConfig_t config{};
    config.gridDim = params.gridDim;
    config.blockDim = params.blockDim;
    config.dynamicSmemBytes = params.sharedMemBytes;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&clusters, params.func, &config));
    std::snprintf(text, sizeof text, "; %d clusters resident", clusters);
  } else {
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, params.func, params.blockDim.x * params.blockDim.y, params.sharedMemBytes));
    std::snprintf(text, sizeof text, "; %d blocks an SM", per_sm);
  }
  return text;
}

// The grid a call takes: the streaming kernel's blocks, tile split (C blocks
// a tile) and partials, or the other kernel's name.
std::string grid_name(const MarlinGemmArgs& args, const DeviceLimits& device, int split) {
  jax_marlin::StreamGridInfo info{};
  if (!jax_marlin::PlanStreamGemm(args, device, split, &info))
    return jax_marlin::PlannedKernel(args, device, split);
  char name[96];
  if (info.tile_split > 0)
    std::snprintf(name, sizeof name, "tile split: %d blocks, C = %d", info.blocks,
                  info.tile_split);
  else if (info.group_cluster > 1)
    std::snprintf(name, sizeof name, "group cluster: %d blocks, C = %d", info.blocks,
                  info.group_cluster);
  else
    std::snprintf(name, sizeof name, "stream-K: %d blocks, %d parts", info.blocks,
                  info.max_parts);
  return name;
}

// A decoder layer's four projections (examples/decode.py's defaults: qkv 4096 x 6144,
// o 4096 x 4096, gate/up 4096 x 28672, down 14336 x 4096) one after another at M rows,
// each followed by `gap` small kernels that stand in for the XLA fusions between them
// in the decode example's trace (session 22's call C: rotary, the two cache updates and
// the attention after qkv; the residual add and the norm after o; SwiGLU after gate/up;
// the add and the next norm after down). Weights of kLayers layers rotate (16 x 113 MB;
// even o's 16 copies, 139 MB, are well past the 50 MB L2). While the small kernels run,
// DRAM idles: these times say how much of a layer that idle time is, and what a
// projection costs with its weights cold (rotated) or hot (one copy of its own, in the
// L2 where it fits) between the same small kernels.
struct Projection {
  const char* name;
  int64_t K, N;
  int gap;  // small kernels after it
};
constexpr Projection kLayerProjections[] = {
    {"qkv", 4096, 6144, 8}, {"o", 4096, 4096, 3}, {"gate_up", 4096, 28672, 1}, {"down", 14336, 4096, 3}};
constexpr int kLayers = 16;

// One layer an item: `gemm(layer, j)` launches projection j of that layer's weights.
double layer_us(cudaStream_t stream, float* scratch, bool gaps,
                const std::function<void(int, int)>& gemm) {
  return graph_us(stream, [&](int layer) {
    for (int j = 0; j < 4; ++j) {
      gemm(layer, j);
      small_kernels(stream, scratch, gaps ? kLayerProjections[j].gap : 0);
    }
  });
}

void time_layer_chain(cudaStream_t stream, const DeviceLimits& device, float* scratch, int64_t M) {
  std::vector<Gemm> weights;
  for (const Projection& p : kLayerProjections) weights.push_back(make_gemm(M, p.K, p.N, kLayers));
  auto launch = [&](int layer, int j) {
    CHECK(jax_marlin::LaunchMarlinGemm(weights[j].copies[layer % kLayers], device, 0, stream));
  };
  std::printf("\nlayer chain, M = %lld, %d layers' weights: us a layer, with the small kernels"
              " (%d, %d, %d, %d) / back to back\n", (long long)M, kLayers, kLayerProjections[0].gap,
              kLayerProjections[1].gap, kLayerProjections[2].gap, kLayerProjections[3].gap);
  std::printf("%27s %8.2f / %8.2f\n", "cold:", layer_us(stream, scratch, true, launch),
              layer_us(stream, scratch, false, launch));
  // One projection at a time, the others' launches dropped but its small kernels kept:
  // its weights rotated (cold) or always layer 0's (hot where they fit in the L2).
  for (int j = 0; j < 4; ++j) {
    auto only = [&](bool hot) {
      return graph_us(stream, [&](int layer) {
        launch(hot ? 0 : layer, j);
        small_kernels(stream, scratch, kLayerProjections[j].gap);
      });
    };
    std::printf("%19s %-7s cold %6.2f, hot %6.2f us with its %d small kernels\n", "", kLayerProjections[j].name,
                only(false), only(true), kLayerProjections[j].gap);
  }
  for (Gemm& g : weights)
    for (void* p : g.buffers) CHECK(cudaFree(p));
}

#ifdef JAX_MARLIN_ANY_TIMELINE
// Warp 0's step ends (StreamTimeline::step_ns): whether the blocks that end last
// started late or streamed slower, and how the GPU's step rate falls in the
// tail. Blocks ranked by loop end; for the first, middle and last tenth, the
// mean end of the first step and the mean time a step after it. Then, a
// microsecond at a time from 4 us before the median loop end, the blocks running
// (entered, loop not ended) and the steps that ended (every block's, as far as
// stamped).
// Calls f(b, entry, loop end, steps stamped) for each block that entered and left
// its step loop (warp 0 stamps at most kTimelineSteps steps).
template <typename F>
void for_each_ended_block(const jax_marlin::StreamTimeline& t, F&& f) {
  for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b) {
    const unsigned long long entry = t.main_ns[b][jax_marlin::kMarkEntry];
    const unsigned long long end = t.main_ns[b][jax_marlin::kMarkLoopEnd];
    if (entry == 0 || end == 0) continue;
    int n = 0;
    while (n < jax_marlin::kTimelineSteps && t.step_ns[b][n] != 0) ++n;
    f(b, entry, end, n);
  }
}

void print_steps(const jax_marlin::StreamTimeline& t, unsigned long long t0) {
  struct BlockSteps {
    double entry, first, per_step, end;
    int steps;
  };
  std::vector<BlockSteps> blocks;
  std::vector<double> step_ends;
  bool truncated = false;  // a block with more steps than were stamped
  for_each_ended_block(t, [&](int b, unsigned long long entry, unsigned long long end, int n) {
    truncated = truncated || n == jax_marlin::kTimelineSteps;
    for (int i = 0; i < n; ++i) step_ends.push_back((t.step_ns[b][i] - t0) / 1e3);
    // (A wgmma stream-K block's later segment restamps the first slots: out of order.)
    if (n < 2 || t.step_ns[b][n - 1] < t.step_ns[b][0]) return;
    blocks.push_back({(entry - t0) / 1e3, (t.step_ns[b][0] - t0) / 1e3,
                      (t.step_ns[b][n - 1] - t.step_ns[b][0]) / 1e3 / (n - 1), (end - t0) / 1e3,
                      n});
  });
  if (blocks.size() < 10) {
    std::printf("%27s fewer than 10 blocks with 2 or more step stamps\n", "steps:");
    return;
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const BlockSteps& x, const BlockSteps& y) { return x.end < y.end; });
  const size_t tenth = blocks.size() / 10;
  std::printf("%27s", "steps by loop end:");
  const char* names[] = {"first tenth", "middle tenth", "last tenth"};
  const size_t starts[] = {0, blocks.size() / 2 - tenth / 2, blocks.size() - tenth};
  for (int g = 0; g < 3; ++g) {
    double first = 0, per_step = 0, steps = 0;
    for (size_t i = starts[g]; i < starts[g] + tenth; ++i) {
      first += blocks[i].first;
      per_step += blocks[i].per_step;
      steps += blocks[i].steps;
    }
    std::printf("  %s: first step %.2f us, %.3f us a step after it (%.1f steps)", names[g],
                first / tenth, per_step / tenth, steps / tenth);
  }
  const double median_end = blocks[blocks.size() / 2].end, last_end = blocks.back().end;
  std::printf("\n%27s", "from median end - 4 us:");
  for (double at = median_end - 4; at < last_end; at += 1) {
    int running = 0, ended = 0;
    for (const BlockSteps& b : blocks) running += b.entry <= at && at < b.end;
    for (double e : step_ends) ended += at <= e && e < at + 1;
    std::printf(" %+.0f: %d blocks, %d steps;", at - median_end, running, ended);
  }
  std::printf("%s\n", truncated ? " (blocks past the stamped steps: counts are short)" : "");
  // Warp 0's step i took (end of step i - end of step i - 1), the mean over the blocks
  // that stamped step i: a cost that comes every few steps (the tile split's per-warp
  // phases of A, stream_plan.h) shows as a period here, where the means above hide it.
  std::printf("%27s", "step i, mean us:");
  for (int i = 1; i < 16; ++i) {
    double sum = 0;
    int count = 0;
    for_each_ended_block(t, [&](int b, unsigned long long, unsigned long long, int n) {
      if (i < n && t.step_ns[b][i] > t.step_ns[b][i - 1]) {
        sum += (t.step_ns[b][i] - t.step_ns[b][i - 1]) / 1e3;
        ++count;
      }
    });
    if (count == 0) break;
    std::printf(" %d: %.3f;", i, sum / count);
  }
  std::printf("\n");
}

// Whose stamps a timeline reads: the streaming kernels' or the wgmma kernel's,
// with their marks' names (stream_timeline.h).
struct TimelineSource {
  cudaError_t (*reset)();
  cudaError_t (*read)(jax_marlin::StreamTimeline*);
  const char* const* mark_names;
  int mark_count;
  int exit_mark;
  int loop_start_mark;  // the first step or stage done: the clock is read from it to the loop end
};
#ifdef JAX_MARLIN_STREAM_TIMELINE
const char* const kStreamMarkNames[] = {"entry", "A staged", "sums", "first step", "loop end",
                                        "exit"};
static_assert(sizeof kStreamMarkNames / sizeof *kStreamMarkNames == jax_marlin::kStreamMarks,
              "a name a mark");
const TimelineSource kStreamSource{jax_marlin::ResetStreamTimeline,
                                   jax_marlin::ReadStreamTimeline, kStreamMarkNames,
                                   jax_marlin::kStreamMarks, jax_marlin::kMarkExit,
                                   jax_marlin::kMarkFirstStep};
#endif
#ifdef JAX_MARLIN_WGMMA_TIMELINE
const char* const kWgmmaMarkNames[] = {"entry",    "ring ready", "stage 0 in", "stage 0 issued",
                                       "loop end", "exchanged",  "exit"};
static_assert(sizeof kWgmmaMarkNames / sizeof *kWgmmaMarkNames == jax_marlin::kWgmmaMarks,
              "a name a mark");
const TimelineSource kWgmmaSource{jax_marlin::ResetWgmmaTimeline, jax_marlin::ReadWgmmaTimeline,
                                  kWgmmaMarkNames, jax_marlin::kWgmmaMarks,
                                  jax_marlin::kWgMarkExit, jax_marlin::kWgMarkFirstIssued};
#endif

// `call` captured into a graph, replayed three times, then once more with the
// stamps cleared: microseconds from the first block's entry to each mark
// (median and last over the blocks that reached it), the blocks' spread of
// entries, the gap from the main kernel's last exit to the reduce kernel's
// first entry, and the reduce kernel's span.
void print_timeline(cudaStream_t stream, const std::function<void()>& call,
                    const TimelineSource& source, const char* label = "timeline:") {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  call();
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));
  CHECK(source.reset());
  CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));
  static jax_marlin::StreamTimeline t;
  CHECK(source.read(&t));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  unsigned long long t0 = ~0ull;
  int blocks = 0;
  for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b) {
    if (t.main_ns[b][jax_marlin::kMarkEntry] == 0) continue;
    ++blocks;
    t0 = std::min(t0, t.main_ns[b][jax_marlin::kMarkEntry]);
  }
  if (blocks == 0) {
    std::printf("%27s no stamps (a kernel built without the timeline?)\n", label);
    return;
  }
  const char* const* names = source.mark_names;
  std::printf("%27s %d blocks; us from the first entry, median / last:", label, blocks);
  unsigned long long main_end = 0;
  for (int mark = 0; mark < source.mark_count; ++mark) {
    std::vector<double> us;
    for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b) {
      const unsigned long long v = t.main_ns[b][mark];
      if (t.main_ns[b][jax_marlin::kMarkEntry] != 0 && v != 0) us.push_back((v - t0) / 1e3);
      if (mark == source.exit_mark) main_end = std::max(main_end, v);
    }
    if (us.empty()) continue;
    std::sort(us.begin(), us.end());
    std::printf("  %s %.2f / %.2f", names[mark], us[us.size() / 2], us.back());
  }
  // Inside a block, by its SM's cycle counter: median cycles from its entry.
  std::printf("\n%27s", "cycles from a block's entry:");
  for (int mark = 1; mark < source.mark_count; ++mark) {
    std::vector<long long> cycles;
    for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b) {
      if (t.main_ns[b][jax_marlin::kMarkEntry] != 0 && t.main_ns[b][mark] != 0)
        cycles.push_back(t.main_clock[b][mark] - t.main_clock[b][jax_marlin::kMarkEntry]);
    }
    if (cycles.empty()) continue;
    std::sort(cycles.begin(), cycles.end());
    std::printf("  %s %lld", names[mark], cycles[cycles.size() / 2]);
  }
  // The SM clock the blocks' loops ran at, from the first step (stage) done to the
  // loop's end, each block's cycles over its own nanoseconds: the stamps'
  // microseconds are wall time, and under a heavy load the clock falls far below
  // its 1980 MHz (session 36: ~1540-1590 MHz through a 256-row block's loop in one
  // call, which ran ~1040 cycles a stage against the tensor pipe's 1024), so a
  // stage's time reads against the full rate only in cycles.
  std::vector<double> mhz;
  for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b) {
    const unsigned long long start = t.main_ns[b][source.loop_start_mark];
    const unsigned long long end = t.main_ns[b][jax_marlin::kMarkLoopEnd];
    if (t.main_ns[b][jax_marlin::kMarkEntry] != 0 && start != 0 && end > start)
      mhz.push_back(1e3 * double(t.main_clock[b][jax_marlin::kMarkLoopEnd] -
                                 t.main_clock[b][source.loop_start_mark]) /
                    double(end - start));
  }
  if (!mhz.empty()) {
    std::sort(mhz.begin(), mhz.end());
    std::printf("; SM clock, %s to loop end: %.0f MHz (median over the blocks)",
                names[source.loop_start_mark], mhz[mhz.size() / 2]);
  }
  unsigned long long r0 = ~0ull, r1 = 0;
  for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b) {
    if (t.reduce_ns[b][0] != 0) r0 = std::min(r0, t.reduce_ns[b][0]);
    r1 = std::max(r1, t.reduce_ns[b][1]);
  }
  if (r0 != ~0ull && main_end != 0)
    std::printf("; reduce: gap %.2f, span %.2f", (double(r0) - double(main_end)) / 1e3,
                r1 > r0 ? (r1 - r0) / 1e3 : 0.0);
  // Where the blocks ran: how many SMs held 0, 1, 2, 3+ of them (over the whole
  // run), and the latest loop end among the blocks of SMs with one block and
  // with two, which says whether an SM's second block slows both.
  std::vector<int> per_sm(1024, 0);
  for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b)
    if (t.main_ns[b][jax_marlin::kMarkEntry] != 0) ++per_sm[t.main_sm[b] % 1024];
  int sms_with[4] = {0, 0, 0, 0}, sm_count = 0;
  CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  for (int sm = 0; sm < sm_count && sm < 1024; ++sm) ++sms_with[std::min(per_sm[sm], 3)];
  double last_end[4] = {0, 0, 0, 0};
  for (int b = 0; b < jax_marlin::kTimelineBlocks; ++b) {
    const unsigned long long end = t.main_ns[b][jax_marlin::kMarkLoopEnd];
    if (t.main_ns[b][jax_marlin::kMarkEntry] == 0 || end == 0) continue;
    const int load = std::min(per_sm[t.main_sm[b] % 1024], 3);
    last_end[load] = std::max(last_end[load], (end - t0) / 1e3);
  }
  std::printf("\n%27s SMs with 0 / 1 / 2 / 3+ blocks: %d / %d / %d / %d; last loop end on"
              " SMs of 1 / 2 / 3+ blocks: %.2f / %.2f / %.2f us\n",
              "placement:", sms_with[0], sms_with[1], sms_with[2], sms_with[3], last_end[1],
              last_end[2], last_end[3]);
  print_steps(t, t0);
  // PROBE_BLOCK_DUMP=file: every block's SM, entry, first step end, steps stamped
  // and loop end (us from the first entry), appended, so that several processes'
  // runs can be compared: whether the blocks that end last sit on the same SMs.
  if (const char* path = std::getenv("PROBE_BLOCK_DUMP")) {
    if (FILE* f = std::fopen(path, "a")) {
      for_each_ended_block(t, [&](int b, unsigned long long entry, unsigned long long end, int n) {
        std::fprintf(f, "%s %d %u %.3f %.3f %d %.3f\n", label, b, t.main_sm[b],
                     (entry - t0) / 1e3, n ? (t.step_ns[b][0] - t0) / 1e3 : 0.0, n,
                     (end - t0) / 1e3);
      });
      std::fclose(f);
    }
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  bool small_models = false;
  struct Shape { int64_t M, K, N; };
  std::vector<Shape> named;  // MxKxN arguments: these shapes instead of a list below
  // splits=1,-2,1004: the other grids timed for each shape (split_k_override
  // values; 1000 + C is the group cluster, stream_plan.h).
  std::vector<int> splits = {1, -1, -2, -4, -8};
  std::vector<int64_t> layer_rows;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    g_random = g_random || arg == "random";
    g_values = g_values || arg == "values";
    small_models = small_models || arg == "small";
    // replays=N: longer timings, e.g. for tools/power_sample.py, whose samples of the
    // board's power (a 1-second average) need runs of several seconds to reach the cap.
    if (arg.rfind("replays=", 0) == 0) {
      char* end = nullptr;
      const long n = std::strtol(arg.c_str() + 8, &end, 10);
      if (end == arg.c_str() + 8 || *end != '\0' || n < 1 || n > 1000000) {
        std::fprintf(stderr, "latency_probe: replays=N takes a count from 1 to 1000000, not %s\n",
                     arg.c_str() + 8);
        return 2;
      }
      g_replays = static_cast<int>(n);
    }
    long long m = 0, k = 0, n = 0;
    if (std::sscanf(argv[i], "%lldx%lldx%lld", &m, &k, &n) == 3) named.push_back({m, k, n});
    // layers=1,16: the decoder layer chain (time_layer_chain) at those M instead of the shapes.
    if (arg.rfind("layers=", 0) == 0)
      for (const std::string& item : comma_items(arg.substr(7))) layer_rows.push_back(std::stoll(item));
    if (arg.rfind("splits=", 0) == 0) {
      splits.clear();
      for (const std::string& item : comma_items(arg.substr(7))) splits.push_back(std::stoi(item));
    }
  }
  DeviceLimits device{};
  CHECK(cudaGetDevice(&device.ordinal));
  int major = 0, minor = 0;
  CHECK(cudaDeviceGetAttribute(&device.sm_count, cudaDevAttrMultiProcessorCount, device.ordinal));
  CHECK(cudaDeviceGetAttribute(&device.max_shared_bytes_per_block,
                               cudaDevAttrMaxSharedMemoryPerBlockOptin, device.ordinal));
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.ordinal));
  CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.ordinal));
  device.compute_capability = 10 * major + minor;
  int l2_bytes = 0;
  CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device.ordinal));
  device.l2_bytes = l2_bytes;
  CHECK(jax_marlin::QueryClusterBlocks(&device));
  std::printf("blocks placed at once in clusters of 2, 4, 8: %d, %d, %d\n",
              device.cluster_blocks[0], device.cluster_blocks[1], device.cluster_blocks[2]);
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* scratch = nullptr;
  CHECK(cudaMalloc(&scratch, 4));

  // The streaming kernel's footprint: most of an SM's shared memory a block.
  const int big_smem = device.max_shared_bytes_per_block - 1024;
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big_smem));
  const int sms = device.sm_count;
  std::printf("us per item, graphs of %d items (median of 3 x %d replays), %s buffers\n", kItems,
              g_replays, g_random ? "random" : g_values ? "model-like" : "zero");
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
  {
    std::vector<CapturedCall> small{capture_call(stream, [&] {
      small_kernel<<<1, 64, 0, stream>>>(scratch);
    })};
    std::vector<CapturedCall> big{capture_call(stream, [&] {
      empty_kernel<<<sms, 256, big_smem, stream>>>();
    })};
    std::printf("small kernel, each a child graph         %7.2f\n", child_graphs_us(stream, small));
    std::printf("empty (%d KB shared), each a child graph %7.2f\n", big_smem / 1024,
                child_graphs_us(stream, big));
    CHECK(cudaGraphDestroy(small[0].graph));
    CHECK(cudaGraphDestroy(big[0].graph));
  }

  if (!layer_rows.empty()) {
    for (int64_t m : layer_rows) time_layer_chain(stream, device, scratch, m);
    CHECK(cudaStreamSynchronize(stream));
    return 0;
  }

  const std::vector<Shape> shapes =
      !named.empty() ? named
      : small_models
          // The projections of ~0.5B and ~1B decoders (hidden 896, intermediate 4864,
          // 2 KV heads of 64; hidden 2048, intermediate 8192, 8 KV heads of 64),
          // fused as examples/decode.py fuses them (qkv, gate/up), and the unfused
          // k/v projections. Few 64-column tiles or short k: where the planner takes
          // stream-K with a reduce kernel today.
          ? std::vector<Shape>{{1, 896, 1152},  {1, 896, 896},    {1, 896, 128},
                               {1, 896, 9728},  {1, 4864, 896},   {1, 2048, 3072},
                               {1, 2048, 2048}, {1, 2048, 512},   {1, 2048, 16384},
                               {1, 8192, 2048}, {16, 896, 1152},  {16, 2048, 512}}
          : std::vector<Shape>{{1, 256, 512},    {1, 4096, 4096},  {1, 4096, 6144},
                               {1, 14336, 4096}, {1, 4096, 28672}, {1, 8192, 28672},
                               {16, 4096, 4096}};
  std::printf("\n     M      K      N  kernel  copies  GEMM us  GEMM + small kernel us  GB/s"
              "  kernels alone us (grid)\n");
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
    std::printf("%6lld %6lld %6lld  %-6s  %6d  %7.2f  %22.2f  %5.0f ", (long long)s.M,
                (long long)s.K, (long long)s.N, kernel, count, alone, with_small,
                bytes / alone / 1e3);
    std::printf(" [%s]", grid_name(g.copies[0], device, 0).c_str());
    // Each kernel of the call on its own (the main kernel, then the reduce
    // kernel where the plan cuts a column group).
    std::vector<CapturedCall> calls;
    for (int c = 0; c < count; ++c)
      calls.push_back(capture_call(stream, [&] { gemm(c); }));
    for (const CapturedCall& c : calls) {
      if (c.kernels.size() != calls[0].kernels.size()) {
        std::printf("calls of one shape launched different kernel counts\n");
        std::exit(1);
      }
    }
    for (size_t k = 0; k < calls[0].kernels.size(); ++k) {
      cudaKernelNodeParams params{};
      CHECK(cudaGraphKernelNodeGetParams(calls[0].kernels[k], &params));
      cudaLaunchAttributeValue cluster{};
      CHECK(cudaGraphKernelNodeGetAttribute(calls[0].kernels[k],
                                            cudaLaunchAttributeClusterDimension, &cluster));
      std::printf(" %.2f (%u x %u, cluster %u, %u thr)", kernel_alone_us(stream, calls, k),
                  params.gridDim.x, params.gridDim.y, cluster.clusterDim.x, params.blockDim.x);
    }
    std::printf("  each call a child graph: %.2f", child_graphs_us(stream, calls));
    for (CapturedCall& c : calls) CHECK(cudaGraphDestroy(c.graph));
    std::printf("\n");
    // Other grids for the same GEMM, through split_k_override: 1 plans no
    // k-split; -C forces the tile split with C blocks a tile where it fits
    // (stream_plan.h). Whichever kernel each takes, timed the same way.
    std::printf("%27s", "split_k_override:");
    for (int split : splits) {
      const double us = graph_us(stream, [&](int i) {
        CHECK(jax_marlin::LaunchMarlinGemm(g.copies[i % count], device, split, stream));
      });
      std::printf("  %d: %.2f us (%s%s)", split, us, grid_name(g.copies[0], device, split).c_str(),
                  resident(stream, [&] {
                    CHECK(jax_marlin::LaunchMarlinGemm(g.copies[0], device, split, stream));
                  }).c_str());
    }
    std::printf("\n");
#ifdef JAX_MARLIN_STREAM_TIMELINE
    for (int split : splits) {
      char label[32];
      std::snprintf(label, sizeof label, "timeline, split %d:", split);
      print_timeline(stream, [&] {
        CHECK(jax_marlin::LaunchMarlinGemm(g.copies[0], device, split, stream));
      }, kStreamSource, label);
    }
    print_timeline(stream, [&] { gemm(0); }, kStreamSource);
#endif
#ifdef JAX_MARLIN_WGMMA_TIMELINE
    print_timeline(stream, [&] { gemm(0); }, kWgmmaSource, "wgmma timeline:");
#endif
    for (void* p : g.buffers) CHECK(cudaFree(p));
  }
  CHECK(cudaStreamSynchronize(stream));
  return 0;
}
