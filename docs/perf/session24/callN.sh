#!/usr/bin/env bash
# Session 24, call N: main (13936fc) against wip/stream-k in one process each, alternating,
# kernels alone in CUDA graphs (tools/latency_probe.cu, each tree's own probe source):
# call M read wip/stream-k's grid without stream-K (-2003) at 202.8 us on 256 x 8192 x
# 28672 where call L read main at 169.5, and 1024 x 8192 x 28672 (no stream-K either
# way) at 688 against 631. Same machine kind, different calls: is the branch's kernel
# slower without stream-K, or was call M's GPU slower? Then one round of each with
# random operands (the probe's buffers are zeros by default; the bench's are random), and
# one with model-like ones (`values`, added to the probe after call N).
#   git archive main | tar -x -C .variants/main; git archive wip/stream-k | tar -x -C .variants/sk
#   run(command="bash docs/perf/session24/callN.sh", carry=[".variants"])
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.limit --format=csv | tee "$OUT/gpu.txt"
flags=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
for n in main sk; do
  obj=/tmp/probe_obj/$n; mkdir -p $obj
  (for f in marlin_kernel stream_kernel wgmma_kernel; do
     nvcc "${flags[@]}" -I .variants/$n/ffi -c .variants/$n/ffi/$f.cu -o $obj/$f.o &
   done
   nvcc "${flags[@]}" -I .variants/$n/ffi -c .variants/$n/tools/latency_probe.cu -o $obj/probe.o
   wait
   nvcc -gencode arch=compute_90a,code=sm_90a $obj/*.o -o $obj/latency_probe \
     && echo "built $n at $(el) s" || echo "PROBE BUILD FAILED $n") &
done
wait
shapes="256x8192x28672 1024x8192x28672 256x4096x28672 512x8192x28672"
for r in 1 2; do
  for n in main sk; do
    [ $(el) -gt 480 ] && { echo "skipped $n r$r at $(el) s"; continue; }
    echo "== $n round $r at $(el) s" | tee -a $OUT/probe.log
    # shellcheck disable=SC2086
    timeout 80 /tmp/probe_obj/$n/latency_probe splits=-2003 $shapes 2>&1 \
      | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k" | tee -a $OUT/probe.log
  done
done
# (The probe has `values`, model-like operands, since after call N; a tree
# whose probe lacks it reads zeros there, as its header line says.)
for fill in random values; do
  for n in main sk; do
    [ $(el) -gt 470 ] && { echo "skipped $fill $n at $(el) s"; continue; }
    echo "== $n $fill at $(el) s" | tee -a $OUT/probe.log
    timeout 80 /tmp/probe_obj/$n/latency_probe $fill splits=-2003 256x8192x28672 1024x8192x28672 2>&1 \
      | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k|buffers" | tee -a $OUT/probe.log
  done
done
echo "total $(el) s"
