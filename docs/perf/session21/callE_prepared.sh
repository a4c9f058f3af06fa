#!/usr/bin/env bash
# session 21 call E (prepared, not run: no device after call B), on main: tinygemm against ours
# measured the same way (issue 3: "faster than tinygemm at every M, measured in the same way").
# The bench's opt-in *_pass rows time dense and jax_marlin as tinygemm is timed: a jitted pass
# over the rotation with every output returned (no checksum, no loop), called back to back;
# tinygemm replays a CUDA graph of such a pass. Shapes where the table reads tinygemm ahead
# (4096 x 4096 at M = 1) or close, fp16 and bf16.
# run(command="bash docs/perf/session21/callE_prepared.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
SKIP_EXAMPLES=1 TEST_TIMEOUT=60 \
  BENCH="--shapes 4096x4096,4096x14336,8192x28672 --ms 1,2,4,8,16 --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm,dense_pass,jax_marlin_pass --no-layer-stack --no-repack --budget-s 300" \
  bash tools/device_check.sh --co -q > $OUT/check.log 2>&1
grep -E "took|total" $OUT/check.log
grep -E "jax_marlin|tinygemm|dense" $OUT/bench.log | grep -E "^ +[0-9]+ " | head -80
