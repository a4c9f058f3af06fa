#!/usr/bin/env bash
# Session 27, call F: wip/stream-k-l2 (the planner keeps the grid where the activations pass
# half the L2). The package built, the planner and stream-K GPU tests, the plans the module
# makes on this GPU (with the L2 it reads), and the bench at M = 768 on the two large shapes.
# *Predicted*: 768 x 28672 x 8192 plans the grid (64 x 3, no stream-K): ~651 us in CUDA
# graphs (call D's -2003) against 678 with stream-K, so ~0.86x -> ~0.90x fp16 in the bench;
# 768 x 8192 x 28672 keeps stream-K (unchanged).
#   run(command="bash docs/perf/session27/callF.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SKIP_EXAMPLES=1 TEST_TIMEOUT=150 \
  BENCH="--shapes 8192x28672,28672x8192 --ms 768 --dtypes float16 --impls dense,jax_marlin --no-forced --no-layer-stack --no-repack --repeats 5 --budget-s 80" \
  bash tools/device_check.sh -n 8 -m gpu -rs -k "plan or stream_k" > "$OUT/check.log" 2>&1
echo "check exit $?"
grep -E "took|passed|failed|exit|error|Error" "$OUT/check.log" | head -20
(cd /tmp && python3 - <<'PY'
import types
import jax_marlin  # noqa: F401
from jax_marlin import ops
for K, N in ((28672, 8192), (8192, 28672)):
    w = types.SimpleNamespace(K=K, N=N, block_size=128, zero_point_kind="packed")
    for M in (256, 512, 768, 1024):
        print(f"{K}x{N} M={M}: {ops.wgmma_plan(M, w, 'float16')}")
PY
) 2>&1 | tee "$OUT/plans.txt"
nvidia-smi --query-gpu=name --format=csv
grep -E "x_dense|jax_marlin |dense " "$OUT/bench.log" | head -20
