#!/usr/bin/env bash
# Session 27, call D: where the weakest large cells stand among the plans, on `main` after
# 379e9d8 (.variants/main = git archive main). The probe with its sweep of split overrides
# (kernels alone in CUDA graphs, random bits, one round): 256 x 4096 x 4096 (0.83-0.88x in
# call C's bench), 768 x 28672 x 8192 (0.86-0.89x in session 26), 768 x 8192 x 28672.
#   run(command="bash docs/perf/session27/callD.sh", carry=[".ffi", ".variants"])
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
PROBE_ROUNDS=1 PROBE_TIMEOUT=300 PROBE_ARGS="random splits=1,2,4,-2001,-2002,-2003,-2004 256x4096x4096 768x28672x8192
  768x8192x28672" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
cat "$OUT/probe.log"
