// Optional timestamps of the streaming kernels, for tools/latency_probe.cu:
// a build with -DJAX_MARLIN_STREAM_TIMELINE has thread 0 of every block record
// %globaltimer (ns, one clock for the whole GPU) and its SM's cycle counter at
// a few points of its run,
// so that a small GEMM's fixed latency can be split into launch ramp, A
// staging, the first step, the loop, the epilogue, the kernel boundary and the
// reduce. Every other build compiles the marks to nothing (the package's
// kernels are bit for bit the same with or without this header).
#pragma once

#include <cuda_runtime.h>

namespace jax_marlin {

// The points a main-kernel block marks, in order (the tile split and stream-K
// alike; a stream-K block's flushes happen inside its loop).
enum StreamMark : int {
  kMarkEntry = 0,   // the block starts
  kMarkAStaged,     // A landed and published (the first block barrier; where the tile
                    // split stages A per warp, M = 9-16: warp 0's own A)
  kMarkSums,        // A's group sums published (the second barrier; A per warp: warp 0's)
  kMarkFirstStep,   // warp 0 finished its first step
  kMarkLoopEnd,     // warp 0 left its step loop, its copies landed
  kMarkExit,        // the block's last instruction (after the tile split's epilogue)
  kStreamMarks
};
// The wgmma kernel's points (-DJAX_MARLIN_WGMMA_TIMELINE, wgmma_kernel.cu), in
// the same record: a 256-row or k-split block's fixed cost (the model's ten
// stage times a block, wgmma_plan.h) split into its launch, the ring's first
// stage, the on-chip exchange and the stores. Thread 0 (a consumer) marks;
// the block is the linear index over (x, y, z).
// Up to 128 rows (the cp.async ring, no producer) "ring ready" follows the
// prologue's copies being issued, not a barrier, and "stage 0 in" is the
// first loop barrier, which also waits for the stages after it that have to
// have landed; step_ns[s] is stage s's wgmmas issued (stage s - 1's done).
enum WgmmaMark : int {
  kWgMarkEntry = 0,    // the block starts (its consumers past setmaxnreg)
  kWgMarkRingReady,    // the prologue's block barrier passed (the ring's barriers set up)
  kWgMarkFirstStage,   // stage 0's bytes landed (its wait passed)
  kWgMarkFirstIssued,  // stage 0 dequantized and its wgmmas issued
  kWgMarkLoopEnd,      // every wgmma of the block's k-range completed
  kWgMarkExchanged,    // a cluster's k-split: the peer's half landed here
  kWgMarkExit,         // the outputs stored (the block's last instruction)
  kWgmmaMarks
};
static_assert(int{kMarkEntry} == int{kWgMarkEntry} && int{kMarkLoopEnd} == int{kWgMarkLoopEnd},
              "the probe and stamp_mark read both records' entry and loop end from one slot");
constexpr int kTimelineMarks =
    int{kWgmmaMarks} > int{kStreamMarks} ? int{kWgmmaMarks} : int{kStreamMarks};
constexpr int kTimelineBlocks = 2048;  // blocks past this are not recorded
// Warp 0's end of each of its first kTimelineSteps steps (every grid; with A in
// phases too), so the probe can tell a block that started late from one that
// streamed slower (the GEMV's tail, NOTES session 16). %globaltimer may tick at
// ~1 us, coarse beside a step: read means over many blocks, not one block.
constexpr int kTimelineSteps = 48;

struct StreamTimeline {
  unsigned long long main_ns[kTimelineBlocks][kTimelineMarks];  // 0: not reached
  // The SM's cycle counter at the same marks: fine-grained durations inside a
  // block, where %globaltimer may tick coarsely (~1 us on some parts).
  long long main_clock[kTimelineBlocks][kTimelineMarks];
  unsigned main_sm[kTimelineBlocks];
  unsigned long long step_ns[kTimelineBlocks][kTimelineSteps];  // 0: not reached
  unsigned long long reduce_ns[kTimelineBlocks][2];  // entry, exit (linear block index)
};

#if defined(JAX_MARLIN_STREAM_TIMELINE) || defined(JAX_MARLIN_WGMMA_TIMELINE)
// A kernel file's record (its __device__ StreamTimeline): cleared, and copied out.
inline cudaError_t clear_timeline(const StreamTimeline& record) {
  static const StreamTimeline zeros{};
  return cudaMemcpyToSymbol(record, &zeros, sizeof zeros);
}
inline cudaError_t copy_timeline(const StreamTimeline& record, StreamTimeline* out) {
  return cudaMemcpyFromSymbol(out, record, sizeof *out);
}
#endif

#ifdef JAX_MARLIN_STREAM_TIMELINE
// Clears the stamps (before the launch to be read) and copies them out after
// it (the caller synchronizes first).
cudaError_t ResetStreamTimeline();
cudaError_t ReadStreamTimeline(StreamTimeline* out);
#endif
#ifdef JAX_MARLIN_WGMMA_TIMELINE
// The same for the wgmma kernel's blocks (step_ns: when thread 0 issued each
// stage's wgmmas; reduce_ns unused).
cudaError_t ResetWgmmaTimeline();
cudaError_t ReadWgmmaTimeline(StreamTimeline* out);
#endif

}  // namespace jax_marlin
