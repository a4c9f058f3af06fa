#!/usr/bin/env bash
# Session 28, call A: (1) GPU-run 4c520be (the cluster epilogue's one add loop,
# landed on review only): the wgmma and cluster GPU tests, racecheck and memcheck
# on the sweep's wgmma_clusters part; (2) session 28's item 1: where the 64-row
# wgmma instance's issue slots go at 64 x 8192 x 28672 (ncu: executed
# instructions, issue rate, stalls; per-SASS-instruction executed counts and
# stall samples), and the same metrics at M = 128 for comparison.
#   run(command="bash docs/perf/session28/callA.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -rs -k "cluster or wgmma" \
  > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "took|passed|failed|exit|error|Error" "$OUT/check.log" | head -20
source tools/gpu_probes.sh
for tool in racecheck memcheck; do
  SANITIZE_PARTS="wgmma_clusters" run_sanitizer $tool 100 "/tmp/sanitize_$tool.log"
done
for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$OUT/sanitize.log" 2>&1
echo "sanitizers done at $(el) s"
for m in 64 128; do
  NCU_KERNEL=wgmma run_ncu "--K 8192 --N 28672 --M $m" 90 "$OUT/ncu.txt"
done
echo "ncu done at $(el) s"
NCU_KERNEL=wgmma run_ncu_source "--K 8192 --N 28672 --M 64" 120 /tmp/ncu_src64.csv
cp /tmp/ncu_src64.csv.txt "$OUT/ncu_src64.txt"
gzip -c /tmp/ncu_src64.csv > "$OUT/ncu_src64.csv.gz"
python3 tools/ncu_source_summary.py /tmp/ncu_src64.csv --top 40 > "$OUT/ncu_src64_summary.txt" 2>&1
head -30 "$OUT/ncu_src64_summary.txt"
echo "total $(el) s"
