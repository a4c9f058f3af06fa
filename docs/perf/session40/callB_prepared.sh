#!/usr/bin/env bash
# Prepared in session 40 (not run): the GPU tests, memcheck and racecheck on `main` with
# wip/a-staging-walk.patch applied (the working tree's copy on the device, ffi/ and the
# tests; the walk changes every streaming kernel's A staging: which thread copies which
# 16-byte chunk of A, its source address and its zero-fill past K). Run after callA,
# if the walk won there; it also covers session 40's item 0 (the GPU tests on `main`,
# whose last commit, 538c0ca, changed the launcher's branches and was never run on a
# GPU): a failure here is then first rerun without the patch.
# Predicted: every test passes (session 39: 460 passed, 12 skipped, plus the walk's
# host test), memcheck 0 errors and racecheck 0 hazards on the fused sweep with the
# forced tile split of two (its 16-row long-K shape runs the phases).
#   run(command="bash docs/perf/session40/callB_prepared.sh", carry=[".ffi"])  (~8 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
git apply docs/perf/session40/wip/a-staging-walk.patch && echo "patch applied" \
  || { echo "PATCH FAILED"; exit 1; }
grep -c AStagingWalk ffi/stream_kernel.cu
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SKIP_EXAMPLES=1 TEST_TIMEOUT=240 timeout 560 bash tools/device_check.sh -n 8 -m gpu -q \
  > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
bash tools/check_summary.sh "$OUT/gpu_tests.txt"
