#!/usr/bin/env bash
# Session 38 call R: the tile split's A per warp in the 16-row kernels only (M = 9-16; the
# working tree's ffi/, kWarpA = kTileSplit && kMT == 2, an instance constant as in calls
# O-P). Call Q's switch on M at run time was slower than main on every
# tile-split shape (0.2-15%); calls O-P's per-warp A in
# every tile-split instance won at M = 8-16 on K = 4096 and lost at M = 1-4 on K = 14336.
# `main` is HEAD. Predicted (us, CUDA graphs): M <= 8 as main (the same code);
# 16 x 4096 x 4096 9.2 -> ~8.75, 16 x 4096 x 6144 13.4-13.7 -> ~11.9, 12 x 4096 x 4096
# 8.6 -> ~8.2. Then the GPU tests, racecheck on the fused sweep's forced tile split of two
# (its M = 12 shapes), and the bench at 4096 x 4096 and 4096 x 6144, M = 12 and 16.
#   run(command="bash docs/perf/session38/callR.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/wa16
git archive HEAD ffi | tar -x -C .variants/main && cp -r ffi .variants/wa16/
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 1x14336x4096 8x4096x4096 9x4096x4096 12x4096x4096 \
16x4096x4096 12x4096x6144 16x4096x6144 9x14336x4096 12x14336x4096 12x4096x14336 \
16x4096x14336" timeout 200 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
rm -rf .variants
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE=racecheck SANITIZE_TIMEOUT=100 SKIP_EXAMPLES=1 \
  TEST_TIMEOUT=240 timeout 400 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; tail -4 "$OUT/gpu_tests.txt"
grep -E "\[ *[0-9]+%\]" "$OUT/pytest.log" | sed 's/\[.*//' | tr -d ' \n' | fold -w1 | sort | uniq -c
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -3
grep -hE "SUMMARY|hazard|sanitize sweep" "$OUT"/sanitize_racecheck.log* | tail -4
cd /tmp  # the installed package, not the checkout's source tree
timeout 90 python3 -m jax_marlin.bench --shapes 4096x4096,4096x6144 --ms 12,16 --dtypes float16,bfloat16 \
  --impls dense,jax_marlin --no-repack --no-layer-stack --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -q "'cuda': True" "$OUT/bench.log" || echo "the bench ran without the CUDA module"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
cd "$OUT" && tar czf logs.tgz $(ls probe_*_r*.txt sanitize_* build.log gpu.txt 2>/dev/null) && \
  rm -f probe_*_r*.txt sanitize_* build.log gpu.txt
