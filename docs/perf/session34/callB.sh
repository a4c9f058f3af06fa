#!/usr/bin/env bash
# Session 34, call B: what call A's host costs mean for a served model that runs one
# jitted call a token (examples/decode.py --steps 1: each call builds empty caches and
# decodes one token, so a call's dispatch and graph update are in every token's time).
#   run(command="bash docs/perf/session34/callB.sh", carry=[".ffi"])
# *Predicted*: at 4 layers (17 GEMMs a call) the 4-bit model's per-call time is the
# host's (~0.5 ms: call A's 4-bit dispatch ~8-12 us a GEMM plus XLA's fixed ~150-250 us)
# against a GPU time of ~0.3 ms, so its speed-up falls from ~1.9x (64 steps a call) to
# ~1.2-1.5x; at 32 layers (129 GEMMs, GPU ~2.2 ms int4 / ~4.3 ms fp16) the host's ~1.2-1.6
# ms stays under the GPU's and the speed-up holds near ~1.9x.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PIP_NO_INDEX=1 PYTHONUNBUFFERED=1
repo="$(pwd)"
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
echo "build took $(( $(date +%s) - start )) s"
cd /tmp
for layers in 4 32; do
  echo "== --layers $layers --steps 1 (one token a call)"
  timeout 200 python3 "$repo/examples/decode.py" --layers "$layers" --steps 1 --batch 1 \
    --warmup 3 --repeats 21 --out "$OUT/decode_steps1_layers$layers.json" 2>&1 \
    | grep -v "^W0\|^I0\|^E0" | tail -6
  echo "done at $(( $(date +%s) - start )) s"
done
echo "== --layers 32 --steps 64 (the scan, for the same model)"
timeout 200 python3 "$repo/examples/decode.py" --layers 32 --steps 64 --batch 1 \
  --out "$OUT/decode_steps64_layers32.json" 2>&1 | grep -v "^W0\|^I0\|^E0" | tail -6
echo "all done at $(( $(date +%s) - start )) s"
