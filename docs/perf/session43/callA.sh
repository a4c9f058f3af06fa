#!/usr/bin/env bash
# Session 43 call A: the GPU tests on main, and memcheck once more on its kernels.
# Session 42's call E ran the walk16 tree's GPU tests (460 passed) and racecheck (0
# hazards), but its memcheck process segfaulted at start-up twice (banner only, exit 139:
# compute-sanitizer's own crash, seen in sessions 16, 21, 36, 39); the kernels were shown
# identical in SASS to memchecked builds (NOTES, session 43). Since then main's Python
# changed (MarlinWeights' arrays checked, vmap over a bias one op per member, the jvp on
# (a_dot, bias_dot)), which only the GPU tests here run on a GPU.
#   run(command="bash docs/perf/session43/callA.sh", carry=[".ffi"])  (~5 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
# (run_sanitizer runs a crashed start-up up to three times)
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE="memcheck" SANITIZE_TIMEOUT=120 \
  SKIP_EXAMPLES=1 TEST_TIMEOUT=240 timeout 560 bash tools/device_check.sh -n 8 -m gpu -q \
  > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
bash tools/check_summary.sh "$OUT/gpu_tests.txt"
