#!/usr/bin/env bash
# Session 38 call O (session 37's callO_prepared.sh, run as written; results in callO/ and
# callP.sh's header; the kernel that landed is call R's): each warp stages and sums its own A under the tile split
# (wip/warp_a.patch, -DJAX_MARLIN_STREAM_WARP_A, on by default in the patch; compiled for
# sm_90a and sm_80, the same registers and spills as main in every instance). Call K's marks
# at 4096 x 4096, M = 1: A staged 1.34 us, sums 1.73, then two steps of ~0.93 us of issue
# and the epilogue; the block waited at two barriers for the slowest thread's A chunk and
# for the block-wide sums pass. With the patch a warp waits for its own copies only
# (__syncwarp) and sums only its own steps.
# Predicted (us in CUDA graphs, `main` -> wa): 1 x 4096 x 4096 5.77 -> 5.4-5.6; 8 x 4096 x
# 4096 7.28 -> 6.5-6.9 (A's staging and sums grow with M: 2.30 / 3.07 us there);
# 16 x 4096 x 4096 9.2 -> 8.5-9.0; stream-K shapes (8192 x 28672) unchanged (not tile split).
# Then the GPU tests with the patch applied (every tile-split path is in them).
#   run(command="bash docs/perf/session38/callO.sh", carry=[".ffi"])  (~7 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/wa
cp -r ffi .variants/main/ && cp -r ffi .variants/wa/
(cd .variants/wa && patch -p1 -s < ../../docs/perf/session37/wip/warp_a.patch) || exit 1
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 1x4096x4096 2x4096x4096 8x4096x4096 16x4096x4096 \
1x14336x4096 1x4096x6144 1x8192x28672" timeout 240 bash tools/probe_variants.sh \
  > "$OUT/probe.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log"
tar czf "$OUT/probe_logs.tgz" -C "$OUT" $(cd "$OUT" && ls probe_*_r*.txt) && rm -f "$OUT"/probe_*_r*.txt
git apply docs/perf/session37/wip/warp_a.patch || exit 1
SKIP_EXAMPLES=1 TEST_TIMEOUT=220 timeout 330 bash tools/device_check.sh -n 8 -m gpu -q \
  > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; tail -5 "$OUT/gpu_tests.txt"
git apply -R docs/perf/session37/wip/warp_a.patch
