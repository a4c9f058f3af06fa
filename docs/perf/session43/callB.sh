#!/usr/bin/env bash
# Session 43 call B: is A's L2 traffic what bounds the tile split at 16 rows?
# Each 64-column tile's blocks stage their own copy of A's k-range, so at M = 16 the
# SMs read as many bytes of A from the L2 as of weights from DRAM (16 rows x 2 B
# against 64 columns x 0.5 B a k). Session 42's timelines: A staged 3.4-4.1 us into
# 8.7-22 us GEMMs, and ~2-2.8 us at each later phase boundary.
# Variants (wip/a-share-probe.patch; wrong outputs, timing only): share2, share4 and share1024
# (-DJAX_MARLIN_PROBE_A_SHARE=R: only every R-th tile's blocks read A, the rest zero-fill
# it with the same copies), against the tree (main), plus timeline
# builds of main and share1024. And rot (wip/a-rotate.patch, right outputs, a candidate to
# land): each tile starts its A copies at row (tile mod M), so that the SMs do not all ask
# the L2 for the same lines at once.
# Predicted, if A's traffic is the bound (us, probe, CUDA graphs; main -> share1024):
#   16 x 8192 x 8192 21.6 -> 12-15; 16 x 4096 x 4096 8.55 -> 5-6.5; 16 x 11008 x 4096
#   16.5 -> 10-13; 9 x 14336 x 4096 15.2 -> 11-13; 1 x 4096 x 4096 (1/16 of the bytes)
#   within 3%; share4 about halfway or more; share2 (half the bytes, what 128-column tiles
#   whose warps pair up on A would read: NOTES, session 43) a third of the way or more. If not: every shape within 5%, and what the
#   phase boundary costs is the copies' issue, not their bytes. rot: toward share4 if the
#   SMs' asking for the same lines at once (not the bytes) is the cost, else within 1%.
#   run(command="bash docs/perf/session43/callB.sh", carry=[".ffi"])  (~8 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants
for v in main share2 share4 share1024 rot tl share1024tl rottl; do
  mkdir -p ".variants/$v" && cp -r ffi ".variants/$v/"
  flags=""
  case $v in share*)
    git apply --include=".variants/$v/ffi/*" --directory=".variants/$v" \
      docs/perf/session43/wip/a-share-probe.patch || echo "PATCH FAILED $v"
    flags="-DJAX_MARLIN_PROBE_A_SHARE=$(echo $v | sed 's/share\([0-9]*\).*/\1/')";; esac
  case $v in rot*) git apply --include=".variants/$v/ffi/*" --directory=".variants/$v" \
    docs/perf/session43/wip/a-rotate.patch || echo "PATCH FAILED $v";; esac
  case $v in *tl) flags="$flags -DJAX_MARLIN_STREAM_TIMELINE";; esac
  [ -n "$flags" ] && echo "$flags" > ".variants/$v/CUDA_FLAGS"
done
grep -c "PROBE_A_SHARE\|rotation" .variants/*/ffi/stream_kernel.cu; cat .variants/*/CUDA_FLAGS
shapes="16x4096x4096 16x8192x8192 16x11008x4096 16x14336x4096 9x14336x4096 8x4096x4096 \
1x4096x4096"
PROBE_NAMES="tl share1024tl rottl" PROBE_ROUNDS=1 PROBE_ARGS="values splits= $shapes" timeout 330 \
  bash tools/probe_variants.sh > "$OUT/probe_tl.log" 2>&1
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ |timeline|step i" \
  "$OUT/probe_tl.log" | cut -c1-200
mkdir -p "$OUT/logs_tl" && mv "$OUT"/probe_*_r*.txt "$OUT/logs_tl/"
PROBE_NAMES="main share2 share4 share1024 rot" PROBE_BUILD=0 PROBE_ROUNDS=2 \
  PROBE_ARGS="values splits= $shapes" timeout 200 \
  bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
mkdir -p "$OUT/logs" && mv "$OUT"/probe_*_r*.txt "$OUT/logs/"
rm -rf .variants
tar czf "$OUT/logs.tgz" -C "$OUT" logs_tl logs && rm -rf "$OUT"/logs_tl "$OUT"/logs
