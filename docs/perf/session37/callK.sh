#!/usr/bin/env bash
# Session 37, call K (prepared and run the same session): why 4096 x 4096 at M = 2 takes ~0.9 us more than at
# M = 1 in the bench (session 37 call I: 7.71 against 6.83 us fp16; tinygemm 7.37 at M = 2),
# though both run the same instance (kMT = 1) on the same plan (128 blocks, the tile split
# in clusters of 2, 16 steps a block: tests/cpp/stream_plan_check.cc). The differences by M
# in the kernel: the staged A and its sums (rows x ...), the late inbox (M = 1 only), the
# flush and the cluster push (rows x 16 quads). The probe in CUDA graphs, `main` and its
# timeline build, at M = 1, 2, 4 and 8, `values` operands, two rounds.
# Predicted: in graphs M = 2 ~0.3-0.6 us above M = 1 (5.7 us), the timeline placing it in
# the prologue (A's staging and sums) and the epilogue (the push), not the loop.
#   run(command="bash docs/perf/session37/callK.sh", carry=[".ffi"])  (~3 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/tl
cp -r ffi .variants/main/ && cp -r ffi .variants/tl/
echo "-DJAX_MARLIN_STREAM_TIMELINE" > .variants/tl/CUDA_FLAGS
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 1x4096x4096 2x4096x4096 4x4096x4096 8x4096x4096" \
  timeout 400 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ |mark|stage|SM clock" "$OUT/probe.log" | head -150
tar czf "$OUT/probe_logs.tgz" -C "$OUT" $(cd "$OUT" && ls probe_*_r*.txt 2>/dev/null) && rm -f "$OUT"/probe_*_r*.txt
