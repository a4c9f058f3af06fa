#!/usr/bin/env bash
# session 21 call A: the landed tree (main). Every GPU test; memcheck and racecheck over the
# ragged sweep (tools/sanitize_sweep.py; session 20's memcheck crashed at start twice).
# run(command="bash docs/perf/session21/callA.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 SANITIZE="memcheck racecheck" SANITIZE_TIMEOUT=170 \
  bash tools/device_check.sh -n 8 -m gpu > $OUT/check.log 2>&1
grep -E "took|passed|failed|exit|SUMMARY|checked|total" $OUT/check.log
