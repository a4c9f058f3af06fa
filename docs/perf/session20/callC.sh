#!/usr/bin/env bash
# session 20 call C: the landed tree (main after calls A-B). GPU tests + memcheck over the
# sanitize sweep; racecheck a shape a run (race_diag.py: the streaming kernel's tile split at
# M = 1 with the late inbox, M = 16, and one wgmma cluster shape); probe in CUDA graphs,
# .variants/old = the session's start (ecf5f28) against .variants/new = this tree.
# run(command="bash docs/perf/session20/callC.sh", carry=[".ffi", ".variants"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 SANITIZE=memcheck SANITIZE_TIMEOUT=150 \
  bash tools/device_check.sh -n 8 -m gpu > $OUT/check.log 2>&1
tail -12 $OUT/check.log
for sh in "1 4096 4096 fp16" "16 4096 4096 bf16" "1 14336 4104 fp16" "200 8000 4100 bf16"; do
  set -- $sh
  (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" timeout 60 \
     compute-sanitizer --tool racecheck --kernel-name kns=marlin --error-exitcode 3 \
     python3 $repo/docs/perf/session19/race_diag.py $1 $2 $3 $4 > /tmp/race.log 2>&1
   echo "$sh: exit $? $(grep SUMMARY /tmp/race.log)") | tee -a $OUT/race.txt
done
PROBE_TIMEOUT=60 PROBE_ROUNDS=2 PROBE_ARGS="splits= 1x4096x4096 1x14336x4096 4x4096x4096 8x4096x4096 16x4096x4096 1x4096x6144 1x8192x28672 16x8192x28672 1x28672x8192 200x4104x8000" \
  bash tools/probe_variants.sh 2>&1 | grep -v "split_k_override:$" > $OUT/probe.log
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |== probe" $OUT/probe.log
rm -f $OUT/probe_*_r*.txt
