#!/usr/bin/env bash
# Session 32 call F: the cells call E's budget left out (14336 x 4096, bf16, M = 64-1024).
#   run(command="bash docs/perf/session32/callF.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt"
python3 -m pip install --no-build-isolation --no-deps . -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cd /tmp
timeout 150 python3 -m jax_marlin.bench --shapes 14336x4096 --ms 64,256,1024 --dtypes bfloat16 \
  --impls dense,jax_marlin,tinygemm --no-forced --no-layer-stack --no-repack --budget-s 120 \
  --csv "$OUT/bench.csv" --plot /tmp/f.png > "$OUT/bench.log" 2>&1
echo "exit $?"; grep -A4 "speed-up over dense" "$OUT/bench.log"
