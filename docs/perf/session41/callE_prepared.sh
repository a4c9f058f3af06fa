#!/usr/bin/env bash
# Prepared in session 41 (not run): the decode example (issue 4) with wip/l2-hint.patch,
# its 4-bit projections each naming the next as the L2 hint, and with --no-prefetch, in
# one call (the fp16 model runs in both: its tokens/s is the spread between the runs).
# Run after callC_prepared.sh showed the hint winning and callD_prepared.sh passed.
# Predicted: --no-prefetch within the spread of session 39's call V (fp16 / 4-bit tokens/s
# 1718.6 / 3369.9 at batch 1, 1.96x; 26727 / 37245 at batch 16, 1.39x) unless call C's
# pf-without-hint line moved; with the hint, batch 1's 4-bit time a token falls by ~4x
# call C's saving a layer at M = 1 plus ~2 us (the lm head hinting the next step's first
# qkv): at call C's predicted 4-9 us a layer, 297 -> 259-279 us a token, 2.09-2.25x; batch
# 16 by call C's M = 16 saving, 4x, over ~430 us a step.
# Then: cp "$OUT/decode.json" docs/perf/decode_h200.json when the hint lands.
#   run(command="bash docs/perf/session41/callE_prepared.sh", carry=[".ffi"])  (~9 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
git apply docs/perf/session41/wip/l2-hint.patch && echo "patch applied" \
  || { echo "PATCH FAILED"; exit 1; }
BUILD_ONLY=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1; echo "build rc=$?"
cd /tmp  # the installed package, not the checkout's source tree
for form in hint none; do
  args=(); [ "$form" = none ] && args=(--no-prefetch)
  timeout 170 python3 "$repo/examples/decode.py" "${args[@]}" --out "$OUT/decode_$form.json" \
    > "$OUT/decode_$form.log" 2>&1
  echo "== $form rc=$?"; grep -E "Config|tokens/s" "$OUT/decode_$form.log"
done
cp "$OUT/decode_hint.json" "$OUT/decode.json" 2>/dev/null
# The hinted 4-bit model's kernels (tools/decode_trace.py, batch 1, 16 steps): which
# projections' GEMMs got shorter, against session 22's call C (qkv / o / down 8.17 us on
# average, gate/up 19.39, the lm head 22.13).
timeout 150 python3 "$repo/tools/decode_trace.py" --batch 1 --steps 16 --out /tmp/trace \
  > "$OUT/trace_hint.log" 2>&1
echo "== trace rc=$?"; grep -E "events|us  " "$OUT/trace_hint.log" | cut -c1-150 | head -32
