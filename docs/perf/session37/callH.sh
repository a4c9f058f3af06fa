#!/usr/bin/env bash
# Session 37, call H: the rest of the table's cells that call G's sizing changes most (the
# fast ones): 4096 x 14336 and 14336 x 4096 at M = 1-1024, and M = 4 and 1024 on the other
# three shapes, fp16 and bf16, dense / jax_marlin / tinygemm, every call >= 20 ms.
# Predicted: M <= 16 ratios up by ~3-12% where h200.csv's jax_marlin calls ran under
# 10 ms (4096 x 14336: ~5 ms calls), M >= 256 within the spread.
# Then XLA's own log of what it re-records a call (the ~250 us idle stretch before the
# loop that call E's trace showed for jax_marlin only): one bench_trace run with
# TF_CPP_VMODULE on the command buffer's modules, counted.
#   run(command="bash docs/perf/session37/callH.sh", carry=[".ffi"])
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
BUILD_ONLY=1 SKIP_EXAMPLES=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
tail -1 "$OUT/build.txt"
cd /tmp  # the installed package, not the checkout's source tree
timeout 260 python3 -m jax_marlin.bench --shapes 4096x14336,14336x4096 --ms 1,4,16,64,256,1024 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-repack --no-layer-stack \
  --budget-s 200 --csv "$OUT/bench_a.csv" > "$OUT/bench_a.log" 2>&1
echo "bench a rc=$?"
timeout 170 python3 -m jax_marlin.bench --shapes 8192x28672,28672x8192,4096x4096 --ms 4,1024 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-repack --no-layer-stack \
  --budget-s 120 --csv "$OUT/bench_b.csv" > "$OUT/bench_b.log" 2>&1
echo "bench b rc=$?"
grep -h "'cuda': True" "$OUT"/bench_[ab].log | head -1 | cut -c1-120
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT"/bench_[ab].log
TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_MAX_VLOG_LEVEL=0 \
  TF_CPP_VMODULE=command_buffer_thunk=3,command_executor=1,traced_command_buffer=6,command_buffer_cmd=2 \
  timeout 100 python3 "$repo/tools/bench_trace.py" --K 4096 --N 4096 --M 1 --copies 16 --passes 4 \
  --out /tmp/bt_vlog > "$OUT/vlog_stdout.txt" 2> /tmp/vlog.txt
echo "vlog rc=$? ($(wc -l < /tmp/vlog.txt) lines)"
grep -oE "(Update|update|Record|record|Trac|trac|cache|Cache)[A-Za-z ]{0,40}" /tmp/vlog.txt | sort | uniq -c | sort -rn | head -30
gzip -c /tmp/vlog.txt > "$OUT/vlog.txt.gz"
