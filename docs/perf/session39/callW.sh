#!/usr/bin/env bash
# (Ran on the planner before its cap and the sweep shape before K = 12100: every such shape phased, 14336 x 4096 at C = 2 and the sweep's K = 14000 too; calls X and Y.)
# Session 39 call W: the tile split's A in phases per warp (M = 9-16; the working tree's
# ffi/ against HEAD's). Where a tile-split block cannot hold A for all of its steps
# (14336 x 4096 from M = 11 at C = 2, 8192 x 8192 at M >= 12 and 11008 x 4096 at M = 16),
# each warp now stages its own steps two at a time in two slots of its own; before, those
# shapes ran stream-K with its reduce. Predicted (us, CUDA graphs; `main` -> phased):
# 16 x 14336 x 4096 ~20.8 -> 17.5-18.5 (9 rows, whose A fits, ran 15.87 as a tile split
# in session 38's call R; 16 rows cost ~11% more there at 4096 x 4096); 12 x 14336 x 4096
# ~20-21 -> 16.5-17.5; 16 x 8192 x 8192 and 16 x 11008 x 4096: not predicted (first
# timing of a tile split at those shapes and rows); 9 x 14336 x 4096 and 16 x 4096 x 4096
# unchanged (the same kernels). Then the GPU tests, racecheck on the fused sweep's forced
# tile split of two (its new M = 16, K = 14000 shape runs the phases), and the bench at
# 14336 x 4096, M = 12 and 16.
#   run(command="bash docs/perf/session39/callW.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/phased
git archive HEAD ffi | tar -x -C .variants/main && cp -r ffi .variants/phased/
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 16x14336x4096 12x14336x4096 11x14336x4096 \
9x14336x4096 16x8192x8192 12x8192x8192 16x11008x4096 16x4096x4096" \
  timeout 200 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
rm -rf .variants
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE=racecheck SANITIZE_TIMEOUT=100 SKIP_EXAMPLES=1 \
  TEST_TIMEOUT=240 timeout 400 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; tail -4 "$OUT/gpu_tests.txt"
grep -E "\[ *[0-9]+%\]" "$OUT/pytest.log" | sed 's/\[.*//' | tr -d ' \n' | fold -w1 | sort | uniq -c
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -3
grep -hE "SUMMARY|hazard|sanitize sweep" "$OUT"/sanitize_racecheck.log* | tail -4
cd /tmp  # the installed package, not the checkout's source tree
timeout 90 python3 -m jax_marlin.bench --shapes 14336x4096 --ms 12,16 --dtypes float16,bfloat16 \
  --impls dense,jax_marlin --no-repack --no-layer-stack --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -q "'cuda': True" "$OUT/bench.log" || echo "the bench ran without the CUDA module"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
cd "$OUT" && tar czf logs.tgz $(ls probe_*_r*.txt sanitize_* build.log gpu.txt 2>/dev/null) && \
  rm -f probe_*_r*.txt sanitize_* build.log gpu.txt
