#!/usr/bin/env bash
# Prepared for session 36 (not run): which barrier the 256-row kernel's two try-wait loops
# wait on at 512 x 4096 x 4096 (call D: SASS 440 and 557, 21% of the stall samples; the
# per-instruction CSV was not kept). Keeps the CSV this time and prints the SASS around
# the three busiest sites (tools/ncu_source_summary.py --context).
#   run(command="bash docs/perf/session35/callE_prepared.sh", carry=[".ffi"])
# Predicted: if the busier loop sits after the stage's words' LDS and before its HGMMAs
# (the consumers' full barrier), the producer is late (the copies' latency or the
# producer's issue); if it is in the producer's code (its empty barrier), the consumers
# are the limit and the 0.65 us stage is their dequantize + wgmma issue.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
BUILD_ONLY=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
source tools/gpu_probes.sh
NCU_KERNEL=wgmma_gemm run_ncu_source "--K 4096 --N 4096 --M 512" 150 "$OUT/ncu_source_m512.csv"
python3 tools/ncu_source_summary.py "$OUT/ncu_source_m512.csv" --top 25 --context 14 \
  > "$OUT/ncu_source_m512.summary.txt" 2>&1
cat "$OUT/ncu_source_m512.summary.txt"
gzip -f "$OUT/ncu_source_m512.csv"
