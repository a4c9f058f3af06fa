#!/usr/bin/env bash
# Prepared in session 28, not run: the design study's variant (DESIGN.md beside this) on
# the H200. In a checkout of main, first apply the patch and make the variant trees:
#   git checkout -b wip/ring-mbarriers main
#   git am -3 docs/perf/session28/wip/cp-async-mbarriers/0001-*.patch
#   rm -rf .variants && mkdir -p .variants/main .variants/mb .variants/mb3
#   git archive main | tar -x -C .variants/main
#   git archive HEAD | tar -x -C .variants/mb
#   git archive HEAD | tar -x -C .variants/mb3
#   echo "-DJAX_MARLIN_WGMMA_RING_MBARRIERS=1" > .variants/mb/CUDA_FLAGS
#   echo "-DJAX_MARLIN_WGMMA_RING_MBARRIERS=1 -DJAX_MARLIN_WGMMA_RING_LEAD=3" > .variants/mb3/CUDA_FLAGS
#   run(command="bash docs/perf/session28/wip/cp-async-mbarriers/callA_prepared.sh",
#       carry=[".ffi", ".variants"])
# (1) the probe, main against mb (lead 4) and mb3 (lead 3), random bits, two rounds, on
# the plans of the 32-, 64- and 128-row cp.async instances; (2) the branch built with the
# knob on: the wgmma and cluster GPU tests, racecheck and synccheck on the sweep's fused
# and wgmma_clusters parts. *Predicted* (DESIGN.md): -8 to -10% at 64 rows if the warps'
# bursts bind; flat if the empty barriers keep them in step; mb3 more slack, less lead.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 32x8192x28672 64x8192x28672 128x8192x28672
  64x28672x8192 64x4096x4096 128x4096x4096 256x4096x4096" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override
echo "probe done at $(el) s"
CUDA_FLAGS="-DJAX_MARLIN_WGMMA_RING_MBARRIERS=1" SKIP_EXAMPLES=1 TEST_TIMEOUT=200 \
  bash tools/device_check.sh -n 8 -m gpu -rs -k "cluster or wgmma" > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "passed|failed|error|Error" "$OUT/check.log" | head -10
source tools/gpu_probes.sh
for tool in racecheck synccheck; do
  SANITIZE_PARTS="fused wgmma_clusters" run_sanitizer $tool 100 "/tmp/sanitize_$tool.log"
done
for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$OUT/sanitize.log" 2>&1
rm -f "$OUT/pytest.log" "$OUT/gpu.txt"
echo "total $(el) s"
