#!/usr/bin/env bash
# Session 39 call Y: the tile split's per-warp phases with the planner's cap (clusters:
# at most 48 steps a block; the kernel is call W's, only the plan and the tests moved).
# The GPU tests that plan or force a tile split or phases (the new test now on 12100 x
# 1000, 47-48 steps a block at C = 2), and racecheck on the fused sweep's forced tile
# split of two, whose M = 16, K = 12100 shape runs the phases.
#   run(command="bash docs/perf/session39/callY.sh", carry=[".ffi"])  (~5 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE=racecheck SANITIZE_TIMEOUT=100 SKIP_EXAMPLES=1 \
  TEST_TIMEOUT=150 timeout 360 bash tools/device_check.sh -n 8 -m gpu -q \
  -k "phases or tile_split or stream_plan or split_k or cluster" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; tail -4 "$OUT/gpu_tests.txt"
grep -E "\[ *[0-9]+%\]" "$OUT/pytest.log" | sed 's/\[.*//' | tr -d ' \n' | fold -w1 | sort | uniq -c
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -3
grep -hE "SUMMARY|hazard|sanitize sweep" "$OUT"/sanitize_racecheck.log* | tail -4
cd "$OUT" && tar czf logs.tgz $(ls sanitize_* build.log gpu.txt 2>/dev/null) && \
  rm -f sanitize_* build.log gpu.txt
