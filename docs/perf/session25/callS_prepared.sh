#!/usr/bin/env bash
# Session 26, call S (prepared in session 25): `main` against wip/stream-k rebased on the
# staged epilogue (9fa977d, bc18406, 588ea07), each tree's own probe, alternating; every shape
# as planned, on the plain grid (-2003, kForceWgmmaNoStreamK: the branch's grid must
# now read main's) and stream-K forced (-2004, kForceWgmmaStreamK: where the planner
# does not take it, e.g. 256 x 4096 x 4096's 32 tiles against its 128-row clusters;
# main reads both overrides as 0). Zeros (one round: call O's two agreed within 0.2 us), then
# random bits, then model-like operands (~400 s).
#   rm -rf .variants && mkdir -p .variants/main .variants/sk
#   git archive main | tar -x -C .variants/main; git archive wip/stream-k | tar -x -C .variants/sk
#   run(command="bash docs/perf/session25/callS_prepared.sh", carry=[".variants"])
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
shapes="256x8192x28672 512x8192x28672 1024x8192x28672 256x4096x28672 256x4096x4096
  256x8192x8192"
for r in 1; do
  for n in main sk; do
    [ $(el) -gt 480 ] && { echo "skipped $n r$r at $(el) s"; continue; }
    echo "== $n round $r at $(el) s" | tee -a $OUT/probe.log
    # shellcheck disable=SC2086
    timeout 80 /tmp/probe_obj/$n/latency_probe splits=-2003,-2004 $shapes 2>&1 \
      | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k" | tee -a $OUT/probe.log
  done
done
for fill in random values; do
  for n in main sk; do
    [ $(el) -gt 470 ] && { echo "skipped $fill $n at $(el) s"; continue; }
    echo "== $n $fill at $(el) s" | tee -a $OUT/probe.log
    timeout 80 /tmp/probe_obj/$n/latency_probe $fill splits=-2003,-2004 256x8192x28672 512x8192x28672 256x4096x4096 2>&1 \
      | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k|buffers" | tee -a $OUT/probe.log
  done
done
echo "total $(el) s"
