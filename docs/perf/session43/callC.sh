#!/usr/bin/env bash
# Session 43 call C (prepared): the bench on the shapes whose M = 9-16 kernels the walk
# (585bb0d) changed, for README's table and h200.csv: 4096 x 4096 (the 16-row tile split)
# and 14336 x 4096 (at M = 16 now the phased tile split, was stream-K), M = 9, 12, 16,
# fp16 and bf16, against jnp.dot in the same run. From session 42's call D (probe, CUDA
# graphs) predicted: 4096 x 4096 M = 16 1.17x -> ~1.19x, 14336 x 4096 M = 16 1.36x ->
# ~1.41x (20.9 -> 20.1 us in the probe); the bench's times sit ~1 us above the probe's.
#   run(command="bash docs/perf/session43/callC.sh", carry=[".ffi"])  (~5 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
BUILD_ONLY=1 bash tools/device_check.sh || exit 1
cd /tmp  # the installed package, not the checkout's source tree
timeout 300 python3 -m jax_marlin.bench --shapes 4096x4096,14336x4096 --ms 9,12,16 \
  --dtypes float16,bfloat16 --impls dense,jax_marlin --no-repack --no-layer-stack \
  --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -q "'cuda': True" "$OUT/bench.log" || echo "the bench ran without the CUDA module"
grep -hE "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/bench.log"
