#!/usr/bin/env bash
# Session 34, call A: where the 4-bit layer stack's extra host time goes (NOTES "Next"
# item 3). (Session 33's prepared call F, nodiv under ncu, is left out: the device refused
# five starts this session, ~570 s of the budget, and nodiv's best case is -1.2% on one
# shape.)
#   run(command="bash docs/perf/session34/callA.sh", carry=[".ffi"])
# *Predicted*: (1) with CUSTOM_CALL out of the command buffers, the 4-bit stack's
# dispatch falls toward dense's or below (~15-20 us a layer, XLA launching our kernels
# itself, as session 33's "command buffers off" row) while chained gets slower: if so the
# extra ~190 us a call is the command buffer's handling of our custom calls (tracing each
# into a nested graph), not our handler; (2) host_trace.py names the host events the
# 4-bit call adds (a guess: stream capture and graph update a layer, ~6 us each);
# jax_marlin_dense (our dequantization, one plain kernel an FFI call, then cuBLAS) is the
# control: if its layers cost the host as much extra as the fused ones, it is the FFI
# call itself (XLA traces an FFI call into a new graph at every record), not our launch.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
repo="$(pwd)"
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt"
python3 -m pip install --no-build-isolation --no-deps . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
echo "build took $(( $(date +%s) - start )) s"
cd /tmp
{
  echo "== default XLA flags"
  timeout 120 python3 "$repo/tools/stack_dispatch.py" --layers 8 32 --repeats 7 --impls dense jax_marlin jax_marlin_dense
  echo "== CUSTOM_CALL out of the command buffers"
  XLA_FLAGS=--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT \
    timeout 120 python3 "$repo/tools/stack_dispatch.py" --layers 8 32 --repeats 7 --impls dense jax_marlin jax_marlin_dense
} > "$OUT/dispatch.txt" 2>&1
echo "dispatch done at $(( $(date +%s) - start )) s"; grep -v "^W\|^I0" "$OUT/dispatch.txt" | tail -16
timeout 150 python3 "$repo/tools/host_trace.py" --layers 32 --calls 5 --top 45 --impls dense jax_marlin jax_marlin_dense \
  > "$OUT/host_trace.txt" 2>&1
echo "host trace done at $(( $(date +%s) - start )) s"; grep -v "^W\|^I0" "$OUT/host_trace.txt" | tail -110
echo "all done at $(( $(date +%s) - start )) s"
