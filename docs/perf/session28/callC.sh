#!/usr/bin/env bash
# Session 28, call C, on main with 904b748 (unsigned copy addresses at 32 and 64 rows)
# and the planner-sized stream-K area: (1) the probe, this tree (cur) against 100d008
# (all: the unsigned addresses at every row count), on the 128-row plans, where call B
# read a loss on 128 x 8192 x 28672 and a gain on 256 x 4096 x 4096; (2) every GPU test;
# (3) the bench's cells that the landed change moves (M = 32 and 64) and M = 256, fp16
# and bf16, without tinygemm. In this checkout:
#   rm -rf .variants && mkdir -p .variants/cur .variants/all
#   git archive HEAD | tar -x -C .variants/cur; git archive 100d008 | tar -x -C .variants/all
#   run(command="bash docs/perf/session28/callC.sh", carry=[".ffi", ".variants"])
# *Predicted*: all against cur, -2 to -6% at 256 x 4096 x 4096 and +1.8% at 128 x 8192 x
# 28672 if call B's readings hold; bench 4096 x 4096 at M = 64 -2.5%, 8192 x 28672 at M =
# 32 -4%, M = 64 on the large shapes unmoved, M = 256 unmoved.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 128x8192x28672 128x28672x8192 100x4096x4096
  128x4096x4096 256x4096x4096 256x4096x14336" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=300 \
  BENCH="--shapes 8192x28672,28672x8192,4096x4096 --ms 32,64,256 --dtypes float16,bfloat16 --impls dense,jax_marlin --no-forced --no-layer-stack --no-repack --budget-s 100" \
  bash tools/device_check.sh -n 8 -m gpu -rs > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"
grep -E "passed|failed|error|Error" "$OUT/check.log" | head -10
grep -E "x_dense|jax_marlin " "$OUT/bench.log" | head -40
rm -f "$OUT/pytest.log" "$OUT/gpu.txt"
echo "total $(el) s"
