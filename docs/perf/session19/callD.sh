#!/usr/bin/env bash
# session 19 call D: landed tree GPU tests + memcheck; racecheck diagnosis per cluster shape, main and fix (__syncthreads before the cluster barrier)
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
SKIP_EXAMPLES=1 TEST_TIMEOUT=150 SANITIZE=memcheck SANITIZE_TIMEOUT=150 bash tools/device_check.sh -n 8 -m gpu > $OUT/check.log 2>&1 &
chk=$!
sleep 70
(cd .variants/fixtree && PIP_NO_INDEX=1 python3 -m pip install --no-build-isolation --no-deps --target /tmp/fixpkg . -Ccmake.define.XLA_FFI_INCLUDE_DIR=$repo/.ffi/include -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $OUT/fix_build.log 2>&1; echo "fix build rc $?")
wait $chk
tail -8 $OUT/check.log
race() {  # tag pythonpath M N K dt
  (cd /tmp && PYTHONPATH=$2 XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_FLAGS="--xla_gpu_autotune_level=0" timeout 60 compute-sanitizer --tool racecheck --kernel-name kns=marlin --error-exitcode 3 python3 $repo/.variants_bench/race_diag.py $3 $4 $5 $6 > $OUT/race_$1_$3x$4x$5_$6.log 2>&1; echo "$1 $3x$4x$5 $6: exit $? $(grep -o 'plan.*cluster_k[^,]*' $OUT/race_$1_$3x$4x$5_$6.log | grep -o "'rows': [0-9]*\|cluster_k[^,]*" | tr '\n' ' ') $(grep SUMMARY $OUT/race_$1_$3x$4x$5_$6.log)")
}
for sh in "200 8000 4100 bf16" "200 8000 4100 fp16" "200 8000 4096 bf16" "100 8000 2056 fp16" "20 12000 2056 fp16" "256 8192 4096 fp16"; do
  race main "" $sh
  race fix /tmp/fixpkg $sh
done
