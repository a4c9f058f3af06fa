#!/usr/bin/env bash
# Prepared in session 41 (not run): the GPU tests and memcheck with wip/l2-hint.patch
# applied (matmul_nbits's `prefetch`, the L2 hint: the handler's sixth operand, the
# streaming kernel's bulk prefetches after its outputs, jmf.Linear's and the decode
# example's use of it). Run after callC_prepared.sh, if the hint won there.
# New GPU tests: test_gpu.py's test_the_l2_hint_changes_no_bit_on_any_streaming_grid (the
# planner's grid, aligned splits, the tile split alone and in clusters, at M = 1 and 12,
# hinting 35.7 MB of codes, spread, and a small weight's); test_matmul.py's
# test_prefetch_is_a_hint_that_changes_no_result (M = 1, 12, 40 in f16 / bf16 / f32);
# test_examples.py's hinted decoder against the float64 oracle and bit for bit against
# the unhinted one. tools/sanitize_sweep.py's fused calls each name their own weights as
# the hint, so memcheck sees the bulk prefetches over ragged spans.
# Predicted: every test passes (session 39: 460 passed, 12 skipped; +~19 here), memcheck
# 0 errors on the fused sweep.
#   run(command="bash docs/perf/session41/callD_prepared.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
git apply docs/perf/session41/wip/l2-hint.patch && echo "patch applied" \
  || { echo "PATCH FAILED"; exit 1; }
SWEEP_SPLIT_K=-2 SANITIZE_PARTS=fused SANITIZE=memcheck SANITIZE_TIMEOUT=100 \
  SKIP_EXAMPLES=1 TEST_TIMEOUT=270 timeout 560 bash tools/device_check.sh -n 8 -m gpu -q \
  > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
bash tools/check_summary.sh "$OUT/gpu_tests.txt"
