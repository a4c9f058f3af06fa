#!/usr/bin/env bash
# session 23 call J: main with the producer warpgroup on by default (256-row blocks whose
# last row block holds >= 128 rows; call I): every GPU test, racecheck and memcheck on the
# sweep's two wgmma parts (the producer; the k-split clusters, whose 200-row shape now runs
# 256-row producer clusters), then the bench for docs/perf/h200.csv (session 21 call B's
# command, a shorter budget).
# run(command="bash docs/perf/session23/callJ.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 SANITIZE="racecheck memcheck" SANITIZE_TIMEOUT=100 \
  SANITIZE_PARTS="wgmma_producer wgmma_clusters" \
  BENCH="--shapes 8192x28672,28672x8192,4096x4096 --ms 1,4,16,64,256,1024 --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --no-repack --budget-s 190" \
  bash tools/device_check.sh -n 8 -m gpu -rs > $OUT/check.log 2>&1
echo "check exit $?"
for f in $OUT/sanitize_*; do echo "==== $f"; cat "$f"; done > /tmp/sanitize.log 2>&1
rm -f $OUT/sanitize_*; mv /tmp/sanitize.log $OUT/sanitize.log
grep -E "took|passed|failed|exit|SUMMARY|sanitize sweep|crashed|total" $OUT/check.log
grep -E "SKIPPED" $OUT/pytest.log | head -5
grep -E "x_dense|jax_marlin " $OUT/bench.log | head -40
