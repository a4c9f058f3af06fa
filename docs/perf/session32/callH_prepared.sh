#!/usr/bin/env bash
# Prepared in session 32, not run: where the layer stack's 7.6 us a layer of host dispatch
# goes (session 32 call E: dense and 4-bit alike, ~243 us a 32-layer call), with
# tools/stack_dispatch.py at 8, 32 and 128 layers, under the default XLA flags and with
# command buffers off. ~2 minutes with the build.
#   run(command="bash docs/perf/session32/callH_prepared.sh", carry=[".ffi"])
# *Guess*: dispatch grows with the layers under command buffers (an update of the graph
# for each call's new buffers) and is a few us a call without them, where the GPU then
# waits on launches instead (the stack's wall time rises by ~1-3 us a layer).
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
python3 -m pip install --no-build-isolation --no-deps . -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cd /tmp
for flags in "" "--xla_gpu_enable_command_buffer="; do
  echo "== XLA_FLAGS=$flags"
  XLA_FLAGS="$flags" timeout 150 python3 "$repo/tools/stack_dispatch.py" 2>&1 | tee -a "$OUT/stack_dispatch.log"
done
