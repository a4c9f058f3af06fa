#!/usr/bin/env bash
# Session 27, call C: the bench for docs/perf/h200.csv on wip/params-epilogue (379e9d8, the
# tree landed after calls A and B), session 23 call J's arguments with a longer budget so
# that no shape is cut; tests only collected (call A ran them on this tree).
#   run(command="bash docs/perf/session27/callC.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SKIP_EXAMPLES=1 \
  BENCH="--shapes 8192x28672,28672x8192,4096x4096 --ms 1,4,16,64,256,1024 --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --no-repack --budget-s ${BENCH_BUDGET:-420}" \
  bash tools/device_check.sh --co -q > $OUT/check.log 2>&1
echo "check exit $?"
grep -E "took|exit|total|wrote" $OUT/check.log
grep -E "x_dense|jax_marlin " $OUT/bench.log | head -80
