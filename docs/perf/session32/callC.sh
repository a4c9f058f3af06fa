#!/usr/bin/env bash
# Session 32 call C: the wgmma kernel to 4096 rows (kWgmmaMaxM = ops.WGMMA_MAX_M = 4096),
# every GPU test, and memcheck + racecheck on the sweep's producer part (now with 2049 rows).
#   run(command="bash docs/perf/session32/callC.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SKIP_EXAMPLES=1 TEST_TIMEOUT=240 SANITIZE="memcheck racecheck" SANITIZE_PARTS="wgmma_producer" \
  SANITIZE_TIMEOUT=90 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "exit $?"
grep -E "passed|failed|error|build took|tests done|total" "$OUT/check.log" | tail -8
for f in /tmp/sanitize_*.log*; do echo "== $f"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|checked|Error" "$f" | head -12; done
cp /tmp/sanitize_*.log* "$OUT/" 2>/dev/null
rm -f "$OUT/build.log"
