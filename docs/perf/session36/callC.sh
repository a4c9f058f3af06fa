#!/usr/bin/env bash
# Session 36, call C: the activation box shared by TMA multicast (wgmma_plan.h
# wgmma_plans_multicast): tile pairs 2c, 2c + 1 of the producer's grid as clusters of 2,
# each block copying half of each stage's 256 x 64 box into both blocks' slots.
#   run(command="bash docs/perf/session36/callC.sh", carry=[".ffi", ".variants"])
# .variants/base/ffi = 086f2b6's ffi, .variants/mc/ffi = the same with wip/multicast.patch
# (the tree this call ran; the patch was reverted after it), made here with
#   mkdir -p .variants/base .variants/mc && git archive HEAD ffi | tar -x -C .variants/base
#   cp -r .variants/base/ffi .variants/mc/ && (cd .variants/mc && patch -p1 < ../../docs/perf/session36/wip/multicast.patch)
# (the patch's ops.py and tests hunks apply to the package tree, not .variants).
# Predicted (call B: half the activation bytes ran 10-14% faster; multicast halves the
# L2's reads of them, not the bytes each SM takes in): 1024 x 4096 x 4096 52 -> 47-50 us,
# 512 x 28672 x 8192 367 -> 325-350; 512 x 4096 x 4096 (the on-chip split, no multicast)
# a tie. If the L2 is not what call B relieved (the SM's own intake), a tie everywhere.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
(PROBE_ROUNDS=0 bash tools/probe_variants.sh > "$OUT/probe_build.log" 2>&1) &
BUILD_ONLY=1 bash tools/device_check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
wait
grep -E "built|FAILED" "$OUT/probe_build.log"
echo "== a first multicast run (hang check)"
timeout 60 /tmp/probe_obj/mc/latency_probe values splits=1 1024x4096x4096 > "$OUT/probe_first.txt" 2>&1
echo "rc=$?"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$OUT/probe_first.txt"
echo "== tests"
(cd /tmp && XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 260 python3 -m pytest -q -p no:cacheprovider \
  -rfE -n 8 -m gpu "$repo/tests/test_gpu.py" -k "multicast or producer or stream_k or on_chip or wgmma" \
  > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?" >> "$OUT/pytest.log")
tail -15 "$OUT/pytest.log"
echo "== probe A/B"
PROBE_BUILD=0 PROBE_ROUNDS=2 PROBE_TIMEOUT=90 PROBE_ARGS="values splits=1 1024x4096x4096 \
512x28672x8192 256x14336x4096 2048x4096x4096 512x4096x14336 512x4096x4096" \
  timeout 230 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |== probe" "$OUT/probe.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$OUT/gpu.txt" 2>&1
