#!/usr/bin/env bash
# Prepared in session 30, not run (no device time left): session 31's first call, on main
# at or after 75a41da. (1) The probe, the landed tree against the same with the reduce's
# dependent launch off: confirms that launch_reduce's ptxVersion guard (added after the
# measurement) keeps it on; expect ~-0.9 us at 1 x 4096 x 28672 and ~-0.7 at 16 x 14336 x
# 4096, a tie if the guard reads the build wrongly. (2) The GPU tests on the landed tree.
# (3) The bench for docs/perf/h200.csv (session 27 call C's arguments). (4) The decode example.
#   rm -rf .variants && mkdir -p .variants/main .variants/nopdl
#   git archive HEAD ffi | tar -x -C .variants/main
#   git archive HEAD ffi | tar -x -C .variants/nopdl
#   echo "-DJAX_MARLIN_STREAM_REDUCE_PDL=0" > .variants/nopdl/CUDA_FLAGS
#   run(command="bash docs/perf/session30/callG_prepared.sh", carry=[".ffi", ".variants"])
# (~10 minutes; BENCH_BUDGET=0 skips the bench.)
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 1x4096x28672 16x14336x4096 1x8192x28672
  4x28672x8192 1x4096x4096" bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-110
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"
if [ "${BENCH_BUDGET:-420}" != 0 ]; then
  SKIP_EXAMPLES=1 \
    BENCH="--shapes 8192x28672,28672x8192,4096x4096 --ms 1,4,16,64,256,1024 --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --no-repack --budget-s ${BENCH_BUDGET:-420}" \
    bash tools/device_check.sh --co -q > "$OUT/bench_check.log" 2>&1
  echo "bench exit $? at $(el) s"
  grep -E "x_dense|jax_marlin " "$OUT/bench.log" | head -40
fi
(cd /tmp && timeout 200 python3 "$repo/examples/decode.py" --out "$OUT/decode.json" 2>&1 | tail -5)
rm -f "$OUT/gpu.txt" "$OUT"/probe_*_r*.txt "$OUT/bench_check.log" "$OUT/build.log"  # at most 8 files come back
echo "total $(el) s"
