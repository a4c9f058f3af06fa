#!/usr/bin/env bash
# Session 35, call A: where a 256-row (and 128-row) wgmma block's fixed time goes
# (wgmma_plan.h's "stages + 10": ~7 us a block at 256 rows), and cuBLAS beside it.
#   run(command="bash docs/perf/session35/callA.sh", carry=[".ffi"])
# Variants, both the working tree's ffi/: `main` as built for the package, `tl`
# with -DJAX_MARLIN_WGMMA_TIMELINE (thread 0 of each block stamps the prologue's
# end, stage 0's arrival and issue, each stage, the loop's end, the on-chip
# exchange and the exit; stream_timeline.h's WgmmaMark). `values`: model-like
# operands (the bench's stand-in; zeros read ~20% faster at M >= 256).
# Predicted (the model): 512 x 4096 x 4096 (256 rows, k in 2 on chip, 32 stages of
# 0.71 us) ~30 us alone, of which ~7 fixed; 1024 x 4096 x 4096 ~52.5 (64 stages).
# If the fixed cost is launch + first stage (>= 3 us before stage 0 is issued), the
# lever is the prologue; if loop end -> exit >= 2 us, the exchange and stores.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/tl
cp -r ffi .variants/main/ && cp -r ffi .variants/tl/
echo "-DJAX_MARLIN_WGMMA_TIMELINE" > .variants/tl/CUDA_FLAGS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv \
  > "$OUT/gpu.txt" 2>&1
PROBE_ROUNDS=1 PROBE_TIMEOUT=200 PROBE_ARGS="values splits=1 256x4096x4096 512x4096x4096 \
1024x4096x4096 512x1024x4096 512x2048x4096 512x8192x4096 512x28672x8192 256x28672x8192" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -h -A3 "wgmma timeline" "$OUT"/probe_tl_r1.txt | head -80
python3 docs/perf/session35/cublas_probe.py 256x4096x4096 512x4096x4096 1024x4096x4096 \
  512x1024x4096 512x2048x4096 512x8192x4096 512x28672x8192 256x28672x8192 \
  > "$OUT/cublas.txt" 2>&1
cat "$OUT/cublas.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv \
  >> "$OUT/gpu.txt" 2>&1
