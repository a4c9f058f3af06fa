#!/usr/bin/env bash
# Prepared in session 32, not run (no device time left): M = 65-128 on ~4096-column shapes
# as 64-row blocks with k in 2 on chip (the patch beside this file, JAX_MARLIN_WGMMA_HALVES64,
# default on) against today's 128-row blocks with k in 4 and the reduce kernel. 4096 x 4096
# reads 0.93x fp16 and bf16 at M = 128 (session 32 call E), under issue 3's 0.95x floor.
# In a checkout of main:
#   git checkout -b wip/halves64 main && git am -3 docs/perf/session32/wip/halves64/000*.patch
#   rm -rf .variants && mkdir -p .variants/h64 .variants/off
#   git archive HEAD ffi | tar -x -C .variants/h64; git archive HEAD ffi | tar -x -C .variants/off
#   echo "-DJAX_MARLIN_WGMMA_HALVES64=0" > .variants/off/CUDA_FLAGS
#   run(command="bash docs/perf/session32/wip/halves64/callG_prepared.sh",
#       carry=[".ffi", ".variants"])     (~6 minutes)
# *Predicted* (the planner's model, wgmma_plan.h): 128 x 4096 x 4096 16.4 -> 13.4 us
# modelled, measured 14.8 today (session 31 call A), so ~13-13.5 with h64 (-9%); 65 and 96
# rows the same grids; 128 x 8192 x 4096 a tie (23.4 against 23.3 modelled); 128 x 14336 x
# 4096 unchanged (the plan stays); 128 x 1056 x 200 and 96 x 4096 x 2048, narrow shapes the
# rule also replans (every N up to ~4224 on an H200), launch-bound, ~a tie. Land if h64
# wins at 4096 x 4096 and loses nowhere by more
# than the rounds' spread; then the README/NOTES and the bench's M = 128 cells.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 65x4096x4096 96x4096x4096 128x4096x4096 100x4096x4000
  128x8192x4096 128x2048x4096 128x14336x4096 64x4096x4096 128x1056x200 96x4096x2048" \
  timeout 240 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-150
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=150 \
  BENCH="--shapes 4096x4096 --ms 65,96,128 --dtypes float16,bfloat16 --impls dense,jax_marlin --no-forced --no-layer-stack --no-repack --budget-s 60" \
  bash tools/device_check.sh -n 8 -m gpu -q -k "cluster or wgmma or plan" > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"; grep -A6 "speed-up over dense" "$OUT/bench.log"
rm -f "$OUT"/probe_*_r*.txt "$OUT/build.log"
echo "total $(el) s"
