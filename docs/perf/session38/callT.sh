#!/usr/bin/env bash
# Session 38 call T (the budget's last minutes, the machine warm from call S): the 0.95x
# floor's cells at 20 ms calls (session 37's sizing): 4096 x 4096 and 28672 x 8192 at
# M = 256 and 512, fp16 and bf16 (h200.csv: 0.87-0.91 at 4096 x 4096, 0.948 at 28672 x 8192,
# M = 512, fp16, session 32's row). Predicted: within 3% of those rows.
#   run(command="bash docs/perf/session38/callT.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 SKIP_EXAMPLES=1 bash tools/device_check.sh > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
cd /tmp  # the installed package, not the checkout's source tree
timeout 240 python3 -m jax_marlin.bench --shapes 4096x4096,28672x8192 --ms 256,512 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin --no-repack --no-layer-stack \
  --budget-s 200 --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -q "'cuda': True" "$OUT/bench.log" || echo "the bench ran without the CUDA module"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
