#!/usr/bin/env bash
# session 19 call C: the landed tree (on-chip split at 32/64 rows, corner checksum): GPU tests, racecheck, traces, bench
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
SKIP_EXAMPLES=1 TEST_TIMEOUT=150 bash tools/device_check.sh -n 8 -m gpu -k "cluster or wgmma or plan or bench or split" > $OUT/check.log 2>&1
tail -6 $OUT/check.log
(cd tools && XLA_PYTHON_CLIENT_ALLOCATOR=platform timeout 120 compute-sanitizer --tool racecheck --kernel-name kns=marlin --error-exitcode 3 python3 -c "import sanitize_sweep as s, numpy as np; s.wgmma_k_split_clusters(np.random.default_rng(1))" > $OUT/racecheck.log 2>&1; echo "racecheck exit $?"; tail -3 $OUT/racecheck.log)
cd /tmp
for cell in "--K 4096 --N 4096 --M 256 --copies 16" "--K 4096 --N 4096 --M 64 --copies 29"; do
  echo "=== corner $cell"
  timeout 80 python3 $repo/tools/bench_trace.py $cell --out /tmp/bt_c 2>&1 | grep -v "^W0\|^I0" | tee -a $OUT/trace_corner.log | head -22
done
python3 -m jax_marlin.bench --shapes 8192x28672,28672x8192,4096x4096 --ms 1,4,16,64,256,1024 --dtypes float16,bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --no-repack --budget-s 240 --csv $OUT/bench.csv --plot $OUT/bench.png > $OUT/bench.log 2>&1
tail -45 $OUT/bench.log
