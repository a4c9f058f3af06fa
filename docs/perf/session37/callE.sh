#!/usr/bin/env bash
# Prepared in session 36, run in session 37 as call E (output: callE/): (1) the clock and power of ours against cuBLAS's under
# the same sustained load, shape by shape. Session 36 found our 256-row kernel's loop at
# ~1040 cycles a stage against the tensor pipe's 1024 (the timeline's cycles over its
# nanoseconds: ~1540-1590 MHz even in one call after the warm-up), and its 64-call runs at
# the 700 W cap with the clock near 1470 MHz. So at M >= 256 its time is cycles (the loop
# at full rate, plus the prologue, the on-chip exchange and the stores) over a clock that
# falls under its load. If torch's cuBLAS (the stand-in for XLA's nvjet) holds a higher
# clock at the cap, ours takes more energy a GEMM; if the same, its fewer fixed cycles are
# the gap.
# (2) The bench's own M = 1 call traced (session 35's item 2, cut from session 36 call B).
# ~5 minutes.
#   run(command="bash docs/perf/session37/callE.sh", carry=[".ffi"])
# Each timing ~4 s (replays scaled to the shape) so that the board's power, a 1-second
# average, reaches the cap; one shape a run, no other grids (splits=), so each summary
# line's clock belongs to one kernel. Predicted: both at ~690 W at every shape; at 4096 x
# 4096 M = 512 (ours 0.90x of nvjet in the bench) the clocks within ~5% of each other,
# the gap then being our ~10,000 fixed cycles a block against the loop's ~33,000.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main && cp -r ffi .variants/main/
(PROBE_ROUNDS=0 bash tools/probe_variants.sh > "$OUT/probe_build.log" 2>&1) &
BUILD_ONLY=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
wait
grep -E "built|FAILED" "$OUT/probe_build.log"
for case in 512x4096x4096:700 1024x4096x4096:400 512x28672x8192:56 2048x8192x28672:14; do
  shape=${case%%:*} replays=${case##*:}
  echo "== $shape ($replays replays a timing)"
  python3 tools/power_sample.py --out "$OUT/smi_ours_$shape.csv" -- timeout 120 \
    /tmp/probe_obj/main/latency_probe values splits= "replays=$replays" "$shape" \
    > "$OUT/ours_$shape.txt" 2>&1
  grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |power_sample" "$OUT/ours_$shape.txt"
  # ours times the GEMM four ways (alone, with a small kernel, its kernels, child graphs):
  # cuBLAS's one timing gets four times the replays, for as long a load
  CUBLAS_PROBE_REPLAYS=$((4 * replays)) python3 tools/power_sample.py --out "$OUT/smi_cublas_$shape.csv" \
    -- timeout 120 python3 docs/perf/session35/cublas_probe.py "$shape" \
    > "$OUT/cublas_$shape.txt" 2>&1
  tail -2 "$OUT/cublas_$shape.txt"
done
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 240 python3 tools/bench_trace.py --K 8192 \
  --N 28672 --M 1 --copies 16 --passes 12 --top 10 --out /tmp/bench_trace \
  > "$OUT/bench_trace_m1.txt" 2>&1
tail -40 "$OUT/bench_trace_m1.txt"
