#!/usr/bin/env bash
# Session 36, call B: is the 256-row producer kernel's stage (0.65 us against 0.52 at the
# tensor pipe's full rate) bound by the supply of bytes? Call A (callE_prepared.sh of
# session 35) placed both busy try-wait loops on the consumers' full barrier (+0x37810):
# the producer's copies land late. Variants (timeline builds; wip/supply_probe.patch,
# probe-only macros, wrong results by design):
#   main      the package's kernel
#   act_half  the activation box (32 KB of a stage's 37) copied on even stages only
#   codes_l2  every block's codes from tile 0's first 8 stages (L2-resident, no DRAM)
# Predicted: if the L2's delivery of the activations bounds the stage, act_half's stage
# falls to ~0.52-0.55 us and the 64-call time ~15%; codes_l2 ties main (DRAM 9% busy).
# If act_half ties main, the supply is not the bytes (the copies' issue or latency).
# Then item 2 of session 35's list: the bench's own M = 1 call traced (193 GEMMs).
#   run(command="bash docs/perf/session36/callB.sh", carry=[".ffi"])
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv \
  > "$OUT/gpu.txt" 2>&1
rm -rf .variants && mkdir -p .variants/main .variants/act_half .variants/codes_l2
for v in main act_half codes_l2; do cp -r ffi .variants/$v/; done
(cd .variants/act_half && patch -p1 -s < ../../docs/perf/session36/wip/supply_probe.patch || git apply -p1 ../../docs/perf/session36/wip/supply_probe.patch)
(cd .variants/codes_l2 && patch -p1 -s < ../../docs/perf/session36/wip/supply_probe.patch || git apply -p1 ../../docs/perf/session36/wip/supply_probe.patch)
echo "-DJAX_MARLIN_WGMMA_TIMELINE" > .variants/main/CUDA_FLAGS
echo "-DJAX_MARLIN_WGMMA_TIMELINE -DJM_PROBE_ACT_HALF" > .variants/act_half/CUDA_FLAGS
echo "-DJAX_MARLIN_WGMMA_TIMELINE -DJM_PROBE_CODES_L2" > .variants/codes_l2/CUDA_FLAGS
PROBE_ROUNDS=2 PROBE_TIMEOUT=200 PROBE_ARGS="values splits=1 512x4096x4096 1024x4096x4096 \
512x28672x8192 2048x8192x28672" bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |== probe|FAILED" "$OUT/probe.log"
for v in main act_half codes_l2; do
  echo "== $v timeline"; grep -h -A3 "wgmma timeline" "$OUT/probe_${v}_r1.txt" | head -40
done
BUILD_ONLY=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 300 python3 tools/bench_trace.py --K 8192 \
  --N 28672 --M 1 --copies 16 --passes 12 --top 10 --out /tmp/bench_trace \
  > "$OUT/bench_trace_m1.txt" 2>&1
cat "$OUT/bench_trace_m1.txt" | tail -60
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv \
  >> "$OUT/gpu.txt" 2>&1
