#!/usr/bin/env bash
# Session 29, call C: (1) the issue's "group sizes 32 and per-channel within 10% of the
# group-128 figures at M <= 16", last measured in session 11: the bench at M = 1 and 16
# on the two large shapes, groups 32, 128 and per-channel, fp16, dense and ours only;
# (2) call B's ncu source view at 16 x 8192 x 28672 again (ncu crashed there): the
# executed instructions and stall samples per SASS line of the 16-row kernel.
#   run(command="bash docs/perf/session29/callC.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 BENCH="--shapes 8192x28672,28672x8192 --ms 1,16 --dtypes float16 \
  --groups 32,128,-1 --impls dense,jax_marlin --no-forced --no-layer-stack --no-repack \
  --budget-s 200" bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "build and bench exit $? at $(el) s"
grep -E "^ *(8192|28672) " "$OUT/check.log" | head -40
source tools/gpu_probes.sh
for try in 1 2; do
  NCU_KERNEL=stream_gemm run_ncu_source "--K 8192 --N 28672 --M 16" 100 /tmp/ncu_src16.csv
  [ "$(wc -l < /tmp/ncu_src16.csv)" -gt 10 ] && break
done
cp /tmp/ncu_src16.csv.txt "$OUT/ncu_src16.txt"
gzip -c /tmp/ncu_src16.csv > "$OUT/ncu_src16.csv.gz"
python3 tools/ncu_source_summary.py /tmp/ncu_src16.csv --top 40 --per 28672 \
  > "$OUT/ncu_src16_summary.txt" 2>&1
head -30 "$OUT/ncu_src16_summary.txt"
rm -f "$OUT/pytest.log" "$OUT/bench.png"
echo "total $(el) s"
