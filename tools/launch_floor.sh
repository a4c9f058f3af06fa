#!/usr/bin/env bash
# The bench loop's floor per GEMM under XLA's command-buffer (CUDA graph)
# settings, one process each: the default, none, and loops graphed whole
# (WHILE with conditional nodes). A per-GEMM time that falls when more is
# graphed is host launch cost, not kernel time. Run after a build (device_check.sh
# or ab_variants.sh; PYTHONPATH picks the build). Logs: $OUT/floor_<name>.log.
#   FLOOR_BENCH="--shapes 256x512,4096x4096 --ms 1" bash tools/launch_floor.sh
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
bench="${FLOOR_BENCH:---shapes 256x512,4096x4096 --ms 1}"
declare -A flags=(
  [default]=""
  [nographs]="--xla_gpu_enable_command_buffer="
  [whole]="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CONDITIONAL,WHILE --xla_gpu_graph_min_graph_size=1"
)
for name in default nographs whole; do
  echo "== floor $name: XLA_FLAGS=${flags[$name]}"
  # shellcheck disable=SC2086  # the arguments are split on purpose
  (cd /tmp && XLA_FLAGS="${flags[$name]}" timeout "${FLOOR_TIMEOUT:-60}" python3 -m jax_marlin.bench \
     $bench --dtypes float16 --groups 128 --impls dense,jax_marlin --no-forced --no-repack \
     --repeats 5 --budget-s 30 >"$OUT/floor_$name.log" 2>&1
   echo "exit $?"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |stack32:" "$OUT/floor_$name.log")
done
