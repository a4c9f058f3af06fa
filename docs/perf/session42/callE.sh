#!/usr/bin/env bash
# Session 42 call E: the GPU tests and the sanitizers on the tree that lands the walk in
# the 16-row tile split with the phase cap at 56 (call D's variant, whose 16-row
# stream-K instances now keep main's staging as well; in ffi/).
#   run(command="bash docs/perf/session42/callE.sh", carry=[".ffi"])  (~5 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
grep -c AStagingWalk ffi/stream_kernel.cu
grep "define JAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS" ffi/stream_plan.h
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SKIP_EXAMPLES=1 TEST_TIMEOUT=240 timeout 560 bash tools/device_check.sh -n 8 -m gpu -q \
  > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
bash tools/check_summary.sh "$OUT/gpu_tests.txt"
