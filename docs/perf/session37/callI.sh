#!/usr/bin/env bash
# Session 37, call I: the table's in-between M values (2, 8, 32) on the three headline
# shapes with every call >= 20 ms, and XLA's command-buffer log of a jitted loop of our
# calls printed whole (call H kept only counts: 16 "trace cache create new item" for the
# 16 custom calls of the loop's body, one "Update command buffer by recording").
#   run(command="bash docs/perf/session37/callI.sh", carry=[".ffi"])
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
BUILD_ONLY=1 SKIP_EXAMPLES=1 bash tools/device_check.sh > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
tail -1 /tmp/build.txt
cd /tmp  # the installed package, not the checkout's source tree
timeout 240 python3 -m jax_marlin.bench --shapes 8192x28672,28672x8192,4096x4096 --ms 2,8,32 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-repack --no-layer-stack \
  --budget-s 170 --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -h "'cuda': True" "$OUT/bench.log" | head -1 | cut -c1-120
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_MAX_VLOG_LEVEL=0 \
  TF_CPP_VMODULE=command_buffer_thunk=3,command_executor=1,traced_command_buffer=6,command_buffer_cmd=2 \
  timeout 100 python3 "$repo/tools/bench_trace.py" --K 4096 --N 4096 --M 1 --copies 16 --passes 4 \
  --out /tmp/bt_vlog > "$OUT/vlog_stdout.txt" 2> "$OUT/vlog.txt"
echo "vlog rc=$?"
cut -c1-260 "$OUT/vlog.txt" | grep -v "^WARNING" | head -150
