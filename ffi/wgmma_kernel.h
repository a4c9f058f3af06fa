// The Hopper (sm_90a) wgmma kernel for M = 17..4096 rows: an internal launcher,
// chosen by LaunchMarlinGemm (marlin_kernel.cu). No XLA here. Design:
// docs/design/wgmma.md.
#pragma once

#include <cuda_runtime.h>

#include "marlin_kernel.h"

namespace jax_marlin {

// split_k_override that sends M > 16 to the tiled mma.sync kernel even where
// this one applies (tests reach both paths with it).
constexpr int kForceTiledKernel = -2000;
// split_k_override that keeps this kernel's plan but adds a 2-way k-split with
// the reduce kernel where the plan adds it on chip (cluster_k): the same grid
// and k ranges, so a test compares the two sums' bits.
constexpr int kForceWgmmaReduce = -2001;
// split_k_override that runs 256-row plans with the cp.async mainloop instead
// of the producer warpgroup's (wgmma_plan.h JAX_MARLIN_WGMMA_PRODUCER), on the
// same grid: a test compares the two's bits in one process. Elsewhere the plan
// as with 0.
constexpr int kForceWgmmaCpAsync = -2002;
// split_k_override that keeps a stream-K plan's tiles on the plain grid (one
// block a tile, as before stream-K): a test compares the two's sums, a probe
// their times. Elsewhere the plan as with 0.
constexpr int kForceWgmmaNoStreamK = -2003;
// split_k_override that runs a 256-row plan stream-K whatever its tile count
// (also at or under one block an SM, every tile cut) in place of any k-split
// or on-chip split the planner would take: a probe times it against the plan
// where the planner does not take it (4096 x 4096 at M = 256: 32 tiles), a test
// checks its sums. Elsewhere (fewer than 129 rows; no producer or no stream-K
// workspace at run time) the plan as with 0.
constexpr int kForceWgmmaStreamK = -2004;
// The JAX_MARLIN_WGMMA_PRODUCER the wgmma kernel was compiled with (1, the
// default: the producer warpgroup at 256 rows; 0: none).
int WgmmaProducerBuild();

// Whether the wgmma kernel takes this GEMM on this device: sm_90 with the
// module's sm_90a code loaded, M in [kWgmmaMinM, kWgmmaMaxM], groups of at least
// 32, and its pipeline within the device's shared memory. Past 256 rows the
// blocks are 256-row blocks along gridDim.y, each dequantizing the weights
// again: that still beat dequantize-then-cuBLAS at every M up to 4096 on the
// three large benchmark shapes (sessions 9 and 32, docs/perf/NOTES.md: at 4096
// x 4096 and M = 4096, 228.6 us against the dense path's 239.4). Stream-K runs
// no further than 1024 rows (ops.py sizes its workspace for those alone).
// ops.py's WGMMA_MAX_M (the same 4096) decides what impl="auto" sends here.
// (Session 31's knob JAX_MARLIN_WGMMA_MAX_M, which timed the range past 1024
// before this default moved, is gone: a smaller cap would have sent M past
// it to the tiled kernel, since ops.py does not read it.)
constexpr int kWgmmaMinM = 17;
constexpr int kWgmmaMaxM = 4096;
bool WgmmaGemmApplies(const MarlinGemmArgs& args, const DeviceLimits& device);

// The grid LaunchWgmmaGemm would launch, for tests and diagnostics (every
// grid gives the same answer, so only this shows which one a shape gets).
// Reads only the shape, group size and workspace size of `args`; false, with
// *info untouched, where WgmmaGemmApplies is false.
struct WgmmaGridInfo {
  int rows;              // activation rows a block (wgmma N): 32, 64, 128 or 256
  int64_t n_blocks;      // gridDim.x: pairs of 64-column tiles
  int64_t m_blocks;      // gridDim.y: blocks of `rows` rows
  int splits;            // gridDim.z: k-splits (> 1: fp32 partials and the reduce kernel,
                         // or with cluster_k the two splits' sum on chip)
  int stages_per_split;  // stages of 64 of k a split (the last may have fewer)
  int smem_bytes;        // dynamic shared memory a block
  int cluster_k;         // 1: the 2 splits of a tile are a cluster that adds on chip (no reduce)
  int producer = 0;      // 1: the producer warpgroup's mainloop (256 rows), 0: cp.async
  // > 0: the producer's tiles (n_blocks x m_blocks of them) run stream-K on this many
  // persistent blocks, one an SM (wgmma_stream_k.h); 0: one block a tile.
  int stream_k_blocks = 0;
};
// Overrides for tests and probes: on_chip_split = false, kForceWgmmaReduce's plan
// (cluster_k = 0); force_cp_async, kForceWgmmaCpAsync's (producer = 0, hence no
// stream-K); stream_k = false, kForceWgmmaNoStreamK's; force_stream_k,
// kForceWgmmaStreamK's.
struct WgmmaOverrides {
  bool on_chip_split = true;
  bool force_cp_async = false;
  bool stream_k = true;
  bool force_stream_k = false;
};
WgmmaOverrides WgmmaOverridesFor(int split_k_override);
bool PlanWgmmaGemm(const MarlinGemmArgs& args, const DeviceLimits& device, WgmmaGridInfo* info,
                   WgmmaOverrides overrides = {});

// Launches it (call only where WgmmaGemmApplies). Allocates nothing, never
// synchronises; a k-split uses the caller's workspace, stream-K its
// stream_k_workspace (the flags zeroed by a memset on `stream` first).
cudaError_t LaunchWgmmaGemm(const MarlinGemmArgs& args, const DeviceLimits& device,
                            cudaStream_t stream, WgmmaOverrides overrides = {});

}  // namespace jax_marlin
