#!/usr/bin/env bash
# Session 44 call E (prepared): the bench's harness changes of session 44 on the GPU, part 1.
# 1. tests/test_bench.py (torch + CUDA here: its tinygemm test runs tinygemm in the JAX
#    rows' loop and as bare passes, each checked against the oracle).
# 2. The loop's optimization barrier (e80a37c): dense, jax_marlin and xla_int4 rows from this
#    tree's bench with the barrier's line taken out, then as it is, same cells.
#    *Predicted*: dense and jax_marlin within each row's own us / us_run2 spread (the
#    barrier is a no-op at run time; on the CPU the compiled dense loop is unchanged but
#    for it). xla_int4 with the barrier: ~2.7x slower than dense at M = 1 (ANCHORS: 327
#    against 123 us on 8192 x 28672), as nothing is hoisted; without it the same if the
#    GPU's XLA did not hoist either, near dense if it did.
#   run(command="bash docs/perf/session44/callE.sh", carry=[".ffi"])  (~6 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 bash tools/device_check.sh || exit 1
# This tree's bench without the barrier (the device's copy has no git history).
sed -e '/optimization_barrier((x, weights))/d' -e 's/for w in pass_weights/for w in weights/' \
  jax_marlin/bench.py > /tmp/bench_before_barrier.py
repo="$(pwd)"
cd /tmp  # the installed package, not the checkout's source tree
timeout 140 python3 -m pytest -q -p no:cacheprovider "$repo/tests/test_bench.py" \
  > "$OUT/test_bench.txt" 2>&1
echo "test_bench rc=$?"; tail -3 "$OUT/test_bench.txt"
CELLS=(--shapes 4096x4096,8192x28672 --ms 1,16 --dtypes float16 --no-repack
       --no-layer-stack --impls dense,jax_marlin,xla_int4)
timeout 130 python3 /tmp/bench_before_barrier.py "${CELLS[@]}" \
  --csv "$OUT/before_barrier.csv" > "$OUT/before_barrier.log" 2>&1
echo "bench before the barrier rc=$?"
timeout 130 python3 -m jax_marlin.bench "${CELLS[@]}" \
  --csv "$OUT/barrier.csv" > "$OUT/barrier.log" 2>&1
echo "bench with the barrier rc=$?"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/before_barrier.log" "$OUT/barrier.log"
