#!/usr/bin/env bash
# Session 38 call U (the budget's last minutes): per-warp sums without per-warp staging
# (wip/warp_sums.patch). Calls O-P's marks: at 16 x 4096 x 4096 per-warp A landed later
# (warp 0's A 3.42 us against the block's 3.10) but its sums pass was shorter (0.58 us
# against the block's 1.32, with its barrier); at 1 x 14336 x 4096 per-warp A landed
# 0.7 us later and lost. Variants: `main` (HEAD: per-warp A and sums at M = 9-16), `ws`
# (the patch: also the 8-row tile-split kernels sum per warp, A staged by the block),
# `wsall` (the patch with -DJAX_MARLIN_STREAM_WARP_A=0: sums per warp, A by the block, in
# every tile-split instance).
# Predicted (us, CUDA graphs): ws at M <= 8 at or below main (1 x 14336 x 4096 <= 11.3,
# 8 x 4096 x 4096 7.17 -> ~6.9-7.0, M = 1-2 at 4096 x 4096 flat); wsall at M = 9-16
# within 2% of main (the sums' part of per-warp A's gain, without the staging's loss).
#   run(command="bash docs/perf/session38/callU.sh", carry=[".ffi"])  (~3.5 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/ws .variants/wsall
for v in main ws wsall; do cp -r ffi ".variants/$v/"; done
for v in ws wsall; do
  (cd ".variants/$v" && patch -p1 -s < ../../docs/perf/session38/wip/warp_sums.patch) || exit 1
done
echo "-DJAX_MARLIN_STREAM_WARP_A=0" > .variants/wsall/CUDA_FLAGS
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 1x14336x4096 4x14336x4096 8x14336x4096 1x4096x4096 \
2x4096x4096 8x4096x4096 1x4096x6144 8x4096x6144 9x14336x4096 16x4096x4096 16x4096x6144" \
  timeout 170 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-100
tar czf "$OUT/probe_logs.tgz" -C "$OUT" $(cd "$OUT" && ls probe_*_r*.txt) && rm -f "$OUT"/probe_*_r*.txt
