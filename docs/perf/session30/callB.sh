#!/usr/bin/env bash
# Session 30 call B, on main at the reduce-rows commit (901628b) plus tools/balance_probe.cu:
# (1) the balance probe: static stream-K against a dynamic hand-out of Q-step chunks, in a
#     stand-in for the GEMV that only streams (tools/balance_probe.cu's header);
# (2) the 16-row kernel with a unit's four words dequantized before its MMAs
#     (-DJAX_MARLIN_STREAM_DEQUANT_AHEAD=1: .variants/ahead, docs/perf/session30/wip/dequant-ahead.diff on main, with
#     that CUDA_FLAGS file; .variants/main is main's), probe, two rounds;
# (3) the decode example's refresh (decode.py's defaults, --out decode.json), the 16-row
#     reduce having changed (the down projection 14336 x 4096 at batch 16 takes it).
#   run(command="bash docs/perf/session30/callB.sh", carry=[".ffi", ".variants"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I ffi -o /tmp/balance_probe \
  tools/balance_probe.cu && timeout 120 /tmp/balance_probe 2>&1 | tee "$OUT/balance_probe.txt"
echo "balance probe done at $(el) s"
PROBE_ROUNDS=2 PROBE_ARGS="random splits= 16x8192x28672 12x8192x28672 9x8192x28672
  16x28672x8192 16x4096x28672 16x4096x14336 1x8192x28672" bash tools/probe_variants.sh \
  > "$OUT/probe.log" 2>&1
grep -v "^built" "$OUT/probe.log" | grep -v split_k_override | cut -c1-110
echo "probe done at $(el) s"
SKIP_EXAMPLES=1 TEST_TIMEOUT=60 bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "install exit $? at $(el) s"
(cd /tmp && timeout 200 python3 "$repo/examples/decode.py" --out "$OUT/decode.json" 2>&1 | tail -6)
echo "total $(el) s"
