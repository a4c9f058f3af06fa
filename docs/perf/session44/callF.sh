#!/usr/bin/env bash
# Session 44 call F (prepared): tinygemm timed as our rows are (the loop: a CUDA graph of
# one pass of 16 weights, nudge and checksum, host wall time a call) against the old way
# (tinygemm_pass: CUDA events around graph replays of bare passes), with our rows both
# ways, at the cells where tinygemm led (4096 x 4096, M = 1, 2; README) and 8192 x 28672.
# *Predicted*: tinygemm's loop rows 0.4-1 us above its pass rows at 4096 x 4096 (the
# checksum's share and a graph launch a pass), so ours (6.8-8.0 us) ahead or tied at M =
# 1-2; the order unchanged elsewhere (ours 32% ahead at 8192 x 28672, M = 1).
#   run(command="bash docs/perf/session44/callF.sh", carry=[".ffi"])  (~5 minutes; after
#   call E on a warm machine the build is quick)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 bash tools/device_check.sh || exit 1
cd /tmp  # the installed package, not the checkout's source tree
timeout 420 python3 -m jax_marlin.bench --shapes 4096x4096,8192x28672 --ms 1,2,4,16 \
  --dtypes float16,bfloat16 --no-repack --no-layer-stack \
  --impls dense,jax_marlin,tinygemm,dense_pass,jax_marlin_pass,tinygemm_pass \
  --csv "$OUT/tinygemm.csv" > "$OUT/tinygemm.log" 2>&1
echo "bench rc=$?"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ |FAILED|WARNING" "$OUT/tinygemm.log"
