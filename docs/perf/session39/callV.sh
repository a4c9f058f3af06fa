#!/usr/bin/env bash
# Session 39 call V (session 38's callV_prepared.sh, moved here, plus racecheck on the sweep's new M = 12, K = 4100 shape): the decode example's refresh (issue 4; decode_h200.json
# is session 32's call A: 1.91x at batch 1, 1.39x at batch 16) now that the tile split's
# 16-row kernels stage A per warp (bae7cbc: 16 x 4096 x 6144, the fused qkv at batch 16,
# 13.56 -> 12.10 us; 16 x 4096 x 4096, o, 9.15 -> 8.71), then the rest of session 37's
# prepared call L: M = 128 and 2048 on the three headline shapes at 20 ms calls.
# Predicted: batch 1 within the 1.91-1.97x of sessions 30-32 (no M = 1 kernel changed);
# batch 16 1.39x -> ~1.40-1.43x (qkv and o are ~1/5 of a layer's weight bytes; their kernels
# gained ~1.9 us of the ~68 us that a layer's four GEMMs take at M = 16 in call R / P's probes); M = 128 and 2048 within 3% of sessions 32-33's rows.
# Then: cp "$OUT/decode.json" docs/perf/decode_h200.json if it ran whole, and
# PYTHONPATH=. python3 docs/perf/session37/merge_h200.py <this call's bench.csv>.
#   run(command="bash docs/perf/session39/callV.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE=racecheck SANITIZE_TIMEOUT=100 SKIP_EXAMPLES=1 DECODE=" " DECODE_TIMEOUT=150 bash tools/device_check.sh --co -q \
  > "$OUT/check.log" 2>&1
echo "decode exit $?"; grep -E "tokens/s|x faster|build took|batch" "$OUT/check.log" | head -20
rm -f "$OUT/build.log" "$OUT/pytest.log"
cd /tmp  # the installed package, not the checkout's source tree
timeout 210 python3 -m jax_marlin.bench --shapes 8192x28672,28672x8192,4096x4096 --ms 128,2048 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin --no-repack --no-layer-stack \
  --budget-s 170 --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -q "'cuda': True" "$OUT/bench.log" || echo "the bench ran without the CUDA module"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
grep -hE "SUMMARY|hazard|sanitize sweep" "$OUT"/sanitize_racecheck.log* | tail -4
cd "$OUT" && tar czf logs.tgz $(ls sanitize_* build.log 2>/dev/null) && rm -f sanitize_* build.log
