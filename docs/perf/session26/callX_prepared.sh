#!/usr/bin/env bash
# Prepared in session 26 for session 27, from branch wip/cluster-epilogue (29c0bcc: `main`
# with stream-K, plus the on-chip split's kept half leaving through store_outputs, staged
# in the ring past the peer's half). Its GPU tests cover `main`'s merge as well.
# *Predicted*: -2 to -4% on the cluster plans (the kept half is 32 values a thread at 128
# rows, stored one 2-byte value at a time on `main`); nothing elsewhere.
#   1. the package built, every GPU test (device_check.sh -n 8 -m gpu);
#   2. racecheck and memcheck on the sweep's wgmma_clusters, wgmma_producer and
#      wgmma_stream_k parts;
#   3. probe A/B, `main` against the branch, each tree's own probe, random bits, two
#      rounds, no split overrides (`splits=`): the cluster plans and one grid as a control.
# In the branch's checkout:
#   rm -rf .variants && mkdir -p .variants/main .variants/ce
#   git archive main | tar -x -C .variants/main; git archive wip/cluster-epilogue | tar -x -C .variants/ce
#   run(command="bash docs/perf/session26/callX_prepared.sh", carry=[".ffi", ".variants"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -rs > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "took|passed|failed|exit|error" "$OUT/check.log" | head -20
source tools/gpu_probes.sh
for tool in racecheck memcheck; do
  SANITIZE_PARTS="wgmma_clusters wgmma_producer wgmma_stream_k" \
    run_sanitizer $tool 100 "/tmp/sanitize_$tool.log"
done
for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$OUT/sanitize.log" 2>&1
grep -E "SUMMARY|sanitize sweep|exit" "$OUT/sanitize.log"
echo "sanitizers done at $(el) s"
PROBE_SOURCE=variant PROBE_ROUNDS=2 PROBE_ARGS="random splits= 256x4096x4096 256x8192x8192
  256x28672x8192 512x4096x4096 256x8192x28672" bash tools/probe_variants.sh
echo "total $(el) s"
