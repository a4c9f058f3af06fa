#!/usr/bin/env bash
# Prepared in session 30, not run (no device time left): the k-split reduce as the GEMM's
# programmatic dependent launch (the patch beside this, a knob off by default). In a checkout
# of main:
#   git checkout -b wip/splitk-pdl main
#   git am -3 docs/perf/session30/wip/splitk-pdl/0001-*.patch
#   rm -rf .variants && mkdir -p .variants/main .variants/spdl
#   git archive main ffi | tar -x -C .variants/main
#   git archive HEAD ffi | tar -x -C .variants/spdl
#   echo "-DJAX_MARLIN_SPLITK_REDUCE_PDL=1" > .variants/spdl/CUDA_FLAGS
#   run(command="bash docs/perf/session30/wip/splitk-pdl/callH_prepared.sh",
#       carry=[".ffi", ".variants"])
# (~7 minutes.) (1) Probe, main against spdl, random bits, two rounds: the wgmma plans with a
# reduce kernel (the probe's per-kernel column shows two kernels) and, as controls, plans
# without one; (2) the branch's GPU tests with the knob; (3) memcheck and racecheck on the
# sweep's fused (its forced split-K 3 takes the reduce) and wgmma_clusters parts.
# *Predicted*: -0.3 to -1 us where the reduce follows (64 x 4096 x 4096: 12.3 -> 11.3-12.0;
# the streaming reduce's gain was 0.3-0.9 us), nothing where none does.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 64x4096x4096 32x4096x4096 128x4096x4096
  256x4096x4096 64x14336x4096 64x4096x14336 32x4096x14336 64x8192x28672" \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-150
echo "probe done at $(el) s"
CUDA_FLAGS="-DJAX_MARLIN_SPLITK_REDUCE_PDL=1" SKIP_EXAMPLES=1 TEST_TIMEOUT=200 \
  bash tools/device_check.sh -n 8 -m gpu -q > "$OUT/check.log" 2>&1
echo "check exit $? at $(el) s"; tail -2 "$OUT/pytest.log"
source tools/gpu_probes.sh
run_sanitizers "fused wgmma_clusters" 150 "$OUT/sanitize.log"
rm -f "$OUT/gpu.txt" "$OUT"/probe_*_r*.txt
echo "total $(el) s"
