#!/usr/bin/env bash
# session 22 call F (prepared, not run): the wgmma kernel's producer warpgroup, step 1 of
# docs/perf/session21/wip/wgmma-producer/DESIGN.md, from branch wip/wgmma-producer (run from a
# checkout of that branch). Knob off is main's SASS (names aside); the knob
# -DJAX_MARLIN_WGMMA_PRODUCER=2 builds both mainloops: the producer's (default) and the cp.async
# ring's (split_k override -2002, kForceWgmmaCpAsync), so one process compares them.
#   1. (background) two latency probes from this tree: off (no flag) and on (the knob);
#   2. the package built with the knob, its GPU tests "wgmma or cluster or reduce_kernels_bits or
#      producer" (test_wgmma_producer_*: producer == cp.async bitwise), then an assertion that
#      the build reports the knob and plans the producer;
#   3. probes, two rounds alternating off / on; on also times override -2002 (the cp.async
#      mainloop in the same binary) and prints both grids' residency;
#   4. if time is left: racecheck on one 128-row producer shape.
# Every step under `timeout`: a deadlock (an expect_tx or parity mistake) costs its step only.
# Total wall time stays under 540 s: the check is cut at 360 s, no probe run starts past 400 s
# (each at most 75 s), the racecheck runs only if it starts before 440 s, for at most
# min(90, 530 - elapsed) s.
# run(command="bash docs/perf/session22/callF_prepared.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
knob="-DJAX_MARLIN_WGMMA_PRODUCER=2"
f=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
pc=/tmp/pc; mkdir -p $pc /tmp/po/off /tmp/po/on
# 1. The probes: the knob reaches only wgmma_kernel.cu (the other objects are shared).
build_probes() {
  local nv=(timeout 280 nvcc "${f[@]}" -I ffi -c)
  "${nv[@]}" ffi/marlin_kernel.cu -o $pc/marlin_kernel.o &
  "${nv[@]}" ffi/stream_kernel.cu -o $pc/stream_kernel.o &
  "${nv[@]}" tools/latency_probe.cu -o $pc/probe.o &
  "${nv[@]}" ffi/wgmma_kernel.cu -o /tmp/po/off/wgmma_kernel.o &
  "${nv[@]}" ffi/wgmma_kernel.cu $knob -Xptxas -v -o /tmp/po/on/wgmma_kernel.o \
    > /tmp/po/on/ptxas.log 2>&1 &
  wait
  for n in off on; do
    timeout 60 nvcc -gencode arch=compute_90a,code=sm_90a $pc/*.o /tmp/po/$n/wgmma_kernel.o \
      -o /tmp/po/$n/probe && echo "built probe $n" || echo "PROBE BUILD FAILED $n"
  done
  local log=/tmp/po/on/ptxas.log
  echo "probe ptxas (on): $(grep -c 'spill stores' $log) functions," \
    "$(grep 'spill stores' $log | grep -vc ' 0 bytes spill stores, 0 bytes spill loads') with spills," \
    "$(grep -ciE 'C751[0-5]' $log) C7510-C7515 lines; launch registers:" \
    "$(grep -oE 'Used [0-9]+ registers' $log | sort | uniq -c | sort -rn | head -4 | tr -s ' \n' ' ')"
  echo "probes built at $(el) s"
}
build_probes > /tmp/probe_build.log 2>&1 &
pb=$!

# 2. The package with the knob, its GPU tests (the producer's A/B tests and every wgmma one).
CUDA_FLAGS="$knob" SKIP_EXAMPLES=1 TEST_TIMEOUT=150 timeout 360 \
  bash tools/device_check.sh -n 8 -m gpu -rs -k "wgmma or cluster or reduce_kernels_bits or producer" \
  > $OUT/check.log 2>&1
echo "check exit $? at $(el) s"
grep -E "build took|passed|failed|error|tests done|spill" $OUT/check.log | grep -v "0 bytes spill" | tail -12
grep -c "SKIPPED.*wgmma producer" $OUT/pytest.log 2>/dev/null | sed 's/^/producer-test skips (must be 0): /'
# The build must report the knob and plan the producer (a flag that did not reach the build
# would skip the producer tests and read green), and the override must plan the cp.async one.
(cd /tmp && timeout 60 python3 -c "
import numpy as np, jax_marlin as jm
from jax_marlin import ops
info = jm.build_info(); print('wgmma_producer', info.get('wgmma_producer'))
assert info.get('wgmma_producer') == 2, info
q = jm.quantize(np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32))
w = jm.prepare(q.packed, q.scales, q.zero_points, K=4096, N=4096, block_size=128)
for M in (32, 64, 128, 256):
    p, c = ops.wgmma_plan(M, w, np.float16), ops.wgmma_plan(M, w, np.float16, -2002)
    print(M, p); assert p['producer'] and not c['producer'] and dict(c, producer=True) == p, (p, c)
print('knob on and planned: OK')
") 2>&1 | tail -6 | tee -a $OUT/check.log

# 3. Probes (M x K x N), two rounds alternating. off: the default only; on: the producer (0)
# and the cp.async mainloop (-2002) of the same binary, each with its residency.
wait $pb; cat /tmp/probe_build.log  # (each of its steps is under a timeout)
shapes="64x8192x28672 64x28672x8192 32x8192x28672 128x8192x28672 256x8192x28672 256x14336x4096
        256x4096x4096 200x4104x8000 1024x8192x28672"
for r in 1 2; do for n in off on; do
  [ $(el) -gt 400 ] && { echo "probe $n r$r skipped at $(el) s"; continue; }
  sp="splits="; [ $n = on ] && sp="splits=0,-2002"
  echo "== $n r$r at $(el) s" | tee -a $OUT/probe.log
  # shellcheck disable=SC2086
  timeout 75 /tmp/po/$n/probe $sp $shapes > /tmp/probe_$n.txt 2>&1; echo "exit $?" >> /tmp/probe_$n.txt
  grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k_override|^exit" /tmp/probe_$n.txt | tee -a $OUT/probe.log
done; done

# 4. racecheck on one producer shape (128-row blocks, groups of 32, ragged N and K), if time.
if [ $(el) -lt 440 ]; then
cat > /tmp/prod_one.py <<'PY'
import sys
sys.path.insert(0, sys.argv[5])
import numpy as np, jax.numpy as jnp
import sanitize_sweep as s
from jax_marlin import ops
M, N, K = map(int, sys.argv[1:4]); dtype = jnp.bfloat16 if sys.argv[4] == "bf16" else jnp.float16
w, a, bias, ref = s._operands(np.random.default_rng(1), M, N, K, 32, dtype)
plan = ops.wgmma_plan(M, w, dtype); print("plan", plan, flush=True)
assert plan["producer"], plan
s._check((M, N, K, "packed", dtype), a, w, bias, ref, "fused", 0); print("checked", flush=True)
PY
  left=$(( 530 - $(el) )); [ $left -gt 90 ] && left=90
  (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" \
     timeout $left compute-sanitizer --tool racecheck --kernel-name kns=wgmma --error-exitcode 3 \
     python3 /tmp/prod_one.py 100 1000 1056 bf16 $repo/tools > $OUT/racecheck.log 2>&1
   echo "racecheck 100x1000x1056 bf16 (limit $left s): exit $? $(grep -E 'SUMMARY|checked|plan' $OUT/racecheck.log | tr '\n' ' ')") | tee -a $OUT/probe.log
else
  echo "racecheck skipped at $(el) s" | tee -a $OUT/probe.log
fi
echo "total $(el) s"
