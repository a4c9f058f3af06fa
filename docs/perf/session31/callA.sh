#!/usr/bin/env bash
# Session 31 call A: session 30's prepared calls G and H merged (their probes in one run,
# three variants): main (f3e9097) against nopdl (main with -DJAX_MARLIN_STREAM_REDUCE_PDL=0:
# the reduce's dependent launch off) and spdl (wip/splitk-pdl, session 30's patch, with
# -DJAX_MARLIN_SPLITK_REDUCE_PDL=1); then the GPU tests and the decode example on main.
#   rm -rf .variants && mkdir -p .variants/main .variants/nopdl .variants/spdl
#   git archive main ffi | tar -x -C .variants/main; same for nopdl; wip/splitk-pdl for spdl
#   run(command="bash docs/perf/session31/callA.sh", carry=[".ffi", ".variants"])
# Predicted: nopdl slower than main by ~0.9 us at 1x4096x28672 and ~0.7 at 16x14336x4096
# (a tie = the landed guard reads the build wrongly); spdl 0.3-1 us faster where a k-split
# reduce follows (64x4096x4096 12.3 -> 11.3-12.0), a tie elsewhere.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 1x4096x28672 16x14336x4096 1x8192x28672
  4x28672x8192 1x4096x4096 64x4096x4096 32x4096x4096 128x4096x4096 256x4096x4096
  64x14336x4096 64x4096x14336 64x8192x28672" \
  timeout 300 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-150
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"
(cd /tmp && timeout 150 python3 "$repo/examples/decode.py" --out "$OUT/decode.json" 2>&1 | tail -5)
rm -f "$OUT/gpu.txt" "$OUT"/probe_*_r*.txt "$OUT/build.log"
echo "total $(el) s"
