#!/usr/bin/env bash
# Session 26, call S (prepared in session 25): `main` against wip/stream-k rebased on the
# staged epilogue (9fa977d, bc18406, 588ea07), each tree's own probe, alternating; every
# shape as planned, on the plain grid (-2003, kForceWgmmaNoStreamK: the branch's grid must
# now read main's) and stream-K forced (-2004, kForceWgmmaStreamK: where the planner does
# not take it; main reads both overrides as 0). Zeros (one round: call O's two agreed
# within 0.2 us), then random bits, then model-like operands (~400 s).
#   rm -rf .variants && mkdir -p .variants/main .variants/sk
#   git archive main | tar -x -C .variants/main; git archive wip/stream-k | tar -x -C .variants/sk
#   run(command="bash docs/perf/session25/callS_prepared.sh", carry=[".variants"])
set -u
splits="splits=-2003,-2004"
export PROBE_SOURCE=variant PROBE_ROUNDS=1
PROBE_ARGS="$splits 256x8192x28672 512x8192x28672 1024x8192x28672 256x4096x28672
  256x4096x4096 256x8192x8192" bash tools/probe_variants.sh
for fill in random values; do
  PROBE_BUILD=0 PROBE_ARGS="$fill $splits 256x8192x28672 512x8192x28672 256x4096x4096" \
    OUT="${OUT:-/tmp/out}/$fill" bash tools/probe_variants.sh
done
