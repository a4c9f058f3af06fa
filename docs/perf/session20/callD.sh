#!/usr/bin/env bash
# session 20 call D: the tree = wip/epi-init (the exchange's barriers set up in the epilogue).
# GPU tests of the cluster paths and racecheck on two cluster shapes with it; probe in CUDA
# graphs: .variants/old (ecf5f28, the two-cluster-barrier exchange), new (main: barriers set
# up in the prologue), epi (this tree).
# run(command="bash docs/perf/session20/callD.sh", carry=[".ffi", ".variants"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
(PROBE_ROUNDS=0 bash tools/probe_variants.sh > /tmp/pbuild.log 2>&1) &
pb=$!
SKIP_EXAMPLES=1 TEST_TIMEOUT=120 bash tools/device_check.sh -n 8 -m gpu \
  -k "clusters or back_to_back or reduce_kernels_bits" > $OUT/check.log 2>&1
tail -4 $OUT/check.log
wait $pb; grep -E "built|FAIL" /tmp/pbuild.log
for sh in "256 8192 4096 fp16" "20 12000 2056 fp16"; do
  set -- $sh
  (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" timeout 60 \
     compute-sanitizer --tool racecheck --kernel-name kns=marlin --error-exitcode 3 \
     python3 $repo/docs/perf/session19/race_diag.py $1 $2 $3 $4 > /tmp/race.log 2>&1
   echo "$sh: exit $? $(grep SUMMARY /tmp/race.log)") | tee -a $OUT/race.txt
done
PROBE_BUILD=0 PROBE_TIMEOUT=60 PROBE_ROUNDS=2 PROBE_ARGS="splits= 200x4104x8000 256x8192x28672 64x8192x28672 256x4096x4096 64x4096x14336 32x4096x14336" \
  bash tools/probe_variants.sh 2>&1 | grep -v "split_k_override:$" > $OUT/probe.log
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |== probe" $OUT/probe.log
rm -f $OUT/probe_*_r*.txt
