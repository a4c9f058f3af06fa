#!/usr/bin/env bash
# Variants first, on this machine (from the repository root):
#   mk(){ mkdir -p .variants/$1 && git archive $2 ffi | tar -x -C .variants/$1; [ -n "${3-}" ] && echo "$3" > .variants/$1/CUDA_FLAGS; true; }
#   mk main main; mk s wip/fast-prologue-parts "-DJAX_MARLIN_STREAM_SKIP_EMPTY_REFILL=1"
#   mk fp3s wip/fast-prologue-parts "-DJAX_MARLIN_STREAM_FAST_PROLOGUE=3 -DJAX_MARLIN_STREAM_SKIP_EMPTY_REFILL=1"
#   mk fp4s wip/fast-prologue-parts "-DJAX_MARLIN_STREAM_FAST_PROLOGUE=4 -DJAX_MARLIN_STREAM_SKIP_EMPTY_REFILL=1"
# then run(command="bash docs/perf/session19/callF_prepared.sh", carry=[".variants"]).
# session 19 call F: the streaming fast prologue's parts; probe binaries with the wgmma kernel left out (stream shapes only)
set -u
f=(-std=c++17 -O3 --expt-relaxed-constexpr)
a90a=(-gencode arch=compute_90a,code=sm_90a)
common=/tmp/pc; mkdir -p $common
nvcc "${f[@]}" -gencode arch=compute_90,code=sm_90 -I .variants/main/ffi -c .variants/main/ffi/wgmma_kernel.cu -o $common/wgmma_kernel.o &
nvcc "${f[@]}" "${a90a[@]}" -I .variants/main/ffi -c .variants/main/ffi/marlin_kernel.cu -o $common/marlin_kernel.o &
nvcc "${f[@]}" "${a90a[@]}" -I .variants/main/ffi -c tools/latency_probe.cu -o $common/probe.o &
for n in main s fp3s fp4s; do
  mkdir -p /tmp/po/$n
  nvcc "${f[@]}" "${a90a[@]}" $(cat .variants/$n/CUDA_FLAGS 2>/dev/null) -I .variants/$n/ffi -c .variants/$n/ffi/stream_kernel.cu -o /tmp/po/$n/stream_kernel.o &
done
wait
for n in main s fp3s fp4s; do nvcc "${a90a[@]}" $common/*.o /tmp/po/$n/stream_kernel.o -o /tmp/po/$n/probe && echo "built $n"; done
for r in 1 2; do for n in main s fp3s fp4s; do
  echo "== $n r$r" | tee -a $OUT/probe_parts.log; timeout 40 /tmp/po/$n/probe splits= 1x4096x4096 1x14336x4096 16x4096x4096 8x4096x4096 2>&1 | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " | tee -a $OUT/probe_parts.log
done; done
