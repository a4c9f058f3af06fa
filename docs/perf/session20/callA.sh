#!/usr/bin/env bash
# session 20 call A: the tree = main + wip/wgmma-force-reduce + wip/wgmma-exchange-mbarrier (mbarrier exchange knob on)
# The tree = that branch; carry=[".ffi", ".variants"] with .variants/{main,xm}/ffi (git archive
# main / the branch) and .variants/xm/CUDA_FLAGS = -DJAX_MARLIN_WGMMA_EXCHANGE_MBARRIER=1.
# 1. GPU tests with the knob on; 2. racecheck a cluster shape a run (race_diag.py);
# 3. probe main against it on cluster shapes (~6 min in all).
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
CUDA_FLAGS="-DJAX_MARLIN_WGMMA_EXCHANGE_MBARRIER=1" SKIP_EXAMPLES=1 TEST_TIMEOUT=120 \
  bash tools/device_check.sh -n 8 -m gpu -k "clusters or back_to_back or wgmma or reduce_kernels_bits" > $OUT/check.log 2>&1
tail -5 $OUT/check.log
for sh in "200 8000 4100 bf16" "256 8192 4096 fp16" "100 8000 2056 fp16" "20 12000 2056 fp16"; do
  set -- $sh
  (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" timeout 60 \
     compute-sanitizer --tool racecheck --kernel-name kns=marlin --error-exitcode 3 \
     python3 $repo/docs/perf/session19/race_diag.py $1 $2 $3 $4 > /tmp/race_$1x$2x$3_$4.log 2>&1
   echo "$sh: exit $? $(grep SUMMARY /tmp/race_$1x$2x$3_$4.log)") | tee -a $OUT/race.txt
done
PROBE_TIMEOUT=90 PROBE_ROUNDS=2 PROBE_ARGS="splits= 256x4096x4096 256x8192x8192 200x4104x8000 64x4096x14336 32x4096x14336" \
  bash tools/probe_variants.sh 2>&1 | grep -v "split_k_override:$" | tee $OUT/probe_xm.log
