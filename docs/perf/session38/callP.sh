#!/usr/bin/env bash
# Session 38 call P: call O (session 37's callO_prepared.sh) read the tile split's A per warp
# (wip/warp_a.patch) at -4.4% at 8 x 4096 x 4096 and -5.1% at 16 x 4096 x 4096, flat at
# M = 1-2, but +8.5% at 1 x 14336 x 4096 (11.23 -> 12.18 us), the decode down projection.
# This call: (1) main vs wa at M = 1, 4, 16 on the decode shapes, two rounds; (2) both
# variants' timelines (warp 0's marks) where wa lost and won; (3) session 37's prepared call
# N: the decode shapes at M = 1 under every other grid the probe times, main and wa.
# Predicted: wa loses on K = 14336 at every M (14 steps a warp against 4 at K = 4096: the
# warps drift apart and the epilogue waits for the slowest), wins at K = 4096, M >= 8.
#   run(command="bash docs/perf/session38/callP.sh", carry=[".ffi"])  (~5 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/wa .variants/tl .variants/watl
for v in main wa tl watl; do cp -r ffi ".variants/$v/"; done
for v in wa watl; do
  (cd ".variants/$v" && patch -p1 -s < ../../docs/perf/session37/wip/warp_a.patch) || exit 1
done
for v in tl watl; do echo "-DJAX_MARLIN_STREAM_TIMELINE" > ".variants/$v/CUDA_FLAGS"; done
PROBE_NAMES="main wa" PROBE_ROUNDS=2 PROBE_ARGS="values splits= 1x14336x4096 4x14336x4096 \
16x14336x4096 1x4096x14336 4x4096x14336 16x4096x14336 1x4096x4096 4x4096x4096 \
16x4096x6144 16x4096x28672" timeout 200 bash tools/probe_variants.sh > "$OUT/probe_a.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe_a.log"
mkdir -p "$OUT/logs_a" && mv "$OUT"/probe_*_r*.txt "$OUT/logs_a/"
PROBE_NAMES="tl watl" PROBE_BUILD=0 PROBE_ROUNDS=1 PROBE_ARGS="values splits= 1x14336x4096 \
16x14336x4096 1x4096x4096 16x4096x4096 1x4096x14336" timeout 100 bash tools/probe_variants.sh \
  > "$OUT/probe_tl.log" 2>&1
grep -E "^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ |timeline|cycles from" "$OUT/probe_tl.log"
mkdir -p "$OUT/logs_tl" && mv "$OUT"/probe_*_r*.txt "$OUT/logs_tl/"
PROBE_NAMES="main wa" PROBE_BUILD=0 PROBE_ROUNDS=1 PROBE_TIMEOUT=150 \
PROBE_ARGS="values splits=1,-1,-2,-4,-8,1002,1004,1008 1x4096x6144 1x4096x4096 1x4096x28672 \
1x14336x4096 1x4096x14336" timeout 330 bash tools/probe_variants.sh > "$OUT/probe_n.log" 2>&1
grep -E "^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k_override" "$OUT/probe_n.log" | head -150
mkdir -p "$OUT/logs_n" && mv "$OUT"/probe_*_r*.txt "$OUT/logs_n/"
tar czf "$OUT/logs.tgz" -C "$OUT" logs_a logs_tl logs_n && rm -rf "$OUT"/logs_a "$OUT"/logs_tl "$OUT"/logs_n
