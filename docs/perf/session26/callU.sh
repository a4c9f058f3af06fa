#!/usr/bin/env bash
# Session 26, call U: `main` against wip/stream-k at ef03c54 (store_outputs predicated only
# under stream-K), each tree's own probe, alternating, random bits, two rounds. Call S
# measured the branch's 128-row cluster plan 6-10% slower than main's at 256 x 4096 x 4096;
# predicted now: within 1% of main on the cluster plans, stream-K's gains as in call S.
#   rm -rf .variants && mkdir -p .variants/main .variants/sk
#   git archive main | tar -x -C .variants/main; git archive wip/stream-k | tar -x -C .variants/sk
#   run(command="bash docs/perf/session26/callU.sh", carry=[".variants"])
set -u
export PROBE_SOURCE=variant PROBE_ROUNDS=2
PROBE_ARGS="random 256x4096x4096 128x4096x4096 1024x4096x4096 256x8192x8192 256x28672x8192
  256x8192x28672 512x8192x28672 300x8192x8002" bash tools/probe_variants.sh
