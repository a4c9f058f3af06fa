#!/usr/bin/env bash
# Session 31 call C: the bench for docs/perf/h200.csv on main (session 27 call C's sweep,
# M = 4096 added, the layer-stack and repack sections on).
#   run(command="bash docs/perf/session31/callC.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SKIP_EXAMPLES=1 \
  BENCH="--shapes 8192x28672,28672x8192,4096x4096 --ms 1,4,16,64,256,1024,4096 --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --budget-s 330" \
  bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "exit $?"
grep -E "^\[sweep|build took|total" "$OUT/check.log" | tail -12
rm -f "$OUT/build.log" "$OUT/pytest.log"
