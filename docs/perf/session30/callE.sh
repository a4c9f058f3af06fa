#!/usr/bin/env bash
# Session 30 call E: the reduce kernel as the main kernel's programmatic dependent launch
# (-DJAX_MARLIN_STREAM_REDUCE_PDL=1; the knob is in the working tree's ffi/, off by default).
# .variants/main = main's ffi/, .variants/pdl = the working tree's with that CUDA_FLAGS file.
#   run(command="bash docs/perf/session30/callE.sh", carry=[".ffi", ".variants"])
# (1) probe, random bits, two rounds: stream-K shapes with a reduce (6 to 33 parts), and the
#     tile split (no reduce) as the control;
# (2) the GPU tests on a build with the knob on; (3) memcheck and racecheck on the sweep's
#     fused part, same build; (4) the decode example, same build.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 1x8192x28672 16x8192x28672 1x28672x8192 4x28672x8192
  16x28672x8192 1x4096x28672 16x4096x14336 16x14336x4096 1x4096x32000 1x4096x4096" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-110
echo "probe done at $(el) s"
CUDA_FLAGS="-DJAX_MARLIN_STREAM_REDUCE_PDL=1" SKIP_EXAMPLES=1 TEST_TIMEOUT=200 \
  bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
tail -4 "$OUT/pytest.log"
source tools/gpu_probes.sh
for tool in memcheck racecheck; do
  SANITIZE_PARTS="fused" run_sanitizer $tool 100 "/tmp/sanitize_$tool.log"
done
for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$OUT/sanitize.log" 2>&1
echo "sanitizers done at $(el) s"
(cd /tmp && timeout 200 python3 "$repo/examples/decode.py" --out "$OUT/decode.json" 2>&1 | tail -5)
rm -f "$OUT/gpu.txt" "$OUT"/probe_*_r*.txt
echo "total $(el) s"
