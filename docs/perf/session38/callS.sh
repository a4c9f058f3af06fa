#!/usr/bin/env bash
# Session 38 call S (the short end of session 37's prepared call L, with the budget left):
# groups 32 and per-channel at M = 1 and 16 on 8192 x 28672 at 20 ms calls (issue 3: within
# 10% of group 128's figure), on the working tree's package (call R's kernels).
# Predicted: group 32 at M = 1 ~12-15% slower than group 128 (11.3% more bytes), per-channel
# ~3% faster.
#   run(command="bash docs/perf/session38/callS.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 SKIP_EXAMPLES=1 bash tools/device_check.sh > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
tail -1 /tmp/build.txt
cd /tmp  # the installed package, not the checkout's source tree
timeout 150 python3 -m jax_marlin.bench --shapes 8192x28672 --ms 1,16 --dtypes float16 \
  --groups 128,32,-1 --impls dense,jax_marlin --no-repack --no-layer-stack \
  --csv "$OUT/bench_groups.csv" > "$OUT/bench_groups.log" 2>&1
echo "bench groups rc=$?"
grep -q "'cuda': True" "$OUT/bench_groups.log" || echo "the bench ran without the CUDA module"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench_groups.log"
