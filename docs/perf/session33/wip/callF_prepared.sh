#!/usr/bin/env bash
# Prepared in session 33, not run (no device time left): NOTES "Next" item 2. Session 32's
# stage_a without divisions (nodiv) runs faster inside the blocks at 16 x 14336 x 4096 and
# 16 x 8192 x 28672 (session 33 call E's timeline), yet its kernel reads +0.5-0.7 us at the
# first shape. Here ncu times both variants' streaming kernels at the two shapes. It reads
# the duration, the busiest SM's active cycles against the elapsed ones, and the launch
# figures, so the loss can be placed in the launch or in the drain.
#   rm -rf .variants && mkdir -p .variants/main .variants/nodiv
#   git archive main ffi | tar -x -C .variants/main; the same for nodiv, then in it
#   (cd .variants/nodiv && patch -p1 < ../../docs/perf/session32/wip/stage-a-nodiv/0001-*.patch)
#   run(command="bash docs/perf/session33/wip/callF_prepared.sh", carry=[".variants"])  (~3 min)
# *Guess*: equal active cycles on the busiest SM, and nodiv's extra time between the
# launch and its first block (sm__cycles_active.max < sm__cycles_elapsed.max by ~1000
# cycles more than main). If instead the active cycles differ, the timeline missed it.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
PROBE_ROUNDS=0 bash tools/probe_variants.sh > "$OUT/build.log" 2>&1  # builds only
metrics=gpu__time_duration.sum,sm__cycles_active.max,sm__cycles_elapsed.max,sm__cycles_active.avg
metrics=$metrics,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__grid_size
for v in main nodiv; do
  for shape in 16x14336x4096 16x8192x28672; do
    echo "== $v $shape"
    timeout 100 ncu --kernel-name regex:stream_gemm_kernel --launch-skip 20 --launch-count 3 \
      --metrics "$metrics" "/tmp/probe_obj/$v/latency_probe" random "splits=" "$shape" 2>&1 \
      | grep -E "gpu__|sm__|launch__" | tee -a "$OUT/ncu_$v.txt"
  done
done
