#!/usr/bin/env bash
# Session 43 call A: memcheck once more on the walk16 tree (main since session 43), whose
# memcheck process segfaulted at start-up twice in session 42's call E (banner only,
# exit 139: compute-sanitizer's own crash, seen in sessions 16, 21, 36, 39) while the
# GPU tests (460 passed) and racecheck (0 hazards over 66 fused calls) passed.
#   run(command="bash docs/perf/session43/callA.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 bash tools/device_check.sh || exit 1
repo="$(pwd)"; source tools/gpu_probes.sh
# (run_sanitizer now runs a crashed start-up up to three times)
SANITIZE_PARTS=fused run_sanitizer memcheck 150 "$OUT/sanitize_memcheck.log"
