#!/usr/bin/env bash
# Prepared in session 29, not run (no device time left): the streaming reduce with 2 rows a
# thread where groups have 9-16 parts (the patch beside this). In a checkout of main:
#   git checkout -b wip/reduce-rows main
#   git am -3 docs/perf/session29/wip/reduce-rows/0001-*.patch
#   rm -rf .variants && mkdir -p .variants/main .variants/red2
#   git archive main ffi | tar -x -C .variants/main
#   git archive HEAD ffi | tar -x -C .variants/red2
#   run(command="bash docs/perf/session29/wip/reduce-rows/callF_prepared.sh",
#       carry=[".ffi", ".variants"])
# (~5 minutes.) (1) Probe, main against red2, random bits, two rounds; (2) the branch's GPU
# tests; (3) memcheck and racecheck on the sweep's fused part (its stream-K calls cut
# groups 2-64 ways).
# *Predicted* (host planner: parts a group, 264 blocks unless said): 9-16 parts take the
# 16-load reduce with 48 registers instead of 80 (5 blocks an SM instead of 3) and half
# the rows a thread: 16 x 4096 x 14336 (10) reduce 3.47 -> ~2.5 us, the GEMM -0.8 to -1
# us; 12 / 16 x 4096 x 11008 (12), 9-16 x 5120 x 13824 (11) alike; 16 x 28672 x 8192 (132
# blocks, 9) -0.2 to -0.5; the sliced mode (> 16 parts, the same kernel, now 48
# registers): 16 x 14336 x 4096 (33; reduce 7.8 us) -1 to -3 us, 1 and 4 x 28672 x 8192
# (17) -0.2 to -0.5; 8192 x 28672 (6 parts, the 8-load kernel, unchanged) flat.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 16x4096x14336 12x4096x14336 9x5120x13824
  16x4096x11008 4x4096x11008 16x14336x4096 12x14336x4096 16x28672x8192 4x28672x8192
  1x28672x8192 16x8192x28672 1x8192x28672" bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-140
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "passed|failed|error" "$OUT/check.log" | tail -3
source tools/gpu_probes.sh
for tool in memcheck racecheck; do
  SANITIZE_PARTS="fused" run_sanitizer $tool 100 "/tmp/sanitize_$tool.log"
done
for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$OUT/sanitize.log" 2>&1
rm -f "$OUT/pytest.log" "$OUT/gpu.txt"
echo "total $(el) s"
