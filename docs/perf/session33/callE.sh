#!/usr/bin/env bash
# Session 33 call E (the session's last ~4 minutes of device time): why session 32's
# stage_a without divisions lost at 16 x 14336 x 4096 (call A: the kernel alone 14.53 / 14.56 -> 15.23 / 15.26 us)
# while it won at 16 x 8192 x 28672: both variants built with
# -DJAX_MARLIN_STREAM_TIMELINE (ffi/stream_timeline.h: the blocks' own timestamps), one
# probe round each.
#   rm -rf .variants && mkdir -p .variants/main .variants/nodiv; main's ffi in both, the
#   nodiv patch (session32/wip/stage-a-nodiv/0001-*.patch) applied in nodiv;
#   echo "-DJAX_MARLIN_STREAM_TIMELINE" > .variants/<each>/CUDA_FLAGS
#   run(command="bash docs/perf/session33/callE.sh", carry=[".variants"])
# *Guess*: the unphased 16-row instance's SASS is 2592 -> 2256 instructions with the same
# registers, so the loss is not stage_a's own count; if the timeline shows the blocks'
# first step later in nodiv, it is the prologue (stage_a's single pass of ~4 steps a block
# at 33 parts, not unrolled: 8 -> 4 LDGSTS in the instance); if the steps are slower, it
# is the step loop's code placement.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
PROBE_ROUNDS=1 PROBE_ARGS="random splits= 16x14336x4096 16x8192x28672" \
  timeout 200 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | cut -c1-220
