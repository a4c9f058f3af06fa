#!/usr/bin/env bash
# Session 33 call C, on wip/h64 (the 64-row halves at M = 113-128 and the refitted time
# model): every GPU test, the bench at 4096 x 4096 M = 128 (the cell below issue 3's
# 0.95x floor: 18.6 us against cuBLAS's 17.4 in session 32 call E), then session 32's
# prepared call H: tools/stack_dispatch.py (8 and 32 layers) with and without command
# buffers.
#   run(command="bash docs/perf/session33/callC.sh", carry=[".ffi"])
# *Predicted*: the kernel alone read 14.84 -> 13.78 us (call B), so the bench's M = 128
# cell ~17.6 us, ~0.98-0.99x fp16 and bf16. Stack dispatch (session 32's guess): grows
# with the layers under command buffers and is a few us a call without them.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 TEST_TIMEOUT=220 \
  BENCH="--shapes 4096x4096 --ms 128 --dtypes float16,bfloat16 --impls dense,jax_marlin --no-forced --no-layer-stack --no-repack --budget-s 40" \
  bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"; grep -A8 "speed-up over dense" "$OUT/bench.log"
cd /tmp
for flags in "" "--xla_gpu_enable_command_buffer="; do
  echo "== XLA_FLAGS=$flags"
  XLA_FLAGS="$flags" timeout 100 python3 "$repo/tools/stack_dispatch.py" --layers 8 32 2>&1 \
    | tee -a "$OUT/stack_dispatch.log"
done
rm -f "$OUT/build.log" "$OUT/bench.png"
echo "total $(el) s"
