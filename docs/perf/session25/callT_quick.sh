#!/usr/bin/env bash
# Session 25, call T: the last device seconds, the rebased wip/stream-k (bc18406) probe alone
# (zeros; main's figures are call Q's): plan, plain grid (-2003), forced stream-K (-2004).
#   mkdir -p .variants/sk; git archive wip/stream-k | tar -x -C .variants/sk
#   run(command="bash docs/perf/session25/callT_quick.sh", carry=[".variants"])
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
flags=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
obj=/tmp/po; mkdir -p $obj; v=.variants/sk
for f in marlin_kernel stream_kernel wgmma_kernel; do nvcc "${flags[@]}" -I $v/ffi -c $v/ffi/$f.cu -o $obj/$f.o & done
nvcc "${flags[@]}" -I $v/ffi -c $v/tools/latency_probe.cu -o $obj/probe.o; wait
nvcc -gencode arch=compute_90a,code=sm_90a $obj/*.o -o $obj/latency_probe && echo "built at $(el) s"
timeout 70 $obj/latency_probe splits=-2003,-2004 256x8192x28672 256x4096x4096 512x8192x28672 2>&1 | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k|buffers" | tee $OUT/probe.log
echo "total $(el) s"
