#!/usr/bin/env bash
# Session 37, call M, run reduced (one round; 1 x 4096 x 4096, 1 x 4096 x 14336 and
# 16 x 4096 x 4096; no 8 MB run: the device time was spent), output callM/; it lost at
# every shape (NOTES). The next GEMM's weights prefetched into the L2 (session
# 37 call K: at 4096 x 4096, M = 1, the kernel's loop is a wait for 8.4 MB requested at entry,
# ~2.5 TB/s over ~3.4 us, and each call leaves DRAM idle through its epilogue and the next
# launch, ~1.5-2 us of ~5.8). wip/l2_prefetch.patch (-DJAX_MARLIN_STREAM_L2_PREFETCH=1,
# probe only): the streaming kernel's warp 0 of each block, after its loop, issues
# cp.async.bulk.prefetch.L2 for its share of the next copy's codes (up to
# JAX_MARLIN_PREFETCH_MB, default 24), and the probe names copy c + 1 as copy c's next.
# Predicted (us in CUDA graphs, 64 rotating calls): 1 x 4096 x 4096 5.8 -> 4.5-5.0;
# 1 x 4096 x 14336 and 14336 x 4096 -0.5 to -1.5; 1 x 8192 x 28672 within +-1 (its tail
# shares the bandwidth: call J); 16 x 4096 x 4096 -0.3 to -1. A loss where the prefetched
# bytes are evicted before use (the probe's rotation has no other kernel between calls;
# a model's attention would sit between).
#   run(command="bash docs/perf/session37/callM.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants/main .variants/pf
for v in main pf; do cp -r ffi tools ".variants/$v/"; done
(cd .variants/pf && patch -p1 < ../../docs/perf/session37/wip/l2_prefetch.patch) || exit 1
echo "-DJAX_MARLIN_STREAM_L2_PREFETCH=1" > .variants/pf/CUDA_FLAGS
shapes="values splits= 1x4096x4096 1x4096x14336 1x14336x4096 1x8192x28672 16x4096x4096"
PROBE_SOURCE=variant PROBE_ROUNDS=2 PROBE_ARGS="$shapes" timeout 420 bash tools/probe_variants.sh \
  > "$OUT/probe.log" 2>&1
mkdir -p "$OUT/pf8"
OUT="$OUT/pf8" JAX_MARLIN_PREFETCH_MB=8 PROBE_SOURCE=variant PROBE_BUILD=0 PROBE_NAMES=pf \
  PROBE_ROUNDS=1 PROBE_ARGS="$shapes" timeout 120 bash tools/probe_variants.sh \
  > "$OUT/probe_pf8.log" 2>&1
grep -hE "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" "$OUT/probe_pf8.log"
tar czf "$OUT/probe_logs.tgz" -C "$OUT" $(cd "$OUT" && ls probe_*_r*.txt pf8/probe_*_r*.txt) \
  && rm -rf "$OUT"/probe_*_r*.txt "$OUT/pf8"
