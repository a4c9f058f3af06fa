#!/usr/bin/env bash
# Session 27, call A: the branch wip/params-epilogue (a62d9ff StreamKParams, 379e9d8 the
# cluster's kept half through store_outputs), both recreated after the checkout lost
# session 26's branches. Every GPU test, then racecheck and memcheck on the sweep's
# wgmma_clusters, wgmma_producer and wgmma_stream_k parts.
#   run(command="bash docs/perf/session27/callA.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 TEST_TIMEOUT=240 bash tools/device_check.sh -n 8 -m gpu -rs > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "took|passed|failed|exit|error|Error" "$OUT/check.log" | head -30
source tools/gpu_probes.sh
for tool in racecheck memcheck; do
  SANITIZE_PARTS="wgmma_clusters wgmma_producer wgmma_stream_k" \
    run_sanitizer $tool 120 "/tmp/sanitize_$tool.log"
done
for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$OUT/sanitize.log" 2>&1
grep -E "SUMMARY|sanitize sweep|exit" "$OUT/sanitize.log"
echo "total $(el) s"
