#!/usr/bin/env bash
# Session 29, call D: the 16-row stream-K kernels one block an SM with every register
# (wip/wide-one-block, -DJAX_MARLIN_STREAM_WIDE_ONE_BLOCK=1) against main, probe, two
# rounds, random bits. In a checkout of the branch:
#   rm -rf .variants && mkdir -p .variants/main .variants/wide1
#   git archive main ffi | tar -x -C .variants/main
#   git archive HEAD ffi | tar -x -C .variants/wide1
#   echo "-DJAX_MARLIN_STREAM_WIDE_ONE_BLOCK=1" > .variants/wide1/CUDA_FLAGS
#   run(command="bash docs/perf/session29/callD.sh", carry=[".variants"])
# Why: call B/C's ncu has the 16-row kernel at 8192 x 28672 latency-bound (6.6 cycles a
# warp between issues, "wait" 31% of the samples), with 762 executed instructions a
# warp-step against 524 at M = 1, 23.5% of them outside the step loop (A's phases), at the
# 128-register cap; 16 x 28672 x 8192 already runs one block an SM (195 KB) and matches
# it in the bench. *Predicted*: 16 x 8192 x 28672 -5 to +5% (fewer warps against no phases
# and more registers: ptxas takes 135 of them); 28672 x 8192 (the same grid, 8 more
# registers) within 2%.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 16x8192x28672 12x8192x28672 9x8192x28672
  16x28672x8192 16x4096x28672 16x4096x14336 16x14336x4096" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override
echo "total $(el) s"
