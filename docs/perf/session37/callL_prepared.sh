#!/usr/bin/env bash
# Session 38 ran parts of this (session38/callS.sh: the groups; callT.sh: M = 256 and 512 on
# 4096 x 4096 and 28672 x 8192); M = 128 and 2048 and the traces are still to run.
# Prepared for session 38: the rest of h200.csv at 20 ms calls (session 37's
# sizing): M = 128, 512, 2048 on the three headline shapes (session 32's rows, 3-8 ms
# calls where fast), fp16 and bf16, dense and jax_marlin; and groups 32 and per-channel at
# M = 1 and 16 on 8192 x 28672 (issue 3: within 10% of group 128's figure).
# Predicted: M >= 128 within the spread of session 32's rows (their calls were near 20 ms);
# group 32 at M = 1 ~12-15% slower than group 128 (11.3% more bytes), per-channel ~3% faster.
# Then merge: PYTHONPATH=. python3 docs/perf/session37/merge_h200.py <this call's CSVs>.
#   run(command="bash docs/perf/session37/callL_prepared.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 SKIP_EXAMPLES=1 bash tools/device_check.sh > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
tail -1 /tmp/build.txt
repo="$(pwd)"
cd /tmp  # the installed package, not the checkout's source tree
timeout 260 python3 -m jax_marlin.bench --shapes 8192x28672,28672x8192,4096x4096 --ms 128,512,2048 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin --no-repack --no-layer-stack \
  --budget-s 200 --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
timeout 120 python3 -m jax_marlin.bench --shapes 8192x28672 --ms 1,16 --dtypes float16 \
  --groups 32,-1 --impls dense,jax_marlin --no-repack --no-layer-stack \
  --csv "$OUT/bench_groups.csv" > "$OUT/bench_groups.log" 2>&1
echo "bench groups rc=$?"
grep -q "'cuda': True" "$OUT/bench.log" || { echo "the bench ran without the CUDA module"; exit 1; }
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log" "$OUT/bench_groups.log"
# Where the bench's extra time at 4096 x 4096, M = 2 goes: the bench read 7.71 us against
# 6.83 at M = 1 (session 37 calls I and G), where the kernel in CUDA graphs takes 6.04
# against 5.77 (call K): ~0.6 us a GEMM outside the kernel at M = 2 only. The traces name
# the kernels a GEMM (an extra copy or cast at M = 2, or a longer checksum).
for m in 1 2; do
  timeout 100 python3 "$repo/tools/bench_trace.py" --K 4096 --N 4096 --M $m --copies 29 \
    --passes 8 --top 12 --out /tmp/bt_m$m > "$OUT/bench_trace_4096_m$m.txt" 2>&1
  echo "trace M=$m rc=$?"; head -14 "$OUT/bench_trace_4096_m$m.txt"
done
