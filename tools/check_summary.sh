#!/usr/bin/env bash
# What a call script shows of a tools/device_check.sh run whose output went to a file:
# its last lines, the GPU tests' outcome counts (device_check.sh's progress marks, since
# -q -n 8 leaves no summary line, and pytest.log's own line where there is one), and the
# sanitizers' sweep counts and summaries ($OUT/sanitize_*).
#   bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/gpu_tests.txt" 2>&1
#   bash tools/check_summary.sh "$OUT/gpu_tests.txt"
log="$1"
OUT="${OUT:-/tmp/out}"
tail -6 "$log"
grep -E "^progress marks:" "$log"
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -3
grep -E " exit [0-9]+|sanitize sweep" "$log" | tail -8
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/sanitize_*.log* 2>/dev/null | tail -4
