#!/usr/bin/env bash
# Session 26, call W: the bench, main against wip/stream-k (8173cf9), each in its own process
# in one call (tools/ab_variants.sh): call V's bench read the branch's 8192 x 28672 M = 256 at
# main's call-R time (198.4 against 198.9 us) although the probe read the kernel 4% faster.
#   rm -rf .variants && mkdir -p .variants/main .variants/sk
#   git archive main | tar -x -C .variants/main; git archive wip/stream-k | tar -x -C .variants/sk
#   run(command="bash docs/perf/session26/callW.sh", carry=[".ffi", ".variants"], timeout_s=330)
BENCH="--shapes 8192x28672,28672x8192,4096x4096 --ms 256,768 --dtypes float16 --impls dense,jax_marlin
  --no-forced --no-repack --no-layer-stack --budget-s 70" bash tools/ab_variants.sh
