#!/usr/bin/env bash
# Prepared in session 40 (no device was lent; not run). Two questions in one call:
# (1) session 39's callZ_prepared.sh (taken in here): where the tile split's per-warp
#     phases spend their time at 16 rows (~0.31 us a block step against ~0.21 for the
#     unphased 9-row kernel, session 39 calls W-X), by timeline builds (warp 0's step
#     ends, stream_timeline.h);
# (2) wip/a-staging-walk.patch: A's staging without dividing by M and the k-steps for every
#     16-byte copy (ffi/stream_plan.h's AStagingWalk). Before it a copy took ~75
#     instructions (sm_90a SASS of the phased 16-row kernel), after it ~41-44; the 16-row
#     per-warp kernels copy 16 a lane a phase (P = 2) and 16-32 a lane in the prologue.
# Variants: main; walk (the patch); cap56 (-DJAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS=56, so
# 16 x 14336 x 4096 runs phased, as in call W); cap56walk; and timeline builds of the four.
# Predicted (probe, CUDA graphs, us; main -> walk):
#   16 x 4096 x 4096 (per-warp A, 16 copies a lane, unphased) 8.74 -> 8.3-8.7;
#   9 x 14336 x 4096 (per-warp A, ~32 copies a lane, unphased) 15.9 -> 15.0-15.8;
#   16 x 11008 x 4096 (phased, C = 2) 17.8 -> 16.5-17.5; 16 x 8192 x 8192 (phased, C = 1)
#   23.7 -> 22-23.5; 16 x 5120 x 5120 15.7 -> 14.8-15.6;
#   M = 1 and the stream-K shapes (block-wide staging, 1-4 copies a thread) within 1%;
#   16 x 14336 x 4096: cap56 ~21.8 (call W), cap56walk <= 20.5 if the copies' index math is
#   what the phase boundary costs (then it beats stream-K's ~20.9 and the cap goes).
#   Timelines: a longer step at each phase start (every 2nd step at P = 2) in tl / cap56tl
#   if the boundary is the cost, evenly longer steps if the 16 rows' A traffic is; the walk
#   should shorten the phase-start steps only.
# The patch changes every streaming kernel's prologue (SASS: 2-20% fewer instructions;
# spills moved in the group-64 16-row instances, bf16 packed-zero-point tile split
# unphased 1 -> 7 spill instructions inside its MMA span), so it lands only after the GPU
# tests and sanitizers pass on it (callB_prepared.sh).
#   run(command="bash docs/perf/session40/callA_prepared.sh", carry=[".ffi"])  (~6 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants
for v in main walk cap56 cap56walk tl walktl cap56tl cap56walktl; do
  mkdir -p ".variants/$v" && cp -r ffi ".variants/$v/"
  # (--include matches the path after --directory's prefix)
  case $v in *walk*) git apply --include=".variants/$v/ffi/*" --directory=".variants/$v" \
    docs/perf/session40/wip/a-staging-walk.patch || echo "PATCH FAILED $v";; esac
  flags=""
  case $v in cap56*) flags="-DJAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS=56";; esac
  case $v in *tl) flags="$flags -DJAX_MARLIN_STREAM_TIMELINE";; esac
  [ -n "$flags" ] && echo "$flags" > ".variants/$v/CUDA_FLAGS"
done
grep -c AStagingWalk .variants/*/ffi/stream_kernel.cu
PROBE_NAMES="tl walktl cap56tl cap56walktl" PROBE_ROUNDS=1 PROBE_ARGS="values splits= \
16x11008x4096 16x14336x4096 9x14336x4096 16x8192x8192 16x4096x4096" timeout 330 \
  bash tools/probe_variants.sh > "$OUT/probe_tl.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ |timeline|cycles from|steps by|step i" \
  "$OUT/probe_tl.log" | cut -c1-160
mkdir -p "$OUT/logs_tl" && mv "$OUT"/probe_*_r*.txt "$OUT/logs_tl/"
PROBE_NAMES="main walk cap56 cap56walk" PROBE_BUILD=0 PROBE_ROUNDS=2 PROBE_ARGS="values splits= \
16x4096x4096 12x4096x4096 16x11008x4096 16x10240x4096 16x8192x8192 16x5120x5120 \
16x14336x4096 9x14336x4096 1x4096x4096 1x14336x4096 1x8192x28672" timeout 240 \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
mkdir -p "$OUT/logs" && mv "$OUT"/probe_*_r*.txt "$OUT/logs/"
rm -rf .variants
tar czf "$OUT/logs.tgz" -C "$OUT" logs_tl logs && rm -rf "$OUT"/logs_tl "$OUT"/logs
