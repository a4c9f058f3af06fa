#!/usr/bin/env bash
# Session 30 call A: session 29's prepared reduce-rows call (probe main vs red2, GPU tests,
# memcheck/racecheck on the branch), then the wgmma-stream study's stage-0 probe
# (tools/wgmma_rate.cu: m64nNk16 issue rates at N = 8, 16, ...).
# Setup: as in docs/perf/session29/wip/reduce-rows/callF_prepared.sh's header;
#   run(command="bash docs/perf/session30/callA.sh", carry=[".ffi", ".variants"])
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
bash docs/perf/session29/wip/reduce-rows/callF_prepared.sh
echo "==== wgmma_rate"
nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I ffi -o /tmp/wgmma_rate \
  tools/wgmma_rate.cu && timeout 60 /tmp/wgmma_rate 2>&1 | tee "$OUT/wgmma_rate.txt"
