#!/usr/bin/env bash
# Prepared for session 37 (not run): (1) the clock and power of ours against cuBLAS's under
# the same sustained load, shape by shape: session 36 call D saw our 256-row kernel's 64-call
# runs at the 700 W cap with the SM clock at ~1470 MHz; if torch's cuBLAS (the probe's
# stand-in for XLA's nvjet) holds a higher clock at the cap, ours takes more energy a GEMM,
# and the levers are those call B cut (bytes through shared memory, DRAM reads) and
# instructions a stage; (2) the bench's own M = 1 call traced (session 35's item 2, cut
# from session 36 call B by its time limit). ~4-5 minutes.
#   run(command="bash docs/perf/session36/callE_prepared.sh", carry=[".ffi"])
# Predicted: at 512-2048 rows both at ~690 W; cuBLAS's clock higher than ours by about the
# time ratio's shortfall (ours 0.90x at 4096 x 4096 M = 512: ~10% lower clock), if energy
# is what separates them.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
rm -rf .variants && mkdir -p .variants/main && cp -r ffi .variants/main/
(PROBE_ROUNDS=0 bash tools/probe_variants.sh > "$OUT/probe_build.log" 2>&1) &
BUILD_ONLY=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
wait
grep -E "built|FAILED" "$OUT/probe_build.log"
for shape in 512x4096x4096 1024x4096x4096 512x28672x8192 2048x8192x28672; do
  echo "== $shape"
  python3 tools/power_sample.py --out "$OUT/smi_ours_$shape.csv" -- timeout 90 \
    /tmp/probe_obj/main/latency_probe values splits=1 "$shape" > "$OUT/ours_$shape.txt" 2>&1
  grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |power_sample" "$OUT/ours_$shape.txt"
  python3 tools/power_sample.py --out "$OUT/smi_cublas_$shape.csv" -- timeout 90 \
    python3 docs/perf/session35/cublas_probe.py "$shape" > "$OUT/cublas_$shape.txt" 2>&1
  tail -2 "$OUT/cublas_$shape.txt"
done
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 240 python3 tools/bench_trace.py --K 8192 \
  --N 28672 --M 1 --copies 16 --passes 12 --top 10 --out /tmp/bench_trace \
  > "$OUT/bench_trace_m1.txt" 2>&1
tail -40 "$OUT/bench_trace_m1.txt"
