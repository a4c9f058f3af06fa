#!/usr/bin/env bash
# session 24's first call, prepared in session 23 (no device time was left), from branch
# wip/tail-map (git checkout wip/tail-map in the checkout the device copies):
#   - the tail map (a ragged last row block's activations through a tensor map of its own
#     rows; call K measured it at 26.1 us on 257-384 x 4096 x 4096, 335 on 300 x 8192 x
#     28672) with the producer at every 256-row plan, and the producer's group slot past
#     k_blocks zeroed (stale codes times a real scale gave -Inf, Inf x 0 NaN: the new
#     test_wgmma_group_past_the_end_meets_zero_scales fails without it);
#   1. every GPU test (device_check.sh -n 8 -m gpu), the producer's bitwise tests now at
#      M = 257, 300, 520 (tail boxes of 8, 48, 8 rows);
#   2. racecheck and memcheck on the sweep's wgmma_producer (300 rows: the tail map) and
#      wgmma_clusters parts;
#   3. probes: main's plan shapes and the ragged ones (the zero stores must not cost the
#      256-row shapes anything: 256 x 8192 x 28672 173.6 us, 1024 x 8192 x 28672 638.6).
# If 1-2 pass and 3 holds: merge wip/tail-map into main, refresh the README's M = 256 /
# 1024 cells only if they move.
# run(command="bash docs/perf/session23/callL_prepared.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
f=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
pc=/tmp/pc; mkdir -p $pc
(nv=(timeout 280 nvcc "${f[@]}" -I ffi -c)
 "${nv[@]}" ffi/marlin_kernel.cu -o $pc/marlin_kernel.o &
 "${nv[@]}" ffi/stream_kernel.cu -o $pc/stream_kernel.o &
 "${nv[@]}" tools/latency_probe.cu -o $pc/probe.o &
 "${nv[@]}" ffi/wgmma_kernel.cu -o $pc/wgmma_kernel.o &
 wait
 timeout 60 nvcc -gencode arch=compute_90a,code=sm_90a $pc/*.o -o /tmp/probe || echo "PROBE BUILD FAILED"
 echo "probe built at $(el) s") > /tmp/probe_build.log 2>&1 &
pb=$!
SKIP_EXAMPLES=1 TEST_TIMEOUT=200 SANITIZE="racecheck memcheck" SANITIZE_TIMEOUT=100 \
  SANITIZE_PARTS="wgmma_producer wgmma_clusters" \
  bash tools/device_check.sh -n 8 -m gpu -rs > $OUT/check.log 2>&1
echo "check exit $? at $(el) s"
for f in $OUT/sanitize_*; do echo "==== $f"; cat "$f"; done > /tmp/sanitize.log 2>&1
rm -f $OUT/sanitize_*; mv /tmp/sanitize.log $OUT/sanitize.log
grep -E "took|passed|failed|exit|SUMMARY|sanitize sweep|crashed" $OUT/check.log
grep -E "SKIPPED|FAILED" $OUT/pytest.log | head -8
wait $pb; cat /tmp/probe_build.log
shapes="256x8192x28672 1024x8192x28672 256x14336x4096 200x4104x8000 257x4096x4096
  300x4096x4096 512x4096x4096 300x8192x28672 520x8192x28672"
for r in 1 2; do
  [ $(el) -gt 480 ] && { echo "probe round $r skipped at $(el) s"; continue; }
  echo "== probe round $r at $(el) s" | tee -a $OUT/probe.log
  # shellcheck disable=SC2086
  timeout 80 /tmp/probe splits=-2002 $shapes 2>&1 | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k" | tee -a $OUT/probe.log
done
# 4. (if time is left) what the bench's loop spends around the GEMMs at M = 1024: the
#    bench read 791.8 us a GEMM at 1024 x 8192 x 28672 (call J) where the kernel alone
#    took 638.6 (call H), +153 us; at M = 256 +36. Dense's kernels in the same loop say
#    whether that cost is the loop's (both sides) or ours.
for cell in "--K 8192 --N 28672" "--K 4096 --N 4096 --copies 29 --min-pass-gemms 29"; do
  [ $(el) -gt 500 ] && { echo "bench_trace $cell skipped at $(el) s"; continue; }
  # shellcheck disable=SC2086
  (cd /tmp && timeout 60 python3 "$repo/tools/bench_trace.py" $cell --M 1024 --passes 4 \
     --out /tmp/bench_trace 2>&1 | tail -30) | tee -a $OUT/bench_trace.log
done
echo "total $(el) s"
