#!/usr/bin/env bash
# session 22 call H (prepared; no device time was left to run it), on main: the wgmma
# producer warpgroup (built only with -DJAX_MARLIN_WGMMA_PRODUCER=1) with its slots released
# by every consumer thread (JAX_MARLIN_WGMMA_RELEASE=0, the empty barriers count 256), after
# call G's racecheck read the producer's bulk copies against the consumers' shared loads
# with lane 0 of each warp releasing (and a __syncwarp before it):
#   1. (background) latency probes: off (the default build), r0 (producer, every thread
#      releases), r1 (producer, a named barrier a warpgroup and one arrival each);
#   2. the package with the producer (r0): its GPU tests (bitwise the cp.async ring's);
#   3. racecheck and memcheck on call G's two shapes (the sweep's wgmma_producer part);
#   4. probes, two rounds of off / r0 / r1 on 256-row shapes.
# If r0 reads 0 hazards and is not slower than r1: make the producer the default
# (wgmma_plan.h), run device_check.sh -n 8 -m gpu with the sweep per part, refresh h200.csv.
# run(command="bash docs/perf/session22/callH_prepared.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
f=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
declare -A flags=([off]="" [r0]="-DJAX_MARLIN_WGMMA_PRODUCER=1"
                  [r1]="-DJAX_MARLIN_WGMMA_PRODUCER=1 -DJAX_MARLIN_WGMMA_RELEASE=1")
pc=/tmp/pc; mkdir -p $pc /tmp/po/off /tmp/po/r0 /tmp/po/r1
build_probes() {
  local nv=(timeout 280 nvcc "${f[@]}" -I ffi -c)
  "${nv[@]}" ffi/marlin_kernel.cu -o $pc/marlin_kernel.o &
  "${nv[@]}" ffi/stream_kernel.cu -o $pc/stream_kernel.o &
  "${nv[@]}" tools/latency_probe.cu -o $pc/probe.o &
  for n in off r0 r1; do
    # shellcheck disable=SC2086
    "${nv[@]}" ffi/wgmma_kernel.cu ${flags[$n]} -Xptxas -v -o /tmp/po/$n/wgmma_kernel.o \
      > /tmp/po/$n/ptxas.log 2>&1 &
  done
  wait
  for n in off r0 r1; do
    timeout 60 nvcc -gencode arch=compute_90a,code=sm_90a $pc/*.o /tmp/po/$n/wgmma_kernel.o \
      -o /tmp/po/$n/probe && echo "built probe $n" || echo "PROBE BUILD FAILED $n"
    echo "$n: $(grep 'spill stores' /tmp/po/$n/ptxas.log | grep -vc ' 0 bytes spill stores, 0 bytes spill loads') functions with spills"
  done
  echo "probes built at $(el) s"
}
build_probes > /tmp/probe_build.log 2>&1 &
pb=$!

CUDA_FLAGS="-DJAX_MARLIN_WGMMA_PRODUCER=1" SKIP_EXAMPLES=1 TEST_TIMEOUT=100 timeout 220 \
  bash tools/device_check.sh -n 8 -m gpu -rs -k "producer or wgmma" > $OUT/check.log 2>&1
echo "check exit $? at $(el) s"
grep -E "build took|passed|failed|error" $OUT/check.log | tail -4
grep -E "SKIPPED" $OUT/pytest.log | head -4

# The sweep's producer part (tools/sanitize_sweep.py wgmma_producer: call G's two shapes),
# one process a tool, the whole logs kept.
for tool in racecheck memcheck; do
  (cd /tmp && SWEEP_PARTS=wgmma_producer XLA_PYTHON_CLIENT_ALLOCATOR=platform \
     XLA_FLAGS="--xla_gpu_autotune_level=0" timeout 90 compute-sanitizer --tool $tool \
     --kernel-name kns=wgmma --error-exitcode 3 python3 $repo/tools/sanitize_sweep.py \
     > $OUT/$tool.log 2>&1
   echo "$tool: exit $? $(grep -E 'SUMMARY|sanitize sweep' $OUT/$tool.log | tr '\n' ' ')")
done
# (2 producer calls must read "checked"; fewer means the build did not plan the producer.)

wait $pb; cat /tmp/probe_build.log
shapes="256x8192x28672 256x28672x8192 1024x8192x28672 256x14336x4096 200x4104x8000 300x4096x4096"
for r in 1 2; do for v in off r0 r1; do
  [ $(el) -gt 500 ] && { echo "probe $v r$r skipped at $(el) s"; continue; }
  echo "== $v r$r at $(el) s" | tee -a $OUT/probe.log
  # shellcheck disable=SC2086
  timeout 60 /tmp/po/$v/probe splits= $shapes 2>&1 | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " | tee -a $OUT/probe.log
done; done
echo "total $(el) s"
