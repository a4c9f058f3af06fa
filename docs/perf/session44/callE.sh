#!/usr/bin/env bash
# Session 44 call E (prepared): the bench's harness changes of session 44, on the GPU.
# 1. tests/test_bench.py (torch + CUDA here: its tinygemm test runs tinygemm in the JAX
#    rows' loop and as bare passes, each checked against the oracle).
# 2. The loop's optimization barrier (e80a37c): dense and jax_marlin rows from this tree's
#    bench with the barrier's line taken out, and as it is, same cells, same process order.
#    *Predicted*: within each row's own us / us_run2 spread (the barrier is a no-op at run
#    time; on the CPU the compiled dense loop is unchanged but for it). xla_int4 (new
#    rows): ~2.7x slower than dense at M = 1 (ANCHORS: 327 vs 123 us on 8192 x 28672) if
#    nothing is hoisted; near dense if XLA hoisted its dequantization before.
# 3. tinygemm measured as our rows are (the loop) against the old way (tinygemm_pass: CUDA
#    events around graph replays of bare passes), at the cells where it led: 4096 x 4096,
#    M = 1, 2, 4, fp16 and bf16, and 8192 x 28672 at M = 1, 16. *Predicted*: tinygemm's loop
#    rows ~0.4-1 us above its pass rows at 4096 x 4096 (the checksum's share and a graph
#    launch a pass), so ours (6.8-8.0 us) ahead or tied at M = 1-2; unchanged order
#    elsewhere.
#   run(command="bash docs/perf/session44/callE.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 bash tools/device_check.sh || exit 1
# This tree's bench without the barrier (the device's copy has no git history).
sed -e '/optimization_barrier((x, weights))/d' -e 's/for w in pass_weights/for w in weights/' \
  jax_marlin/bench.py > /tmp/bench_before_barrier.py
cd /tmp  # the installed package, not the checkout's source tree
timeout 150 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/tests/test_bench.py" \
  > "$OUT/test_bench.txt" 2>&1
echo "test_bench rc=$?"; tail -3 "$OUT/test_bench.txt"
CELLS=(--shapes 4096x4096,8192x28672 --ms 1,16 --dtypes float16 --no-repack
       --no-layer-stack)
timeout 150 python3 /tmp/bench_before_barrier.py "${CELLS[@]}" --impls dense,jax_marlin,xla_int4 \
  --csv "$OUT/before_barrier.csv" > "$OUT/before_barrier.log" 2>&1
echo "bench before the barrier rc=$?"
timeout 150 python3 -m jax_marlin.bench "${CELLS[@]}" --impls dense,jax_marlin,xla_int4 \
  --csv "$OUT/barrier.csv" > "$OUT/barrier.log" 2>&1
echo "bench with the barrier rc=$?"
timeout 200 python3 -m jax_marlin.bench --shapes 4096x4096,8192x28672 --ms 1,2,4,16 \
  --dtypes float16,bfloat16 --no-repack --no-layer-stack \
  --impls dense,jax_marlin,tinygemm,dense_pass,jax_marlin_pass,tinygemm_pass \
  --csv "$OUT/tinygemm.csv" > "$OUT/tinygemm.log" 2>&1
echo "bench tinygemm rc=$?"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/before_barrier.log" "$OUT/barrier.log" \
  "$OUT/tinygemm.log"
