#!/usr/bin/env bash
# Session 35, call C: where the ~2 us a GEMM of idle time that our custom calls carry in
# the bench's loop sits (call B: 4096 x 4096 at M = 512, 2.19 us a gap against dense's
# 0.38; the untraced call 135 us longer than its kernels explain). bench_trace.py now
# prints the gaps by the kinds on either side (GEMM -> GEMM inside a pass, GEMM -> other
# and other -> GEMM at the pass's checksum) and the longest gaps.
#   run(command="bash docs/perf/session35/callC.sh", carry=[".ffi"])
# Predicted: if GEMM -> GEMM gaps are ~2 us, each custom call pays it (its child graph
# node, the cluster launch); if they are ~0.1-0.4 us (session 14's reading) and the pass
# boundaries carry ~40 us more than dense's, it is the command buffer's per-pass work
# (XLA re-recording our FFI calls when it updates the graph).
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PIP_NO_INDEX=1 PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
repo="$(pwd)"
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
echo "build took $(( $(date +%s) - start )) s"
cd /tmp
run_trace() {  # name args...
  local name=$1; shift
  timeout 150 python3 "$repo/tools/bench_trace.py" "$@" --top 6 --out "/tmp/bt_$name" \
    > "$OUT/bench_trace_$name.txt" 2>&1
  grep -v "^W\|^I0" "$OUT/bench_trace_$name.txt" | tail -40
}
run_trace m512 --K 4096 --N 4096 --M 512 --passes 4
run_trace m1_4096 --K 4096 --N 4096 --M 1 --copies 29 --passes 4
run_trace m1_8192 --K 8192 --N 28672 --M 1 --copies 2 --passes 4
echo "all done at $(( $(date +%s) - start )) s"
