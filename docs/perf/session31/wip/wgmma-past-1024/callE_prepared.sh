#!/usr/bin/env bash
# Prepared in session 31, not run (no device time left): does the wgmma kernel beat the
# dense path (CUDA dequantization + cuBLAS) past 1024 rows? 4096 x 4096 at M = 4096 reads
# 0.92-0.94x through the dense path (session 31 call C), under issue 3's 0.95x floor, and
# the dense path's own floor there is ~0.955x (cuBLAS's 211 us + 40 MB of dequantization
# traffic, ~10 us). In a checkout of main:
#   git checkout -b wip/wgmma-past-1024 main
#   git am -3 docs/perf/session31/wip/wgmma-past-1024/0001-*.patch
#   run(command="bash docs/perf/session31/wip/wgmma-past-1024/callE_prepared.sh",
#       carry=[".ffi"])
# (~6 minutes.) The build with -DJAX_MARLIN_WGMMA_MAX_M=4096; the bench's forced
# `jax_marlin_fused` rows then time the wgmma kernel at M = 2048 and 4096 (impl="auto",
# the `jax_marlin` rows, still takes the dense path there), each output checked (rel_err).
# *Predicted*: at M = 1024 the kernel ties cuBLAS (4096 x 4096 1.01-1.02x); at 4096 rows
# its 256 blocks make 1.94 waves on 132 SMs, so ~4 x 56.6 us x (0.95-1.0) = 215-226 us on
# 4096 x 4096 against the dense path's 226: fused 0-5% ahead; on 8192 x 28672 a tie.
# Land (ops.WGMMA_MAX_M and the knob's default, the tests at the new edge) only if the
# fused rows beat the dense path's on all three shapes at M = 2048 and 4096.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
CUDA_FLAGS="-DJAX_MARLIN_WGMMA_MAX_M=4096" SKIP_EXAMPLES=1 \
  BENCH="--shapes 4096x4096,8192x28672,28672x8192 --ms 1024,2048,4096 --dtypes float16 --impls dense,jax_marlin,jax_marlin_fused --no-layer-stack --no-repack --budget-s 240" \
  bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "exit $?"
grep -E "x_dense|jax_marlin|dense  " "$OUT/bench.log" | tail -40
rm -f "$OUT/build.log" "$OUT/pytest.log"
