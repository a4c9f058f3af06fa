#!/usr/bin/env bash
# Session 36, call D: why the multicast pairs lost 19-32% (call C), and the clocks and
# power under a sustained probe. Variants (probe only; .variants made from HEAD's ffi and
# wip/multicast.patch):
#   base  HEAD's kernel
#   mc    wip/multicast.patch (the pairs share each stage's activation box)
#   pair  mc plus two #ifdef JM_PROBE_PAIR_ONLY (the copy's branch and the map's box;
#         wip/pair_only.patch, on top of multicast.patch), built with it: the same clusters of 2, the same
#         cross-block releases and cluster barriers, but each block copies its own
#         whole box (no multicast copy)
# Predicted: if pair reads like mc (~+20%), the coupling of the two blocks' rings costs
# it (a slot waits for the slower block's consumers and the remote arrive); if pair reads
# like base, the multicast copy itself is slow. nvidia-smi samples the SM clock and the
# power every 50 ms throughout: if the 64-call figure's 20% over one call's exit (session
# 35 call A) is the power limit, the clock falls below 1980 MHz at ~700 W.
#   run(command="bash docs/perf/session36/callD.sh", carry=[".variants"])
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
PROBE_ROUNDS=0 bash tools/probe_variants.sh > "$OUT/probe_build.log" 2>&1
grep -E "built|FAILED" "$OUT/probe_build.log"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu \
  --format=csv -lms 50 > "$OUT/smi.csv" 2>&1 &
smi=$!
PROBE_BUILD=0 PROBE_ROUNDS=1 PROBE_TIMEOUT=60 PROBE_ARGS="values splits=1 1024x4096x4096 \
512x28672x8192" timeout 150 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
kill $smi
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |== probe" "$OUT/probe.log"
python3 - "$OUT/smi.csv" <<'PY'
import sys
rows = [l.split(", ") for l in open(sys.argv[1]).read().splitlines()[1:]]
vals = [(float(r[1].split()[0]), float(r[2].split()[0])) for r in rows
        if len(r) >= 4 and r[1].split()[0].replace(".", "").isdigit()]
busy = [v for v in vals if v[1] > 200]
print(f"{len(vals)} samples, {len(busy)} over 200 W")
if busy:
    clocks = sorted(v[0] for v in busy); power = sorted(v[1] for v in busy)
    print(f"busy: SM clock min {clocks[0]:.0f} median {clocks[len(clocks)//2]:.0f} MHz; "
          f"power median {power[len(power)//2]:.0f} max {power[-1]:.0f} W")
PY
