#!/usr/bin/env bash
# Session 24, call M, from branch wip/stream-k: stream-K for the wgmma producer's 256-row
# grids (docs/design/wgmma_stream_k.md; ffi/wgmma_stream_k.h, wgmma_plan.h
# wgmma_stream_k_blocks, wgmma_kernel.cu).
#   1. the build and test_wgmma_stream_k alone (a hang stops there), then every GPU test;
#   2. racecheck and memcheck on the sweep's wgmma_stream_k and wgmma_producer parts;
#   3. probes, kernels alone in CUDA graphs, each shape with stream-K (the plan) and
#      without (split_k_override -2003, kForceWgmmaNoStreamK);
#   4. if time is left, the bench at M = 256 and 512 on the two large shapes, fp16.
# run(command="bash docs/perf/session24/callM.sh", carry=[".ffi"]) is what call M ran;
# SANITIZERS="racecheck memcheck synccheck" and PROBE_FILL=values (the probe's operands)
# change those steps (after call M); PROBE_SHAPES, BENCH_SHAPES, BENCH_MS the probe's shapes and
# the bench's (session 26).
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
f=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
pc=/tmp/pc; mkdir -p $pc
(nv=(timeout 280 nvcc "${f[@]}" -I ffi -c)
 "${nv[@]}" ffi/marlin_kernel.cu -o $pc/marlin_kernel.o &
 "${nv[@]}" ffi/stream_kernel.cu -o $pc/stream_kernel.o &
 "${nv[@]}" tools/latency_probe.cu -o $pc/probe.o &
 "${nv[@]}" ffi/wgmma_kernel.cu -o $pc/wgmma_kernel.o &
 wait
 timeout 60 nvcc -gencode arch=compute_90a,code=sm_90a $pc/*.o -o /tmp/probe || echo "PROBE BUILD FAILED"
 echo "probe built at $(el) s") > /tmp/probe_build.log 2>&1 &
pb=$!
# The build and the stream-K tests alone first (a flag protocol that hangs would
# otherwise eat the call): then the rest of the GPU tests and the sanitizers.
SKIP_EXAMPLES=1 TEST_TIMEOUT=90 bash tools/device_check.sh -m gpu -rs -k stream_k \
  > $OUT/check.log 2>&1
echo "stream-K check exit $? at $(el) s"
grep -E "took|passed|failed|exit|crashed|Timeout" $OUT/check.log
if grep -q " passed" $OUT/pytest.log && ! grep -q "failed" $OUT/pytest.log; then
  (cd /tmp && timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -n 8 -m gpu -rs \
     "$repo/tests" 2>&1 | tail -30) > $OUT/pytest_all.log
  echo "all GPU tests at $(el) s"; grep -E "passed|failed|FAILED|Error" $OUT/pytest_all.log | head -12
  source tools/gpu_probes.sh
  export SANITIZE_PARTS="wgmma_stream_k wgmma_producer"
  for tool in ${SANITIZERS:-racecheck memcheck}; do run_sanitizer $tool 100 /tmp/sanitize_$tool.log; done
  for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > $OUT/sanitize.log 2>&1
  grep -E "SUMMARY|sanitize sweep|exit" $OUT/sanitize.log
else
  echo "stream-K tests did not pass: no full run"; tail -40 $OUT/pytest.log
fi
wait $pb; cat /tmp/probe_build.log
shapes=${PROBE_SHAPES:-"256x8192x28672 200x8192x28672 512x8192x28672 300x8192x28672
  768x8192x28672 256x4096x28672 256x4096x17000 1024x8192x28672"}
for r in 1 2; do
  [ $(el) -gt 470 ] && { echo "probe round $r skipped at $(el) s"; continue; }
  echo "== probe round $r at $(el) s" | tee -a $OUT/probe.log
  # shellcheck disable=SC2086
  timeout 90 /tmp/probe ${PROBE_FILL-} splits=-2003 $shapes 2>&1 | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k|buffers" | tee -a $OUT/probe.log
done
if [ $(el) -lt 470 ]; then
  (cd /tmp && timeout $((580 - $(el))) python3 -m jax_marlin.bench --shapes ${BENCH_SHAPES:-8192x28672,28672x8192} \
     --ms ${BENCH_MS:-256,512} --dtypes float16 --impls dense,jax_marlin --no-forced --no-repack --no-layer-stack \
     --budget-s 60 --csv $OUT/bench.csv 2>&1 | tail -12) | tee $OUT/bench.log
fi
echo "total $(el) s"
