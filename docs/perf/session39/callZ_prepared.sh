#!/usr/bin/env bash
# Prepared for session 40 (not run): where the tile split's per-warp phases spend their
# time at 16 rows (~0.31 us a block step against ~0.21 for the unphased 9-row kernel,
# session 39 calls W-X). Variants of `main`: cap56 (-DJAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS=56,
# so 16 x 14336 x 4096 runs phased, as in call W), their timeline builds (warp 0's step
# ends, stream_timeline.h), then one round of main / cap56 in CUDA graphs.
# Predicted: the timeline's step ends show a longer step at each phase start (every 2nd
# step at P = 2) if the phase boundary is the cost; evenly longer steps if the 16 rows'
# A traffic is. 16 x 14336 x 4096: main (stream-K) ~20.9, cap56 ~21.8 (call W).
#   run(command="bash docs/perf/session39/callZ_prepared.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/cap56 .variants/tl .variants/cap56tl
for v in main cap56 tl cap56tl; do cp -r ffi ".variants/$v/"; done
echo "-DJAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS=56" > .variants/cap56/CUDA_FLAGS
echo "-DJAX_MARLIN_STREAM_TIMELINE" > .variants/tl/CUDA_FLAGS
echo "-DJAX_MARLIN_STREAM_TIMELINE -DJAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS=56" \
  > .variants/cap56tl/CUDA_FLAGS
PROBE_NAMES="tl cap56tl" PROBE_ROUNDS=1 PROBE_ARGS="values splits= 16x11008x4096 \
16x14336x4096 9x14336x4096 16x8192x8192" timeout 240 bash tools/probe_variants.sh \
  > "$OUT/probe_tl.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ |timeline|cycles from|steps by|step i" "$OUT/probe_tl.log"
mkdir -p "$OUT/logs_tl" && mv "$OUT"/probe_*_r*.txt "$OUT/logs_tl/"
PROBE_NAMES="main cap56" PROBE_BUILD=0 PROBE_ROUNDS=1 PROBE_ARGS="values splits= \
16x14336x4096 12x14336x4096 16x11008x4096" timeout 100 bash tools/probe_variants.sh \
  > "$OUT/probe.log" 2>&1
grep -E "^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log"
mkdir -p "$OUT/logs" && mv "$OUT"/probe_*_r*.txt "$OUT/logs/"
rm -rf .variants
tar czf "$OUT/logs.tgz" -C "$OUT" logs_tl logs && rm -rf "$OUT"/logs_tl "$OUT"/logs
