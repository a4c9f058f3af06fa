#!/usr/bin/env bash
# session 19 call A: GPU tests + memcheck on main, probe builds in the background, bench traces main vs bench-checksum
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 SANITIZE=memcheck SANITIZE_TIMEOUT=150 bash tools/device_check.sh -n 8 -m gpu > $OUT/check.log 2>&1 &
chk=$!
sleep 75   # the package build first, then the probes' builds beside the tests
(PROBE_ROUNDS=0 bash tools/probe_variants.sh > $OUT/probe_build.log 2>&1) &
wait $chk
tail -25 $OUT/check.log
wait
cat $OUT/probe_build.log
cd /tmp
sp=$(python3 -c "import jax_marlin, os; print(os.path.dirname(jax_marlin.__file__))")
cp $sp/bench.py /tmp/bench_main.py
for cell in "--K 4096 --N 4096 --M 256 --copies 16" "--K 4096 --N 4096 --M 64 --copies 29" "--K 8192 --N 28672 --M 256 --copies 2"; do
  for v in main checksum; do
    if [ $v = main ]; then cp /tmp/bench_main.py $sp/bench.py; else cp $repo/.variants_bench/bench.py $sp/bench.py; fi
    echo "=== $v $cell"
    timeout 80 python3 $repo/tools/bench_trace.py $cell --out /tmp/bt_$v 2>&1 | grep -v "^W0\|^I0" | tee -a $OUT/trace_$v.log | head -40
  done
done
cp /tmp/bench_main.py $sp/bench.py
