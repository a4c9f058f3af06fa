#!/usr/bin/env bash
# Session 27, call B: the probe, `main` against a62d9ff (skp: StreamKParams) and 379e9d8
# (pe: skp plus the cluster's kept half through store_outputs), kernels alone in CUDA
# graphs, random bits, two rounds, no split overrides. In the branch's checkout:
#   rm -rf .variants && mkdir -p .variants/main .variants/skp .variants/pe
#   git archive main | tar -x -C .variants/main; git archive a62d9ff | tar -x -C .variants/skp
#   git archive 379e9d8 | tar -x -C .variants/pe
#   run(command="bash docs/perf/session27/callB.sh", carry=[".ffi", ".variants"])
# *Predicted*: skp 128 x 4096 x 4096 back to ~11.6 us (main ~12.1), the rest within 1%;
# pe -2 to -4% on the cluster plans (256 x 4096 x 4096, 512 x 4096 x 4096, 256 x 8192 x
# 8192, 256 x 28672 x 8192), the grids and stream-K (256 / 1024 x 8192 x 28672) unmoved.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  > "$OUT/gpu.txt"
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 128x4096x4096 256x4096x4096 512x4096x4096
  256x8192x8192 256x28672x8192 256x8192x28672 1024x8192x28672" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
cat "$OUT/probe.log"
echo "total $(el) s"
