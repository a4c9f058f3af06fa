#!/usr/bin/env bash
# Prepared in session 26 for session 27, from branch wip/stream-k-params (800e5af): stream-K's
# schedule as a kernel parameter of its own, WgmmaParams back to 128 bytes (the 128-row
# cp.async kernel's SASS is then main@bb4ae84's again), and the segment's zeroing
# unconditional (the producer mainloop 251 instructions against the landed 246).
# *Predicted*: 128 x 4096 x 4096 back to main@bb4ae84's ~11.6 us (from ~12.1); the producer
# grids within 1% of `main` (5 instructions more a stage, off the critical path if the
# consumers wait on the copies), the stream-K plans likewise.
#   1. the package built, the wgmma and stream-K GPU tests;
#   2. racecheck on the sweep's wgmma_stream_k part;
#   3. probe A/B, `main` against the branch, random bits, two rounds, no split overrides.
# In the branch's checkout:
#   rm -rf .variants && mkdir -p .variants/main .variants/skp
#   git archive main | tar -x -C .variants/main; git archive wip/stream-k-params | tar -x -C .variants/skp
#   run(command="bash docs/perf/session26/callY_prepared.sh", carry=[".ffi", ".variants"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 TEST_TIMEOUT=150 bash tools/device_check.sh -n 8 -m gpu -rs -k "wgmma or stream_k" \
  > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "took|passed|failed|exit|error" "$OUT/check.log" | head -20
source tools/gpu_probes.sh
SANITIZE_PARTS="wgmma_stream_k" run_sanitizer racecheck 100 "/tmp/sanitize_racecheck.log"
cat /tmp/sanitize_racecheck.log.* > "$OUT/sanitize.log" 2>&1
grep -E "SUMMARY|sanitize sweep|exit" "$OUT/sanitize.log"
echo "sanitizer done at $(el) s"
PROBE_SOURCE=variant PROBE_ROUNDS=2 PROBE_ARGS="random splits= 128x4096x4096 256x4096x4096
  256x8192x8192 256x8192x28672 512x8192x28672 1024x8192x28672" bash tools/probe_variants.sh
echo "total $(el) s"
