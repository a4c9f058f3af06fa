#!/usr/bin/env bash
# One call on the GPU machine: build, GPU tests, benchmark. Logs go to $OUT.
#   bash tools/device_check.sh [pytest args...]
# Environment: BENCH="--quick" (benchmark arguments; unset skips it), DECODE=" " (run
# examples/decode.py with these arguments), SANITIZE="memcheck racecheck" (compute-sanitizer
# tools to run over tools/sanitize_sweep.py),
# SANITIZE_PARTS="fused dense" (one sanitizer process a sweep part; tools/gpu_probes.sh),
# SKIP_EXAMPLES=1, BUILD_ONLY=1 (install the package, check that it imports, and
# stop: the build step a call script can share), TEST_TIMEOUT (s), CUDA_FLAGS (extra
# nvcc flags for the build, e.g. "-DJAX_MARLIN_STREAM_RING_STEPS=3" for the streaming
# kernel's ring depth),
# NCU="--K 8192 --N 28672 --M 1" and NCU2=... (Nsight Compute on the streaming kernel for that GEMM:
# duration, DRAM throughput, issue rate and the stall reasons; tools/profile_one.py),
# FFI_HEADERS=.ffi/include (XLA FFI headers to build against; default: jaxlib 0.8.0's,
# carried in .ffi so that the build is the one CI makes). The device has no network: make
# .ffi here first (it is git-ignored; pass carry=[".ffi"] to the device call):
#   pip download --no-deps jaxlib==0.8.0 -d /tmp/jl && mkdir -p .ffi && \
#   unzip -q -o /tmp/jl/jaxlib-0.8.0-*.whl 'jaxlib/include/*' -d /tmp/jl && \
#   cp -r /tmp/jl/jaxlib/include .ffi/
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1
# pytest -n 8 runs eight JAX clients on one GPU: each would take 75% of its memory at
# start (session 34's first test call: 451 failures, all from running out of memory).
export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"
repo="$(pwd)"
headers="${FFI_HEADERS:-.ffi/include}"
source "$repo/tools/gpu_probes.sh"
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"

echo "== build"
python3 -m pip install --no-build-isolation --no-deps -v . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/$headers" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
  ${CUDA_FLAGS:+"-Ccmake.define.CMAKE_CUDA_FLAGS=$CUDA_FLAGS"} >"$OUT/build.log" 2>&1 \
  || { tail -60 "$OUT/build.log"; exit 1; }
grep -E "ptxas|spill|error" "$OUT/build.log" | tail -20
echo "build took $(( $(date +%s) - start )) s"
(cd /tmp && python3 -c "import jax, jax_marlin; print(jax.devices()); print(jax_marlin.build_info())")
imported=$?
[ "${BUILD_ONLY-}" = 1 ] && exit "$imported"

echo "== tests"
(cd /tmp && timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -p no:cacheprovider -rfE \
  "$repo/tests" "$@" 2>&1 | tee "$OUT/pytest.log" | tail -40)
echo "tests done at $(( $(date +%s) - start )) s"
# pytest -q -n 8 has left no summary line in pytest.log on the device (session 39): the
# outcomes counted from the progress marks instead (. passed, s skipped, F failed, E error).
echo "progress marks: $(grep -E "\[ *[0-9]+%\]" "$OUT/pytest.log" | sed 's/\[.*//' |
  tr -d ' \n' | fold -w1 | sort | uniq -c | tr -s ' \n' ' ')"

if [ -n "${SANITIZE-}" ]; then
  echo "== compute-sanitizer ($SANITIZE) on ragged shapes"
  for tool in $SANITIZE; do
    run_sanitizer "$tool" "${SANITIZE_TIMEOUT:-60}" "$OUT/sanitize_$tool.log"
  done
fi

if [ -z "${SKIP_EXAMPLES-}" ]; then
  echo "== examples"
  (cd /tmp && timeout 60 python3 "$repo/examples/quickstart.py" 2>&1 | tail -4 | tee "$OUT/quickstart.log")
fi
if [ -n "${DECODE-}" ]; then
  (cd /tmp && timeout "${DECODE_TIMEOUT:-150}" python3 "$repo/examples/decode.py" $DECODE \
    --out "$OUT/decode.json" 2>&1 | tail -12 | tee "$OUT/decode.log")
fi

for shape in ${NCU:+"$NCU"} ${NCU2:+"$NCU2"}; do
  echo "== ncu $shape"
  run_ncu "$shape" "${NCU_TIMEOUT:-120}" "$OUT/ncu.txt"
done

if [ -n "${BENCH-}" ]; then
  echo "== bench $BENCH"
  (cd /tmp && python3 -m jax_marlin.bench $BENCH --csv "$OUT/bench.csv" --plot "$OUT/bench.png" 2>&1 \
    | tee "$OUT/bench.log" | tail -80)
fi
echo "total $(( $(date +%s) - start )) s"
