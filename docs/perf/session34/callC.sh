#!/usr/bin/env bash
# Session 34, call C: is it the cluster launch that makes the fused call's re-record cost
# the host more than the dequantization's? Call A (host_trace, 32 layers of 4096 x 4096 at
# M = 1, profiled): the command buffer's update took 135 us a call for dense, 216 with our
# dequantization (one plain kernel an FFI call) before cuBLAS, 315 with the fused kernel
# (clusters of 2 at this shape); cuGraphLaunch 144 / 300 / 231 us.
#   run(command="bash docs/perf/session34/callC.sh", carry=[".ffi"])
# jax_marlin_c1: the fused kernel forced to one block a tile (split_k = -1, no cluster).
# *Predicted*: if the cluster launch is what costs, jax_marlin_c1's update falls toward
# ~200 us a call (about the dequantization's) and its dispatch toward dense's; if not, it
# stays at ~300 and the extra is the FFI call's re-trace whatever it launches. Its GPU
# time a layer (chained) is expected higher than the clusters' (~7.4 us).
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
repo="$(pwd)"
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
echo "build took $(( $(date +%s) - start )) s"
cd /tmp
timeout 120 python3 "$repo/tools/stack_dispatch.py" --layers 8 32 --repeats 7 \
  --impls dense jax_marlin jax_marlin_c1 jax_marlin_dense > "$OUT/dispatch.txt" 2>&1
grep -v "^W0\|^I0\|^E0" "$OUT/dispatch.txt" | tail -10
timeout 120 python3 "$repo/tools/host_trace.py" --layers 32 --calls 5 --top 22 \
  --impls dense jax_marlin jax_marlin_c1 > "$OUT/host_trace.txt" 2>&1
grep -E "==|command_buffer|cuGraph|PJRT_LoadedExecutable_Execute$" "$OUT/host_trace.txt"
echo "all done at $(( $(date +%s) - start )) s"
