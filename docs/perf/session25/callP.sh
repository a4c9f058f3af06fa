#!/usr/bin/env bash
# Session 25, call P: why is wip/stream-k's kernel slower than main's on the
# same grid? Call O (callN.sh rerun on the fixed branch): 1024 x 8192 x 28672,
# 224 x 4 blocks on both, 626.9 us main against 669.5 branch (+7%, zeros and
# random alike); 256 x 4096 x 28672 forced to the grid (-2003) 89.2 against
# 122.7 (+37%), though the mainloop's SASS is the same 243-246 instructions and
# the producer's stage loop the same 161. Nsight Compute on the first launch of
# each: cycles, instructions executed, stall reasons, and per-instruction warp
# samples (where the extra cycles sit).
#   .variants/{main,sk} as for callN.sh;
#   run(command="bash docs/perf/session25/callP.sh", carry=[".variants"])
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
flags=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1 -lineinfo)
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
metrics="gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.max,smsp__inst_executed.sum,\
smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.sum,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
smsp__cycles_active.avg,sm__warps_active.avg.per_cycle_active,gpc__cycles_elapsed.avg.per_second"
for r in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle \
    not_selected selected dispatch_stall no_instruction branch_resolving barrier membar sleeping misc; do
  metrics="$metrics,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
# The third wgmma launch is still the default plan's: a grid on both at M = 1024
# (the branch plans stream-K only at smaller M), so both shapes are M = 1024.
for n in main sk; do
  for shape in 1024x8192x28672 1024x4096x28672; do
    [ $(el) -gt 420 ] && { echo "skipped $n $shape at $(el) s"; continue; }
    echo "== $n $shape at $(el) s" | tee -a $OUT/ncu.log
    (cd /tmp && timeout 100 ncu --kernel-name regex:wgmma_gemm --launch-skip 2 --launch-count 1 \
       --clock-control none --metrics "$metrics" \
       --section WarpStateStats --section SourceCounters --import-source yes -f -o /tmp/rep_${n}_$shape \
       /tmp/probe_obj/$n/latency_probe splits=-2003 $shape > $OUT/ncu_${n}_$shape.run.txt 2>&1)
    ncu -i /tmp/rep_${n}_$shape.ncu-rep --page details --print-details all > $OUT/ncu_${n}_$shape.txt 2>&1
    ncu -i /tmp/rep_${n}_$shape.ncu-rep --page raw --csv --metrics "$metrics" > $OUT/ncu_${n}_$shape.raw.csv 2>&1
    ncu -i /tmp/rep_${n}_$shape.ncu-rep --page source --csv --print-source sass > $OUT/src_${n}_$shape.csv 2>&1
    grep -E "Grid Size|Duration|gpu__time|sm__cycles_active.avg|inst_executed.sum|issue_active|gmma|stalled_(long|wait|barrier|sleeping|math|short|no_inst|dispatch|branch|selected|not_sel|lg|mio|membar|misc)" \
      $OUT/ncu_${n}_$shape.txt | head -40 | tee -a $OUT/ncu.log
    gzip -f $OUT/src_${n}_$shape.csv
  done
done
echo "total $(el) s"
