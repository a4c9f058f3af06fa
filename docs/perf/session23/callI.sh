#!/usr/bin/env bash
# session 23 call I: where the producer warpgroup loses. Call H (session 23) read it
# racecheck-clean and 11-13% faster at 256 rows except 300 x 4096 x 4096 (32.1 -> 38.6 us).
#  A. r0 (producer) probe on shapes past 256 rows and a few at <= 256, each also with
#     the cp.async ring forced (-2002) and the on-chip split replaced by the reduce (-2001);
#  B. M = 160-256, r0 (the planner's choice, 128-row halves where the cost model takes
#     them) against r0h (-DJAX_MARLIN_WGMMA_HALVES=0: 256 producer rows always), to refit
#     wgmma_plan_us for the producer's stage.
# run(command="bash docs/perf/session23/callI.sh", carry=[".ffi"])
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
f=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
pc=/tmp/pc; mkdir -p $pc /tmp/po/r0 /tmp/po/r0h
nv=(timeout 280 nvcc "${f[@]}" -I ffi -c)
"${nv[@]}" ffi/marlin_kernel.cu -o $pc/marlin_kernel.o &
"${nv[@]}" ffi/stream_kernel.cu -o $pc/stream_kernel.o &
"${nv[@]}" tools/latency_probe.cu -o $pc/probe.o &
"${nv[@]}" ffi/wgmma_kernel.cu -DJAX_MARLIN_WGMMA_PRODUCER=1 -o /tmp/po/r0/wgmma_kernel.o &
"${nv[@]}" ffi/wgmma_kernel.cu -DJAX_MARLIN_WGMMA_PRODUCER=1 -DJAX_MARLIN_WGMMA_HALVES=0 \
  -o /tmp/po/r0h/wgmma_kernel.o &
wait
for n in r0 r0h; do
  timeout 60 nvcc -gencode arch=compute_90a,code=sm_90a $pc/*.o /tmp/po/$n/wgmma_kernel.o \
    -o /tmp/po/$n/probe || echo "PROBE BUILD FAILED $n"
done
echo "built at $(el) s" | tee $OUT/probe.log
keep() { grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k_override"; }
past="300x4096x4096 257x4096x4096 384x4096x4096 512x4096x4096 1024x4096x4096 300x8192x8192
  512x8192x8192 300x4096x14336 512x4096x14336 300x14336x4096 512x14336x4096 300x8192x28672
  512x8192x28672 200x4104x8000 256x8192x28672"
echo "== A r0 splits=-2002,-2001 at $(el) s" | tee -a $OUT/probe.log
# shellcheck disable=SC2086
timeout 200 /tmp/po/r0/probe splits=-2002,-2001 $past 2>&1 | keep | tee -a $OUT/probe.log
half=""
for m in 160 192 224 256; do for kn in 4096x4096 8192x8192 4096x14336 14336x4096 8192x28672 28672x8192; do
  half="$half ${m}x$kn"; done; done
for v in r0 r0h; do
  [ $(el) -gt 520 ] && { echo "B $v skipped at $(el) s" | tee -a $OUT/probe.log; continue; }
  echo "== B $v at $(el) s" | tee -a $OUT/probe.log
  # shellcheck disable=SC2086
  timeout 150 /tmp/po/$v/probe splits= $half 2>&1 | keep | tee -a $OUT/probe.log
done
echo "total $(el) s"
