#!/usr/bin/env bash
# Prepared for session 20 (not run): the deeper wgmma rings against main, probe in CUDA graphs.
# Variants first, on this machine (from the repository root):
#   rm -rf .variants && mkdir -p .variants/main .variants/deep
#   git archive main ffi | tar -x -C .variants/main
#   git archive wip/wgmma-deeper-ring ffi | tar -x -C .variants/deep
#   echo "-DJAX_MARLIN_WGMMA_PREFETCH_128=6 -DJAX_MARLIN_WGMMA_PREFETCH_32=8" > .variants/deep/CUDA_FLAGS
# then run(command="bash docs/perf/session19/callG_prepared.sh", carry=[".variants"]).
# 128-row shapes (M = 65-128, and 256 x 4096 x 4096 / 256 x 8192 x 4096 as 128-row clusters),
# then 32-row shapes (M <= 32): the two knobs touch disjoint row counts, so one variant holds both.
set -u
PROBE_TIMEOUT=150 PROBE_ROUNDS=2 PROBE_ARGS="splits= 128x8192x28672 128x28672x8192 100x4096x14336 256x4096x4096 256x8192x4096 32x8192x28672 32x28672x8192 20x4096x14336 32x4096x4096" \
  bash tools/probe_variants.sh 2>&1 | tee $OUT/probe_deep.log | grep -v "split_k_override:$"
