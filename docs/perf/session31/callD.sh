#!/usr/bin/env bash
# Session 31 call D: the bench's layer-stack section alone, once, after the
# untimed warm-up run of the timed call (call C: jax_marlin_stack32 11.96 vs run2 8.44).
#   run(command="bash docs/perf/session31/callD.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
python3 -m pip install --no-build-isolation --no-deps . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cd /tmp
for i in 1; do
  timeout 100 python3 -m jax_marlin.bench --no-sweep --no-repack --csv "$OUT/stack$i.csv" \
    --plot /tmp/stack$i.png 2>&1 | grep -E "_stack32:|Error" 
done | tee "$OUT/stack.log"
# and the decode example's refresh with the median of three timed calls (--repeats 3)
timeout 90 python3 "$repo/examples/decode.py" --out "$OUT/decode.json" 2>&1 | tail -5
# (the dense path's kernels at M = 4096 under ncu were planned here too; dropped for lack of
# device time: session 32's item 1.)
