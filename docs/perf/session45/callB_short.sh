#!/usr/bin/env bash
# Session 45: session 43's call B cut to the device time left (~5 minutes): no timeline
# builds, variants main / share2 / share1024 / rot, five shapes, two rounds. Predictions:
# session43/callB.sh's header.
#   run(command="bash docs/perf/session45/callB_short.sh", carry=[".ffi"])
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants
for v in main share2 share1024 rot; do
  mkdir -p ".variants/$v" && cp -r ffi ".variants/$v/"
  case $v in share*)
    git apply --include=".variants/$v/ffi/*" --directory=".variants/$v" \
      docs/perf/session43/wip/a-share-probe.patch || echo "PATCH FAILED $v"
    echo "-DJAX_MARLIN_PROBE_A_SHARE=${v#share}" > ".variants/$v/CUDA_FLAGS";; esac
  case $v in rot) git apply --include=".variants/$v/ffi/*" --directory=".variants/$v" \
    docs/perf/session43/wip/a-rotate.patch || echo "PATCH FAILED $v";; esac
done
grep -c "PROBE_A_SHARE\|rotation" .variants/*/ffi/stream_kernel.cu; cat .variants/*/CUDA_FLAGS
PROBE_ROUNDS=2 PROBE_ARGS="values splits= 16x4096x4096 16x8192x8192 16x11008x4096 \
9x14336x4096 1x4096x4096" timeout 290 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
echo "probe rc=$?"
grep -E "built|FAILED|^== probe|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe.log" | cut -c1-110
rm -rf .variants
