#!/usr/bin/env bash
# Session 27, call E (run inline on the still-warm machine after call D; kept here as run):
# the probe on `main` (.variants/main, 379e9d8) with zero operands at 768 / 512 / 1024 x
# 28672 x 8192, and random bits at 512 / 1024, each against its grid without stream-K
# (-2003) and forced stream-K (-2004): is call D's stream-K loss at 768 x 28672 x 8192 the
# power limit (then zeros show stream-K's gain) or the schedule itself?
#   run(command="bash docs/perf/session27/callE.sh", carry=[".ffi", ".variants"])
export OUT
PROBE_BUILD=0 PROBE_ROUNDS=1 PROBE_TIMEOUT=300 PROBE_ARGS="splits=-2003,-2004 768x28672x8192 512x28672x8192 1024x28672x8192" bash tools/probe_variants.sh > $OUT/zeros.log 2>&1
ls /tmp/probe_obj/main || (PROBE_ROUNDS=1 PROBE_ARGS="splits=-2003,-2004 768x28672x8192 512x28672x8192 1024x28672x8192" bash tools/probe_variants.sh > $OUT/zeros.log 2>&1)
PROBE_BUILD=0 PROBE_ROUNDS=1 PROBE_ARGS="random splits=-2003,-2004 512x28672x8192 1024x28672x8192" bash tools/probe_variants.sh > $OUT/random.log 2>&1
cat $OUT/zeros.log $OUT/random.log
