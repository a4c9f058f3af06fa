#!/usr/bin/env bash
# session 21 call B: main. racecheck over the ragged sweep one part a process (call A's
# racecheck of the whole sweep crashed in compute-sanitizer twice: once after four parts had
# run, once at start), then the bench for docs/perf/h200.csv (session 18 call E's command).
# No tests (call A ran them on this tree's kernels): pytest only collects.
# run(command="bash docs/perf/session21/callB.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
SKIP_EXAMPLES=1 TEST_TIMEOUT=60 SANITIZE=racecheck SANITIZE_TIMEOUT=110 \
  SANITIZE_PARTS="fused dense dequantize a_phases group_clusters wgmma_clusters" \
  BENCH="--shapes 8192x28672,28672x8192,4096x4096 --ms 1,4,16,64,256,1024 --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --no-repack --budget-s 230" \
  bash tools/device_check.sh --co -q > $OUT/check.log 2>&1
grep -E "took|exit|SUMMARY|sanitize sweep|crashed|total" $OUT/check.log
grep -E "x_dense|jax_marlin " $OUT/bench.log | head -40
