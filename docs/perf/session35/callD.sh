#!/usr/bin/env bash
# Session 35, call D: every GPU test on this session's tree (daced9e's timeline marks are
# no-ops in the package's build: its wgmma SASS was compared on the CPU), then where the
# 256-row consumers wait between their stages at 512 x 4096 x 4096 (Nsight Compute's
# per-instruction stall samples; call A: 0.65 us a stage against 0.52 at the tensor
# pipe's full rate, ~4 us of the 27 us kernel).
#   run(command="bash docs/perf/session35/callD.sh", carry=[".ffi"])
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
SKIP_EXAMPLES=1 TEST_TIMEOUT=220 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
tail -15 "$OUT/check.log"
source tools/gpu_probes.sh
NCU_KERNEL=wgmma_gemm run_ncu_source "--K 4096 --N 4096 --M 512" 150 "$OUT/ncu_source_m512.csv"
python3 tools/ncu_source_summary.py "$OUT/ncu_source_m512.csv" --top 25 > "$OUT/ncu_source_m512.summary.txt" 2>&1
head -60 "$OUT/ncu_source_m512.summary.txt"
rm -f "$OUT/ncu_source_m512.csv"
