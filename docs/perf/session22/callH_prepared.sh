#!/usr/bin/env bash
# session 22 call H (prepared; no device time was left to run it): with
# -DJAX_MARLIN_WGMMA_PRODUCER=1 (off by default), the producer's slots released by every
# consumer thread (empty barriers count 256) instead of lane 0 of each warp, after call G's
# racecheck still read the producer's bulk copies against the consumers' shared loads with a
# __syncwarp before lane 0's arrive. The package built, the producer's GPU tests (bitwise the
# cp.async mainloop, and the oracle), racecheck on call G's two shapes with the whole log kept
# for the first, memcheck on one. Kept under ~200 s.
# run(command="bash docs/perf/session22/callH_prepared.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
CUDA_FLAGS="-DJAX_MARLIN_WGMMA_PRODUCER=1" SKIP_EXAMPLES=1 TEST_TIMEOUT=60 timeout 150 \
  bash tools/device_check.sh -n 8 -m gpu -rs -k producer \
  > $OUT/check.log 2>&1
echo "check exit $? at $(el) s"
grep -E "build took|passed|failed|error" $OUT/check.log | tail -4
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
n=0
for job in "racecheck 300 1000 1056 32 bf16" "racecheck 200 8000 4104 128 fp16" "memcheck 200 8000 4104 128 bf16"; do
  set -- $job; tool=$1; shift; n=$((n + 1))
  [ $(el) -gt 175 ] && { echo "$tool $* skipped at $(el) s"; continue; }
  (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" \
     timeout 35 compute-sanitizer --tool $tool --kernel-name kns=wgmma --error-exitcode 3 \
     python3 /tmp/prod_one.py "$@" $repo/tools > $OUT/san$n.log 2>&1
   echo "$tool $*: exit $? $(grep -E 'SUMMARY|checked|plan' $OUT/san$n.log | tr '\n' ' ')")
done
echo "total $(el) s"
