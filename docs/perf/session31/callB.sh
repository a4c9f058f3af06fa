#!/usr/bin/env bash
# Session 31 call B: where decode's batch-1 time goes now, and whether the scan's loop
# costs a token anything. Build main (+ examples/decode.py's new --unroll/--repeats),
# then decode.py: (1) defaults (unroll 1, median of 3 timed calls); (2) --unroll 8;
# (3) --steps 256; (4) the kernel trace at batch 1; (5) ncu source counters on
# 16 x 8192 x 28672's streaming kernel (issue 3's M = 16 item: where the waits sit).
#   run(command="bash docs/perf/session31/callB.sh", carry=[".ffi"])
# Predicted: unroll 8 moves fp16 and 4-bit alike by at most a few us a token (the loop's
# per-iteration cost); --steps 256 within 2% of 64 (the per-call dispatch is ~1%).
# (--unroll was an uncommitted option of decode.py for this call; it moved nothing and
# was dropped, so (2) no longer runs as written.)
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
python3 -m pip install --no-build-isolation --no-deps . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built at $(el) s"
cd /tmp
for a in "" "--unroll 8" "--steps 256"; do
  echo "== decode.py $a"
  timeout 150 python3 "$repo/examples/decode.py" $a 2>&1 | grep -E "tokens/s|Error|error" | tail -6
  echo "at $(el) s"
done > "$OUT/decode_variants.log"
cat "$OUT/decode_variants.log"
timeout 150 python3 "$repo/tools/decode_trace.py" --batch 1 --steps 16 > "$OUT/decode_trace.log" 2>&1
head -70 "$OUT/decode_trace.log" | cut -c1-140
echo "trace at $(el) s"
cd "$repo"; source tools/gpu_probes.sh
run_ncu_source "--K 8192 --N 28672 --M 16" 150 "$OUT/ncu_source_m16.csv"
echo "total $(el) s"
