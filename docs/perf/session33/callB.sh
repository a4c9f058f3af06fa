#!/usr/bin/env bash
# Session 33 call B. (1) Probe, random bits as call A: main against new (wip/h64: the
# 64-row halves at M = 113-128 only, and the time model refitted to call A: a 64-row
# stage 0.33 us, the reduce 0.95 us + its bytes at 4.2 TB/s instead of a flat 4.8).
# (2) Probe, model-like values: main against r128 (-DJAX_MARLIN_WGMMA_MAX_ROWS=128: M =
# 384-768 on 128-row blocks, all of k at M = 512) on 4096-column shapes at M = 256-768.
# (3) The wgmma / cluster / plan GPU tests on wip/h64's tree, memcheck and racecheck on
# the sweep's wgmma_clusters part (its 64-row case is now 120 x 4000 x 4100).
#   rm -rf .variants && mkdir -p .variants/{main,new,r128}; main's ffi in main and r128
#   (echo "-DJAX_MARLIN_WGMMA_MAX_ROWS=128" > .variants/r128/CUDA_FLAGS), this tree's in new
#   run(command="bash docs/perf/session33/callB.sh", carry=[".ffi", ".variants"])
# *Predicted* (the refitted model, us, main -> new): 113 / 120 / 128 x 4096 x 4096 14.5 /
# 14.6 / 14.7 -> 14.2 each (call A read 14.7 -> 13.8 at 128), 128 x 3072 x 4096 13.0 ->
# 11.5, 128 x 1024 x 4096 11.5 -> 6.2, 115 x 2048 x 2048 10.0 -> 8.9; unchanged plans (a
# tie): 100 x 4096 x 4000, 128 x 8192 x 4096, 256 x 4096 x 4096. Replanned at M = 129-256
# by the cheaper reduce (ties in the model): 256 x 3072 x 1024 15.4 -> 15.4, 129 x 8192 x
# 4096 33.2 -> 33.0, 192 x 6144 x 3072 26.1 -> 25.3. r128 at 512 x 4096 x 4096: 30.1 ->
# 32.9 modelled (the bench read main's plan at 33.6 against cuBLAS's 29.2).
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_NAMES="main new" PROBE_ARGS="random splits= 113x4096x4096 120x4096x4096
  128x4096x4096 128x3072x4096 128x1024x4096 115x2048x2048 100x4096x4000 128x8192x4096
  256x4096x4096 256x3072x1024 129x8192x4096 192x6144x3072" \
  timeout 200 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
echo "probe 1 done at $(el) s"
PROBE_ROUNDS=2 PROBE_BUILD=0 PROBE_NAMES="main r128" PROBE_ARGS="values splits= 256x4096x4096
  384x4096x4096 512x4096x4096 768x4096x4096 512x14336x4096 512x4096x14336" \
  timeout 150 bash tools/probe_variants.sh > "$OUT/probe2.log" 2>&1
echo "probe 2 done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=150 SANITIZE="memcheck racecheck" SANITIZE_PARTS="wgmma_clusters" \
  SANITIZE_TIMEOUT=60 bash tools/device_check.sh -n 8 -m gpu -q -k "cluster or wgmma or plan" \
  > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/sanitize_*.log* 2>/dev/null
for f in probe probe2; do grep -v "^built" "$OUT/$f.log" | grep -v split_k_override | cut -c1-110; done
rm -f "$OUT"/probe_*_r*.txt "$OUT/build.log"
echo "total $(el) s"
