#!/usr/bin/env bash
# Prepared in session 32, not run (no device time left): the streaming kernel's A staging
# without per-chunk divisions (the patch beside this file) against main, kernels alone in
# CUDA graphs, then every GPU test and memcheck on the sweep's phased part with the patch
# (racecheck and the rest of the sweep in the landing call: this one is near 10 minutes). In a checkout of main:
#   git checkout -b wip/stage-a-nodiv main && git am -3 docs/perf/session32/wip/stage-a-nodiv/0001-*.patch
#   rm -rf .variants && mkdir -p .variants/main .variants/nodiv
#   git archive main ffi | tar -x -C .variants/main; git archive HEAD ffi | tar -x -C .variants/nodiv
#   run(command="bash docs/perf/session32/wip/stage-a-nodiv/callI_prepared.sh",
#       carry=[".ffi", ".variants"])     (~7 minutes)
# *Predicted*: session 31's ncu source counts put 417 instructions run twice a warp, ~4%
# of the stall samples, in the divisions at 16 x 8192 x 28672; the patch leaves ~100 of
# them. So -1 to -3% there (kernel ~49-50 us -> ~48-49), less at M = 1-8 (one row: 16
# chunks a step), a tie at 4096 x 4096 within its ~0.1 us spread. Land if no shape is
# slower beyond the rounds' spread and the tests and sanitizers are clean.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 16x8192x28672 16x28672x8192 8x8192x28672 1x8192x28672
  16x4096x4096 1x4096x4096 16x14336x4096 4x28672x8192" \
  timeout 260 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-150
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=220 SANITIZE="memcheck" SANITIZE_PARTS="a_phases" \
  SANITIZE_TIMEOUT=60 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" /tmp/sanitize_*.log* 2>/dev/null
rm -f "$OUT"/probe_*_r*.txt "$OUT/build.log"
echo "total $(el) s"
