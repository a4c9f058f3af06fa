#!/usr/bin/env bash
# Session 28, call B: wip/lean-copies (100d008: the cp.async ring's interior copies'
# addresses as unsigned wide multiply-adds, the words' copy predicated) against `main`
# (c26b570): the probe (kernels alone in CUDA graphs, random bits, two rounds) on the
# shapes whose plans run the 32-, 64- and 128-row cp.async instances; then, on the
# branch's own build (this checkout), the wgmma and cluster GPU tests and memcheck on
# the sweep's fused and wgmma_clusters parts. In the branch's checkout:
#   rm -rf .variants && mkdir -p .variants/main .variants/lean
#   git archive c26b570 | tar -x -C .variants/main
#   git archive wip/lean-copies | tar -x -C .variants/lean
#   run(command="bash docs/perf/session28/callB.sh", carry=[".ffi", ".variants"])
# *Predicted* (call A: 146 instructions a stage a thread at 64 rows, issue slots 56%
# busy; the branch executes ~11 fewer a stage, -7.5%): 64 x 8192 x 28672 -3 to -5%
# (84 -> ~81 us), the 32- and 128-row shapes alike, 128 rows perhaps more (its static
# loop lost 93 of 545 instructions against 36 of 438 at 64 rows).
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 32x8192x28672 64x8192x28672 128x8192x28672
  64x28672x8192 64x4096x4096 128x4096x4096 256x4096x4096" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log"
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -rs -k "cluster or wgmma" \
  > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "passed|failed|error|Error" "$OUT/check.log" | head -10
source tools/gpu_probes.sh
SANITIZE_PARTS="fused wgmma_clusters" run_sanitizer memcheck 150 /tmp/sanitize_memcheck.log
for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$OUT/sanitize.log" 2>&1
echo "total $(el) s"
