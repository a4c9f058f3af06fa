#!/usr/bin/env bash
# Session 38 ran this as the third part of session38/callP.sh (main and the per-warp A,
# the `tl` timelines in its second part; results in NOTES "Where it stands (session 38)").
# Prepared for session 38: where the decode shapes' GEMVs lose bandwidth. Issue 4's
# 2.5x decode needs the 8B layer's GEMVs near 3x; in the bench 4096 x 14336 and 14336 x 4096
# at M = 1 read 2.27x (session 37 call H), and in CUDA graphs 1 x 4096 x 14336 takes 12.5 us
# for 29.4 MB (~2.35 TB/s; session 37 call M's `main`), where 8192 x 28672's main kernel
# streams at ~3.65 TB/s. The probe in CUDA graphs, `main` and its timeline build `tl`, the
# decode shapes at M = 1 (the example's fused qkv 4096 x 6144, o 4096 x 4096, fused gate/up
# 4096 x 28672, down 14336 x 4096, and 4096 x 14336), every other grid the probe times
# (splits 1, -1, -2, -4, -8, 1002, 1004, 1008: no split, the tile split in C, the group
# cluster in C), one round each.
# Predicted: the timeline puts the time in the ramp (the first step at ~2-3 us, as at
# 4096 x 4096 in call K) and the epilogue, the loop at 3.5-4 TB/s; another grid wins by
# >= 5% on at most one shape (the planner's rules were tuned in sessions 14-16; session 13
# call 2 read 1 x 4096 x 4096 at 9.53 us with C = 4, 256 blocks, against 6.36 with C = 2).
# Call K's timeline at 4096 x 4096 put ~0.93 us in each of a warp's two steps, twice the
# ~0.45 us that a step's 446 instructions (its SASS) take at full issue with 2 warps a
# scheduler: the step's dependency chains, not DRAM, may bound the loop once bytes flow.
#   run(command="bash docs/perf/session37/callN_prepared.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/tl
cp -r ffi .variants/main/ && cp -r ffi .variants/tl/
echo "-DJAX_MARLIN_STREAM_TIMELINE" > .variants/tl/CUDA_FLAGS
PROBE_ROUNDS=1 PROBE_TIMEOUT=150 PROBE_ARGS="values splits=1,-1,-2,-4,-8,1002,1004,1008 \
1x4096x6144 1x4096x4096 1x4096x28672 1x14336x4096 1x4096x14336" \
  timeout 480 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ |timeline|split_k_override" \
  "$OUT/probe.log" | head -120
tar czf "$OUT/probe_logs.tgz" -C "$OUT" $(cd "$OUT" && ls probe_*_r*.txt) && rm -f "$OUT"/probe_*_r*.txt
