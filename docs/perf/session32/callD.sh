#!/usr/bin/env bash
# Session 32 call D: the bench's M = 4096 cells (every default shape, fp16 and bf16) now
# that impl="auto" takes the wgmma kernel there, for h200.csv's M = 4096 rows. Builds first
# unless call C's install is still on the machine.
#   run(command="bash docs/perf/session32/callD.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
(cd /tmp && python3 -c "import jax_marlin; assert jax_marlin.ops.WGMMA_MAX_M == 4096") 2>/dev/null || \
  python3 -m pip install --no-build-isolation --no-deps . -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt"
(cd /tmp && timeout 500 python3 -m jax_marlin.bench --ms 4096 --dtypes float16,bfloat16 \
   --impls dense,jax_marlin --no-forced --no-layer-stack --no-repack --budget-s 400 \
   --csv "$OUT/bench.csv" --plot "$OUT/bench.png" > "$OUT/bench.log" 2>&1)
echo "exit $?"; tail -30 "$OUT/bench.log"
rm -f "$OUT/build.log"
