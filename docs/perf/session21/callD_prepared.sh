#!/usr/bin/env bash
# session 21 call D (prepared, not run: no device after call B): the tile split with 16 warps a
# block (patches under docs/perf/session21/wip/tile-warps16/; apply with
# `git checkout -b wip/tile-warps16 main && git am -3 docs/perf/session21/wip/tile-warps16/*.patch`,
# then run from that tree). Knob off is this tree's SASS byte for byte as main's (a subagent's
# check: 113 kernels, names aside), so the two probe variants come from this one tree:
# off = no flag, w16 = -DJAX_MARLIN_STREAM_TILE_WARPS=16.
#   1. probes (CUDA graphs, two rounds): the tile split's M <= 8 shapes and a control whose
#      warps have one step already (1 x 2048 x 4096);
#   2. GPU tests with the knob on (the package built with it): the streaming kernel's tests
#      (test_wide_tile_split_blocks runs, it skips on builds without the knob);
#   3. racecheck and memcheck on two wide shapes.
# run(command="bash docs/perf/session21/callD_prepared.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
f=(-std=c++17 -O3 --expt-relaxed-constexpr)
a90a=(-gencode arch=compute_90a,code=sm_90a)
pc=/tmp/pc; mkdir -p $pc /tmp/po/off /tmp/po/w16
(nvcc "${f[@]}" -gencode arch=compute_90,code=sm_90 -I ffi -c ffi/wgmma_kernel.cu -o $pc/wgmma_kernel.o &
 nvcc "${f[@]}" "${a90a[@]}" -I ffi -c ffi/marlin_kernel.cu -o $pc/marlin_kernel.o &
 nvcc "${f[@]}" "${a90a[@]}" -I ffi -c tools/latency_probe.cu -o $pc/probe.o &
 nvcc "${f[@]}" "${a90a[@]}" -I ffi -c ffi/stream_kernel.cu -o /tmp/po/off/stream_kernel.o &
 nvcc "${f[@]}" "${a90a[@]}" -DJAX_MARLIN_STREAM_TILE_WARPS=16 -Xptxas -v -I ffi -c ffi/stream_kernel.cu \
   -o /tmp/po/w16/stream_kernel.o > /tmp/po/w16/ptxas.log 2>&1 &
 wait
 for n in off w16; do nvcc "${a90a[@]}" $pc/*.o /tmp/po/$n/stream_kernel.o -o /tmp/po/$n/probe && echo "built $n"; done
 grep -ci "spill" /tmp/po/w16/ptxas.log | sed 's/^/ptxas lines naming spills (w16): /') > /tmp/probe_build.log 2>&1 &
pb=$!
CUDA_FLAGS="-DJAX_MARLIN_STREAM_TILE_WARPS=16" SKIP_EXAMPLES=1 TEST_TIMEOUT=200 \
  bash tools/device_check.sh -n 8 -m gpu -rs -k "tile or split or cluster or wide or stream or small_m" \
  > $OUT/check.log 2>&1
grep -E "took|passed|failed|total" $OUT/check.log
# The build must plan 16 warps where the rule says (a knob that did not reach the build would
# skip test_wide_tile_split_blocks and read green).
(cd /tmp && python3 -c "
import numpy as np, jax_marlin as jm
from jax_marlin import ops
q = jm.quantize(np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32))
w = jm.prepare(q.packed, q.scales, q.zero_points, K=4096, N=4096, block_size=128)
p = ops.stream_plan(1, w, np.float16); print(p); assert p['warps'] == 16, p
") 2>&1 | tail -2 | tee -a $OUT/check.log
grep -c "SKIPPED.*wide tile split" $OUT/pytest.log | sed 's/^/wide-test skips: /'
wait $pb; cat /tmp/probe_build.log
for r in 1 2; do for n in off w16; do
  echo "== $n r$r" | tee -a $OUT/probe.log
  timeout 40 /tmp/po/$n/probe splits= 1x4096x4096 1x14336x4096 1x4096x6144 8x4096x4096 1x8192x8192 1x2048x4096 2>&1 \
    | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " | tee -a $OUT/probe.log
done; done
cat > /tmp/wide_one.py <<'PY'
import sys, pathlib
sys.path.insert(0, sys.argv[5])
import numpy as np, jax.numpy as jnp
import sanitize_sweep as s
from jax_marlin import ops
M, N, K = map(int, sys.argv[1:4]); dtype = jnp.bfloat16 if sys.argv[4] == "bf16" else jnp.float16
w, a, bias, ref = s._operands(np.random.default_rng(1), M, N, K, 128, dtype)
plan = ops.stream_plan(M, w, dtype); print("plan", plan, flush=True)
assert plan["warps"] == 16, plan
s._check((M, N, K, "packed", dtype), a, w, bias, ref, "fused", 0); print("checked", flush=True)
PY
# Four runs (~40 s each) keep the call under its 600 s: racecheck and memcheck, C = 2 at M = 1
# (one step a warp) and M = 8 with ragged N (two steps a warp of 8, one of 16).
for tool in racecheck memcheck; do for sh in "1 4096 4096 fp16" "8 4100 4096 bf16"; do
  (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" timeout 90 \
     compute-sanitizer --tool $tool --kernel-name kns=marlin --error-exitcode 3 \
     python3 /tmp/wide_one.py $sh $repo/tools > /tmp/san.log 2>&1
   echo "$tool $sh: exit $? $(grep -E 'SUMMARY|checked' /tmp/san.log | tr '\n' ' ')") | tee -a $OUT/sanitize.txt
done; done
