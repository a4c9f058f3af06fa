#!/usr/bin/env bash
# Session 37, call F: the bench's calls sized from the time a pass adds
# (Timing.sized_passes), so that every timed call lasts >= --min-call-ms (20 ms) as the
# bench's docstring says. Call E's trace (8192 x 28672, M = 1) found ~0.65 ms a call
# outside the GPU's span for dense and jax_marlin alike, and h200.csv's calls at 3-8 ms
# for jax_marlin (17.5 ms for dense at 8192 x 28672, 8 ms at 4096 x 4096), sized from a
# one-pass call that carried that fixed cost as if it were pass time.
# Predicted (gemms_per_call now putting every call at >= 20 ms): 8192 x 28672 M = 1
# jax_marlin 39.7 -> ~37.5-38.5 us (2.74x -> ~2.8-2.9x), dense within ~1 us of 108.8;
# 4096 x 4096 M = 1 jax_marlin 8.2 -> ~6.2-6.8 us; M >= 64 cells within the run-to-run
# spread (their calls were near 20 ms already).
#   run(command="bash docs/perf/session37/callF.sh", carry=[".ffi"])
# (Its first run timed the XLA fallback, from the checkout: callF/; the CUDA run: callG/.)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 SKIP_EXAMPLES=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
tail -2 "$OUT/build.txt"
# from /tmp: in the checkout, `-m jax_marlin.bench` imports the source tree, which has no
# compiled modules, and times the XLA fallback (call F's first run did)
cd /tmp
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 420 python3 -m jax_marlin.bench \
  --shapes 8192x28672,28672x8192,4096x4096 --ms 1,16,64,256 --dtypes float16,bfloat16 \
  --impls dense,jax_marlin,tinygemm --no-repack --budget-s 330 \
  --csv "$OUT/bench.csv" --plot "$OUT/bench.png" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -q "'cuda': True" "$OUT/bench.log" || { echo "the bench ran without the CUDA module"; head -3 "$OUT/bench.log"; exit 1; }
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
python3 - "$OUT/bench.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(f"{r['K']}x{r['N']} M={r['M']} {r['dtype']} {r['impl']}: {r['gemms_per_call']} GEMMs, "
          f"{float(r['us']) * int(r['gemms_per_call']) / 1e3:.1f} ms a call")
PY
