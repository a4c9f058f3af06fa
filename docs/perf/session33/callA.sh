#!/usr/bin/env bash
# Session 33 call A: session 32's prepared calls G and I merged. Probes (kernels alone in
# CUDA graphs) of three variants: main (9dc484a), h64 (main + the 64-row halves at
# M = 65-128, docs/perf/session32/wip/halves64) and nodiv (main + stage_a without
# per-chunk divisions, docs/perf/session32/wip/stage-a-nodiv); then every GPU test on
# wip/s33 (main + both patches), memcheck on the sweep's a_phases and wgmma_clusters parts.
#   git checkout -b wip/s33 main && git am -3 <halves64 patches> <nodiv patch>
#   rm -rf .variants && mkdir -p .variants/{main,h64,nodiv}
#   git archive main ffi | tar -x -C .variants/main; HEAD~1's ffi for h64; main's ffi plus
#   the nodiv commit's ffi diff for nodiv
#   run(command="bash docs/perf/session33/callA.sh", carry=[".ffi", ".variants"])
# Predicted (session 32's notes): h64 128x4096x4096 14.8 -> ~13-13.5 us, 65/96 rows the
# same, the rest a tie; nodiv -1 to -3% at 16x8192x28672, a tie elsewhere.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 65x4096x4096 96x4096x4096 128x4096x4096 100x4096x4000
  128x8192x4096 128x2048x4096 128x14336x4096 64x4096x4096 128x1056x200 96x4096x2048
  16x8192x28672 16x28672x8192 8x8192x28672 1x8192x28672 16x4096x4096 1x4096x4096
  16x14336x4096 4x28672x8192" \
  timeout 330 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-150
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 SANITIZE="memcheck" SANITIZE_PARTS="a_phases wgmma_clusters" \
  SANITIZE_TIMEOUT=50 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/sanitize_*.log* 2>/dev/null
rm -f "$OUT"/probe_*_r*.txt "$OUT/build.log"
echo "total $(el) s"
