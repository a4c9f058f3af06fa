#!/usr/bin/env bash
# Session 29, call B: where the 16-row streaming kernel's time goes. At 8192 x 28672 the
# main kernel takes ~43 us at M = 16 against ~33 us at M = 1 (session 17's probe) for
# the same 122 MB, so M = 16 is bound by something other than DRAM. (1) ncu's summary
# metrics at M = 1 and 16 (duration, DRAM, executed instructions, issue rate, stalls);
# (2) per-SASS-instruction executed counts and stall samples at M = 16; (3) the dense
# side of 4096 x 4096 at M = 256 in the bench's loop (gap_trace: the kernel XLA runs and
# its duration, which session 28's call F could not name).
# (--per 28672: 3584 steps x 8 warps, the executed mix a warp-step.)
#   run(command="bash docs/perf/session29/callB.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "build exit $? at $(el) s"
source tools/gpu_probes.sh
for m in 1 16; do
  NCU_KERNEL=stream_gemm run_ncu "--K 8192 --N 28672 --M $m" 90 "$OUT/ncu.txt"
done
echo "ncu done at $(el) s"
NCU_KERNEL=stream_gemm run_ncu_source "--K 8192 --N 28672 --M 16" 120 /tmp/ncu_src16.csv
cp /tmp/ncu_src16.csv.txt "$OUT/ncu_src16.txt"
gzip -c /tmp/ncu_src16.csv > "$OUT/ncu_src16.csv.gz"
python3 tools/ncu_source_summary.py /tmp/ncu_src16.csv --top 40 --per 28672 > "$OUT/ncu_src16_summary.txt" 2>&1
head -40 "$OUT/ncu_src16_summary.txt"
echo "ncu source done at $(el) s"
(cd /tmp && timeout 100 python3 "$OLDPWD/tools/gap_trace.py" --K 4096 --N 4096 --M 256 \
  --copies 29 --cases dense --wall-passes 32) > "$OUT/gap_trace.txt" 2>&1
grep -v "^WARNING\|^I0000\|^W0000" "$OUT/gap_trace.txt" | tail -8
rm -f "$OUT/pytest.log"
echo "total $(el) s"
