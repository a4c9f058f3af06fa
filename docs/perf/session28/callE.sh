#!/usr/bin/env bash
# Session 28, call E: the bench's layer stack alone, with its timed calls sized like the
# GEMM loops' (>= --min-gemms layers and --min-call-ms; before: two stacks a call).
#   run(command="bash docs/perf/session28/callE.sh", carry=[".ffi"])
# *Predicted* (call D traced one call: 11.7 us a layer dense, 7.0 4-bit; untraced wall of
# 20 back-to-back calls 11.9 / 7.9): ~12 us dense, ~7.5-8 us 4-bit, ratio ~1.5x (the
# bench read 19.3 / 23.2 us, 0.83x, in session 27).
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 BENCH="--no-sweep --layer-stack --no-repack" \
  bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "exit $? at $(el) s"
grep -E "stack|section" "$OUT/bench.log"
rm -f "$OUT/pytest.log"
