#!/usr/bin/env bash
# Session 38 call Q (rejected: per warp chosen at run time was slower than main on every
# tile-split shape, 0.2-15%; see NOTES "Where it stands (session 38)"):
# the tile split's A per warp from M = 8 only (the working tree's ffi/ was cae4110's with
# wip/warp_a_runtime.patch: JAX_MARLIN_STREAM_WARP_A_FROM_M = 8, a runtime switch on p.M), after calls O-P
# read per-warp A as a win at M = 8-16 and a loss at M = 1-4 on K = 14336. `main` is HEAD.
# Predicted (us, CUDA graphs): M = 1-4 as main (1 x 14336 x 4096 ~11.3, 4 x 14336 x 4096
# ~13.4); 8 x 4096 x 4096 ~6.96, 16 x 4096 x 4096 ~8.75, 16 x 4096 x 6144 ~11.9.
# Then the GPU tests on the package built from the working tree, racecheck on the tile split
# at M = 12, and the bench at
# 4096 x 4096, M = 8 and 16 (the h200.csv rows that move).
#   run(command="bash docs/perf/session38/callQ.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/wa8
git archive HEAD ffi | tar -x -C .variants/main && cp -r ffi .variants/wa8/
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 1x14336x4096 4x14336x4096 8x14336x4096 \
1x4096x4096 4x4096x4096 8x4096x4096 12x4096x4096 16x4096x4096 8x4096x6144 16x4096x6144 \
1x4096x14336 8x4096x14336" timeout 200 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
tar czf "$OUT/probe_logs.tgz" -C "$OUT" $(cd "$OUT" && ls probe_*_r*.txt) && rm -f "$OUT"/probe_*_r*.txt
rm -rf .variants
# racecheck on the fused sweep's forced tile split of two (its M = 12 shapes stage A per warp)
SWEEP_SPLIT_K=-2 SANITIZE=racecheck SANITIZE_TIMEOUT=100 SKIP_EXAMPLES=1 TEST_TIMEOUT=220 \
  timeout 360 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; tail -3 "$OUT/gpu_tests.txt"; tail -4 "$OUT/sanitize_racecheck.log"
cd /tmp  # the installed package, not the checkout's source tree
timeout 80 python3 -m jax_marlin.bench --shapes 4096x4096 --ms 8,16 --dtypes float16,bfloat16 \
  --impls dense,jax_marlin --no-repack --no-layer-stack --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -q "'cuda': True" "$OUT/bench.log" || echo "the bench ran without the CUDA module"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
