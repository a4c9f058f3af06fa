#!/usr/bin/env bash
# Session 32 call E: the bench cells h200.csv lacks. (a) 4096 x 14336 and 14336 x 4096 (in
# the default shapes, past session 31 call C's budget) at M = 1-1024, fp16 and bf16, with
# tinygemm; (b) the ANCHORS M values between the table's columns (2, 8, 32, 128) and 512,
# 2048 on 4096 x 4096 and 28672 x 8192, fp16 and bf16: the 0.95x floor at every M; (c) the
# layer stack with its host dispatch time.
#   run(command="bash docs/perf/session32/callE.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt"
python3 -m pip install --no-build-isolation --no-deps . -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built"
cd /tmp
timeout 250 python3 -m jax_marlin.bench --shapes 4096x14336,14336x4096 --ms 1,4,16,64,256,1024 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --no-layer-stack \
  --no-repack --budget-s 200 --csv "$OUT/bench_a.csv" --plot /tmp/a.png > "$OUT/bench_a.log" 2>&1
echo "a exit $?"
timeout 170 python3 -m jax_marlin.bench --shapes 4096x4096,28672x8192 --ms 2,8,32,128,512,2048 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin --no-forced --no-layer-stack \
  --no-repack --budget-s 130 --csv "$OUT/bench_b.csv" --plot /tmp/b.png > "$OUT/bench_b.log" 2>&1
echo "b exit $?"
timeout 70 python3 -m jax_marlin.bench --no-sweep --no-repack --csv "$OUT/stack.csv" \
  --plot /tmp/s.png > "$OUT/stack.log" 2>&1
echo "stack exit $?"; grep "_stack32:" "$OUT/stack.log"
grep -A14 "speed-up over dense" "$OUT/bench_a.log" "$OUT/bench_b.log" | grep -v "dense  " | head -60
