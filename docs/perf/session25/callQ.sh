#!/usr/bin/env bash
# Session 25, call Q: the staged epilogue (store_outputs in ffi/wgmma_kernel.cu: each
# warpgroup's tile through shared memory by stmatrix, out as 16-byte row chunks). Call P's
# ncu put main's epilogue at 14.3 M of 81.6 M executed instructions and 4,852 of 35,829
# warp samples at 1024 x 4096 x 28672 (2,000 instructions a warp of scattered 2-byte
# stores). *Predicted*: the epilogue's instructions ~2,000 -> ~300 a warp; kernel time
# -3 to -8% on every 256-row grid without a split (the most at K = 4096), nothing on
# cluster and k-split plans (their epilogues are unchanged).
#   1. the package built, every GPU test (device_check.sh -n 8 -m gpu);
#   2. probe A/B, main (.variants/main) against this tree, zeros then random operands;
#   3. racecheck and memcheck on the sweep's wgmma_producer part (now with 300 x 8002:
#      N % 8 = 2, the ragged chunks).
#   rm -rf .variants && mkdir -p .variants/main && git archive main | tar -x -C .variants/main
#   run(command="bash docs/perf/session25/callQ.sh", carry=[".ffi", ".variants"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
flags=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
for n in main ep; do
  src=.variants/main; [ $n = ep ] && src=.
  obj=/tmp/probe_obj/$n; mkdir -p $obj
  (for f in marlin_kernel stream_kernel wgmma_kernel; do
     nvcc "${flags[@]}" -I $src/ffi -c $src/ffi/$f.cu -o $obj/$f.o &
   done
   nvcc "${flags[@]}" -I $src/ffi -c $src/tools/latency_probe.cu -o $obj/probe.o
   wait
   nvcc -gencode arch=compute_90a,code=sm_90a $obj/*.o -o $obj/latency_probe \
     && echo "built probe $n at $(el) s" || echo "PROBE BUILD FAILED $n") >> /tmp/probe_build.log 2>&1 &
done
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -rs > $OUT/check.log 2>&1
echo "check exit $? at $(el) s"
grep -E "took|passed|failed|exit|error" $OUT/check.log | head -20
grep -E "SKIPPED|FAILED|Error" $OUT/pytest.log | head -12
wait; cat /tmp/probe_build.log
shapes="256x8192x28672 1024x8192x28672 512x8192x28672 256x28672x8192 1024x28672x8192
  1024x4096x28672 1024x4096x4096"
for fill in zero random; do
  for n in main ep; do
    [ $(el) -gt 430 ] && { echo "probe $n $fill skipped at $(el) s"; continue; }
    echo "== $n $fill at $(el) s" | tee -a $OUT/probe.log
    arg=""; [ $fill = random ] && arg=random
    # shellcheck disable=SC2086
    timeout 70 /tmp/probe_obj/$n/latency_probe $arg splits= $shapes 2>&1 \
      | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |buffers" | tee -a $OUT/probe.log
  done
done
source tools/gpu_probes.sh
for tool in racecheck memcheck; do
  [ $(el) -gt 500 ] && { echo "$tool skipped at $(el) s"; continue; }
  SWEEP_PARTS=wgmma_producer run_sanitizer $tool 80 $OUT/sanitize_$tool.log
done
echo "total $(el) s"
