#!/usr/bin/env bash
# session 22 call G: the producer warpgroup as landed (256-row blocks only, the default build;
# the consumers' __syncwarp before each slot's release, after call F's racecheck), from
# branch wip/wgmma-producer:
#   1. every GPU test (device_check.sh -n 8 -m gpu), then an assertion that the build has the
#      producer and plans it at 256 rows only;
#   2. racecheck on two producer shapes (two 256-row blocks with groups of 32; 256-row
#      clusters), memcheck on one;
#   3. if time is left: the bench at M = 256 and 1024 on the two large shapes.
# Every step under `timeout`; the whole call stays under ~540 s.
# run(command="bash docs/perf/session22/callG_prepared.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }

SKIP_EXAMPLES=1 TEST_TIMEOUT=200 timeout 330 bash tools/device_check.sh -n 8 -m gpu -rs \
  > $OUT/check.log 2>&1
echo "check exit $? at $(el) s"
grep -E "build took|passed|failed|error" $OUT/check.log | tail -6
grep -E "SKIPPED" $OUT/pytest.log | grep -ciE "producer" | sed 's/^/producer-test skips: /'
(cd /tmp && timeout 60 python3 -c "
import numpy as np, jax_marlin as jm
from jax_marlin import ops
info = jm.build_info(); print('wgmma_producer', info.get('wgmma_producer'))
assert info.get('wgmma_producer') == 1, info
q = jm.quantize(np.random.default_rng(0).standard_normal((8192, 4096)).astype(np.float32))
w = jm.prepare(q.packed, q.scales, q.zero_points, K=8192, N=4096, block_size=128)
for M in (64, 128, 300, 1024):
    p = ops.wgmma_plan(M, w, np.float16); print(M, p)
    assert p['producer'] is (p['rows'] == 256), p
print('producer at 256 rows only: OK')
") 2>&1 | tail -6 | tee -a $OUT/check.log

cat > /tmp/prod_one.py <<'PY'
import sys
sys.path.insert(0, sys.argv[6])
import numpy as np, jax.numpy as jnp
import sanitize_sweep as s
from jax_marlin import ops
M, N, K, group = map(int, sys.argv[1:5]); dtype = jnp.bfloat16 if sys.argv[5] == "bf16" else jnp.float16
w, a, bias, ref = s._operands(np.random.default_rng(1), M, N, K, group, dtype)
plan = ops.wgmma_plan(M, w, dtype); print("plan", plan, flush=True)
assert plan["producer"], plan
s._check((M, N, K, "packed", dtype), a, w, bias, ref, "fused", 0); print("checked", flush=True)
PY
for job in "racecheck 300 1000 1056 32 bf16" "racecheck 200 8000 4104 128 fp16" "memcheck 300 1000 1056 32 fp16"; do
  set -- $job; tool=$1; shift
  [ $(el) -gt 420 ] && { echo "$tool $* skipped at $(el) s"; continue; }
  (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" \
     timeout 75 compute-sanitizer --tool $tool --kernel-name kns=wgmma --error-exitcode 3 \
     python3 /tmp/prod_one.py "$@" $repo/tools > /tmp/san.log 2>&1
   echo "$tool $*: exit $? $(grep -E 'SUMMARY|checked|plan' /tmp/san.log | tr '\n' ' ')") | tee -a $OUT/sanitize.txt
  grep -E "Error|Race" /tmp/san.log | head -8 >> $OUT/sanitize.txt
done

if [ $(el) -lt 400 ]; then
  (cd /tmp && timeout $(( 530 - $(el) )) python3 -m jax_marlin.bench --shapes 8192x28672,28672x8192 \
     --ms 256,1024 --dtypes float16,bfloat16 --impls dense,jax_marlin --no-forced --no-repack \
     --no-layer-stack --budget-s 70 --csv $OUT/bench.csv > $OUT/bench.log 2>&1; echo "bench exit $?")
  grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " $OUT/bench.log
else
  echo "bench skipped at $(el) s"
fi
echo "total $(el) s"
