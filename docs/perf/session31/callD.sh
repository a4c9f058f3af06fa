#!/usr/bin/env bash
# Session 31 call D (prepared, not run: no machine started): the bench's layer-stack
# section alone, now that medians_us runs the timed call once untimed first (call C:
# jax_marlin_stack32 11.96 vs run2 8.44), and the decode example's refresh with the median
# of three timed calls, through tools/device_check.sh's build, BENCH and DECODE.
#   run(command="bash docs/perf/session31/callD.sh", carry=[".ffi"])
# (The dense path's kernels at M = 4096 under ncu were planned here too: session 32's
# item 0 in docs/perf/NOTES.md.)
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SKIP_EXAMPLES=1 DECODE=" " DECODE_TIMEOUT=90 BENCH="--no-sweep --no-repack" \
  bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "exit $?"
grep -E "_stack32:|tokens/s|build took" "$OUT/check.log"
rm -f "$OUT/build.log" "$OUT/pytest.log"
