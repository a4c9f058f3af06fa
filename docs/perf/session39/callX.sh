#!/usr/bin/env bash
# Session 39 call X: where the tile split's per-warp phases win. Call W: 16 x 8192 x 8192
# (C = 1, 64 steps a block) 26.53 -> 23.72 us, 16 x 11008 x 4096 (C = 2, 43) 19.04 ->
# 17.82, but 16 x 14336 x 4096 (C = 2, 56) 20.92 -> 21.76. More shapes that the planner
# now gives a phased tile split at M = 16, `main` (stream-K) against phased, two rounds:
# 10240 x 4096 (C = 2, 40 steps a block), 12288 x 4096 (C = 2, 48), 5120 x 5120 (C = 1,
# 40), 12 x 12288 x 4096, and 14336 x 4096 / 11008 x 4096 again. Predicted: if the loss grows with a block's
# steps at C = 2, 10240 wins ~6% (as 11008), 12288 ties, 14336 loses ~4% again.
#   run(command="bash docs/perf/session39/callX.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/phased
git archive HEAD ffi | tar -x -C .variants/main && cp -r ffi .variants/phased/
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 16x10240x4096 16x11008x4096 16x12288x4096 \
12x12288x4096 16x14336x4096 16x5120x5120" timeout 240 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
rm -rf .variants
cd "$OUT" && tar czf logs.tgz $(ls probe_*_r*.txt 2>/dev/null) && rm -f probe_*_r*.txt
