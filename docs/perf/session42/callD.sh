#!/usr/bin/env bash
# Session 42 call D: session 40's A staging walk only in the 16-row instances
# (session42/walk16.patch: the 8-row ones keep main's staging loop, where call A's walk
# read 1.2-1.4% slower at M = 1), with the phased tile split's cap at 56 steps (call A:
# 16 x 14336 x 4096 then leaves stream-K, 20.85 -> 20.03 us with the walk).
# Predicted: M = 1 rows as main (their code is main's); M = 9-16 as call A's cap56walk.
#   run(command="bash docs/perf/session42/callD.sh", carry=[".ffi"])  (~3 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants
for v in main w16cap56; do
  mkdir -p ".variants/$v" && cp -r ffi ".variants/$v/"
done
git apply --include=".variants/w16cap56/ffi/*" --directory=".variants/w16cap56" \
  docs/perf/session42/walk16.patch || echo "PATCH FAILED"
echo "-DJAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS=56" > .variants/w16cap56/CUDA_FLAGS
grep -c AStagingWalk .variants/*/ffi/stream_kernel.cu
PROBE_ROUNDS=2 PROBE_ARGS="values splits= \
16x4096x4096 12x4096x4096 16x11008x4096 16x10240x4096 16x8192x8192 16x5120x5120 \
16x14336x4096 9x14336x4096 1x4096x4096 1x14336x4096 1x8192x28672 4x4096x4096 8x14336x4096" \
  timeout 300 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
rm -rf .variants "$OUT"/probe_*_r*.txt
