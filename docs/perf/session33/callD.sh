#!/usr/bin/env bash
# Session 33 call D, on the landed tree (acc21e1 + a comment): the bench at 4096 x 4096,
# M = 113 / 120 / 128, fp16 and bf16, a second reading of call C's M = 128 cell
# (0.94x in its first median, 1.03x fp16 / 0.99x bf16 in its second).
#   run(command="bash docs/perf/session33/callD.sh", carry=[".ffi"])
# *Predicted*: the kernel alone 13.8-13.9 us at all three M (call B), so the three cells
# alike, ~17.5-18.4 us against cuBLAS's ~17.3.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
python3 -m pip install --no-build-isolation --no-deps . -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cd /tmp && timeout 200 python3 -m jax_marlin.bench --shapes 4096x4096 --ms 113,120,128 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin --no-forced --no-layer-stack --no-repack \
  --budget-s 90 --csv "$OUT/bench.csv" 2>&1 | tail -14 | tee "$OUT/bench.log"
