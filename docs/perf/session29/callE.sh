#!/usr/bin/env bash
# Session 29, call E: A staged one chunk a thread (wip/stage-a) against main, probe, two
# rounds, random bits; then the branch's GPU tests (the sanitizers did not fit the session's
# device time).
# In a checkout of the branch:
#   rm -rf .variants && mkdir -p .variants/main .variants/stagea
#   git archive main ffi | tar -x -C .variants/main
#   git archive HEAD ffi | tar -x -C .variants/stagea
#   run(command="bash docs/perf/session29/callE.sh", carry=[".ffi", ".variants"])
# *Predicted*: 16 x 8192 x 28672 (phased, 5 steps a phase) -1 to -3 us: ~65 fewer
# instructions a warp-step of 762 and the code ring's first copies ~1 us earlier; the other
# 16-row stream-K shapes -0.5 to -1.5 us; M = 1 and the tile split within noise.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 16x8192x28672 12x8192x28672 9x8192x28672
  16x28672x8192 16x4096x28672 16x4096x14336 16x14336x4096 8x4096x14336 1x8192x28672
  1x4096x4096" bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-75
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "passed|failed|error" "$OUT/check.log" | tail -3
rm -f "$OUT/pytest.log" "$OUT/gpu.txt"
echo "total $(el) s"
