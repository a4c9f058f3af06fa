#!/usr/bin/env bash
# A/B of kernel variants in one device call: builds every source tree under
# .variants/<name> (git archive of a branch; .variants is git-ignored, pass
# carry=[".ffi", ".variants"]) in parallel, then benchmarks each in its own
# process, so every variant's ratios are against jnp.dot timed in that process.
#   git archive wip/x | tar -x -C .variants/x   (here, per variant; a file
#   .variants/x/CUDA_FLAGS adds nvcc flags to that variant's build, and
#   .variants/x/BENCH_ARGS replaces $BENCH for it)
#   BENCH="--shapes ... --ms ..." TESTS="all reduce2" NCU_VARIANT="all reduce2" \
#     NCU="--K 8192 --N 28672 --M 1" SANITIZE="memcheck racecheck" SAN_VARIANT="all reduce2" \
#     DECODE=" " DECODE_VARIANT=all NCU_SOURCE="--K 4096 --N 4096 --M 1" bash tools/ab_variants.sh
# Logs: $OUT/<name>/{build,pytest,bench}.log, bench.csv; $OUT/ncu_<name>.txt; all of
# them also in $OUT/ab.tar.gz (the device returns only a few files per call).
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
repo="$(pwd)"
source "$repo/tools/gpu_probes.sh"
start=$(date +%s)
names=$(ls .variants)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"

for n in $names; do
  mkdir -p "$OUT/$n"
  flags="$(cat ".variants/$n/CUDA_FLAGS" 2>/dev/null)"
  rm -rf "/tmp/v/$n"  # pip --target keeps an existing package (a warm machine)
  (python3 -m pip install --no-build-isolation --no-deps --target "/tmp/v/$n" -v ".variants/$n" \
     -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
     -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 -Cbuild-dir="/tmp/build/$n" \
     ${flags:+"-Ccmake.define.CMAKE_CUDA_FLAGS=$flags"} \
     >"$OUT/$n/build.log" 2>&1 && echo "built $n" || { echo "BUILD FAILED $n"; tail -30 "$OUT/$n/build.log"; }) &
done
wait
echo "builds done at $(( $(date +%s) - start )) s"

# WGMMA_PROBE=1: the wgmma layout and descriptor checks (tools/wgmma_probe.cu), first.
if [ -n "${WGMMA_PROBE-}" ]; then
  nvcc -gencode arch=compute_90a,code=sm_90a -O2 -o /tmp/wgmma_probe "$repo/tools/wgmma_probe.cu" \
    >"$OUT/wgmma_probe.txt" 2>&1 && timeout 60 /tmp/wgmma_probe >>"$OUT/wgmma_probe.txt" 2>&1
  echo "wgmma probe:"; tail -4 "$OUT/wgmma_probe.txt"
fi

# WGMMA_RATE=1: the GPU probes of the wgmma kernel's compute, built from this
# checkout: the tensor pipe's ceiling for its MMA shapes (tools/wgmma_rate.cu)
# and its stage loop without memory traffic (tools/wgmma_loop.cu).
if [ -n "${WGMMA_RATE-}" ]; then
  for probe in wgmma_rate wgmma_loop; do
    nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I "$repo/ffi" -o "/tmp/$probe" \
      "$repo/tools/$probe.cu" >"$OUT/$probe.txt" 2>&1 && timeout 60 "/tmp/$probe" >>"$OUT/$probe.txt" 2>&1
    cat "$OUT/$probe.txt"
  done
fi

# PLAN="--shapes 8192x28672 --ms 1,2": each variant's streaming grid (tools/show_plan.py).
if [ -n "${PLAN-}" ]; then
  for n in $names; do
    echo "== plan $n"
    # shellcheck disable=SC2086  # the arguments are split on purpose
    (cd /tmp && PYTHONPATH="/tmp/v/$n" python3 "$repo/tools/show_plan.py" $PLAN 2>&1 | tail -24)
  done
fi

for n in ${TESTS-}; do
  (cd /tmp && PYTHONPATH="/tmp/v/$n" timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -q \
     -p no:cacheprovider -rfE -n 8 -m gpu "$repo/.variants/$n/tests" >"$OUT/$n/pytest.log" 2>&1;
   echo "tests $n: $(tail -1 "$OUT/$n/pytest.log")"; grep -E "^FAILED|^ERROR" "$OUT/$n/pytest.log" | head -10)
done
echo "tests done at $(( $(date +%s) - start )) s"

# SAN_VARIANT may name several variants; each tool runs on each, with that
# variant's own sweep (a branch may add the shapes its change needs). Logs:
# $OUT/sanitize_<tool>_<variant>.log.
for v in ${SAN_VARIANT:-main}; do
  for tool in ${SANITIZE-}; do
    echo "$tool on $v:"
    PYTHONPATH="/tmp/v/$v" run_sanitizer "$tool" "${SANITIZE_TIMEOUT:-90}" \
      "$OUT/sanitize_${tool}_$v.log" "$repo/.variants/$v/tools/sanitize_sweep.py"
  done
done

for v in ${NCU_VARIANT:-main}; do
  for shape in ${NCU:+"$NCU"} ${NCU2:+"$NCU2"}; do
    echo "== ncu $shape on $v"
    PYTHONPATH="/tmp/v/$v" run_ncu "$shape" "${NCU_TIMEOUT:-90}" "$OUT/ncu_$v.txt"
  done
done

# NCU_FULL="--K 8192 --N 28672 --M 64;...": every section of one launch, per variant
# (NCU_KERNEL names it: "wgmma" at M = 17..1024, the default "stream_gemm" at M <= 16).
IFS=';' read -ra full_shapes <<<"${NCU_FULL-}"
for v in ${NCU_VARIANT:-main}; do
  i=0
  for shape in "${full_shapes[@]}"; do
    i=$((i + 1))
    PYTHONPATH="/tmp/v/$v" run_ncu_full "$shape" "${NCU_TIMEOUT:-90}" "$OUT/ncu_full_${v}_$i.txt"
  done
done

# NCU_SOURCE="--K 4096 --N 4096 --M 1;--K 8192 --N 28672 --M 1": per-SASS stall samples.
i=0
IFS=';' read -ra source_shapes <<<"${NCU_SOURCE-}"
for shape in "${source_shapes[@]}"; do
  i=$((i + 1))
  PYTHONPATH="/tmp/v/${NCU_VARIANT:-main}" run_ncu_source "$shape" "${NCU_TIMEOUT:-90}" \
    "$OUT/ncu_source_$i.csv"
done

# A file .variants/x/BENCH_ARGS replaces $BENCH for that variant (a variant that
# only matters at small M need not sit through the large-M sweep). BENCH_ROUNDS=2
# runs every variant's bench again, in the same order, after all of them
# (bench_r2.csv, ...): the same kernels' times moved by 3-5 us between processes
# (session 11, calls 2 and 5), so a 5% difference needs a second round to read.
# tools/ab_compare.py prints the rounds side by side.
if [ -n "${BENCH-}" ]; then
  for round in $(seq 1 "${BENCH_ROUNDS:-1}"); do
    suffix=$([ "$round" = 1 ] && echo "" || echo "_r$round")
    for n in $names; do
      echo "== bench $n (round $round)"
      bench_args="$(cat ".variants/$n/BENCH_ARGS" 2>/dev/null || echo "$BENCH")"
      # shellcheck disable=SC2086  # the arguments are split on purpose
      (cd /tmp && PYTHONPATH="/tmp/v/$n" timeout "${BENCH_TIMEOUT:-120}" python3 -m jax_marlin.bench \
         $bench_args --csv "$OUT/$n/bench$suffix.csv" --plot "$OUT/$n/bench$suffix.png" \
         >"$OUT/$n/bench$suffix.log" 2>&1;
       grep -E "jax_marlin|tinygemm" "$OUT/$n/bench$suffix.log" | grep -v "^#" | tail -40)
    done
  done
  python3 "$repo/tools/ab_compare.py" "$OUT" $names
fi
# DECODE_VARIANT may name several variants: $OUT/decode_<variant>.{json,log} each.
for v in ${DECODE:+${DECODE_VARIANT:-main}}; do
  echo "== decode $v"
  (cd /tmp && PYTHONPATH="/tmp/v/$v" timeout "${DECODE_TIMEOUT:-150}" \
     python3 "$repo/examples/decode.py" $DECODE --out "$OUT/decode_$v.json" >"$OUT/decode_$v.log" 2>&1;
   tail -6 "$OUT/decode_$v.log")
done
echo "total $(( $(date +%s) - start )) s"
(cd "$OUT" && tar -czf /tmp/ab.tar.gz --exclude='*.png' . && rm -rf ./* && mv /tmp/ab.tar.gz .)
