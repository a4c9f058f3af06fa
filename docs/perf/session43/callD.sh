#!/usr/bin/env bash
# Session 43 call D (prepared; only if call B's rot wins): the GPU tests and both
# sanitizers on main with wip/a-rotate.patch applied (the device's copy of the tree only;
# each tile's A copies start at row tile mod M, in the 16-row tile split's walk).
# The sweep's forced tile split of two (SWEEP_SPLIT_K=-2) runs the 16-row phased
# instances that the patch changes (tools/sanitize_sweep.py's (16, 130, 12100)).
#   run(command="bash docs/perf/session43/callD.sh", carry=[".ffi"])  (~5 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
git apply docs/perf/session43/wip/a-rotate.patch || { echo "PATCH FAILED"; exit 1; }
grep -c "rotation" ffi/stream_kernel.cu
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SKIP_EXAMPLES=1 TEST_TIMEOUT=240 timeout 560 bash tools/device_check.sh -n 8 -m gpu -q \
  > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
bash tools/check_summary.sh "$OUT/gpu_tests.txt"
