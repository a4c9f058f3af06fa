#!/usr/bin/env bash
# tools/latency_probe.cu built against each source tree under .variants/<name>
# (git archives of branches, as for tools/ab_variants.sh) and run alternately,
# PROBE_ROUNDS times (default 2): the launcher's own kernels in CUDA graphs, so
# a kernel change reads without the bench's harness. The probe's source is this
# checkout's; only ffi/ comes from each variant, and a file .variants/<name>/CUDA_FLAGS
# adds nvcc flags to that variant's kernels and probe (e.g.
# -DJAX_MARLIN_STREAM_TIMELINE: the blocks' timestamps, ffi/stream_timeline.h).
# Logs: $OUT/probe_<name>_r<k>.txt.
#   PROBE_ROUNDS=2 bash tools/probe_variants.sh      (carry=[".variants"])
#   PROBE_ARGS=small ...: the small decoders' shapes (tools/latency_probe.cu)
#   PROBE_NAMES="main r128": run only these (all are built); PROBE_BUILD=0: reuse the probes an
#   earlier run in the same device call built (another PROBE_ARGS, no second build)
#   PROBE_SOURCE=variant: each variant's own tools/latency_probe.cu (where a branch's probe
#   sets up what its kernels need, e.g. wip/stream-k's workspace area)
#   PROBE_POWER=1: each run under tools/power_sample.py (the SM clock and the power every
#   50 ms, $OUT/smi_<name>_r<k>.csv; one summary a run, over all of its shapes and grids:
#   give it one shape, splits= and replays=N, N near 20,800 / its us a GEMM for ~4 s a
#   timing, for a clock that belongs to one kernel): sustained runs sit at the power cap,
#   where a variant's clock falls (session 36 call D), so its clock reads beside its time
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
names=${PROBE_NAMES:-$(ls .variants)}              # the ones run
builds=$([ "${PROBE_BUILD:-1}" = 0 ] || ls .variants)  # every variant, unless PROBE_BUILD=0
flags=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a)
for n in $builds; do
  obj="/tmp/probe_obj/$n"; rm -rf "$obj"; mkdir -p "$obj"
  # shellcheck disable=SC2207  # the flags are split on purpose
  extra=($(cat ".variants/$n/CUDA_FLAGS" 2>/dev/null))
  (for f in marlin_kernel stream_kernel wgmma_kernel; do
     nvcc "${flags[@]}" "${extra[@]}" -DJAX_MARLIN_WGMMA=1 -I ".variants/$n/ffi" \
       -c ".variants/$n/ffi/$f.cu" -o "$obj/$f.o" &
   done
   probe_src="$repo/tools/latency_probe.cu"
   [ "${PROBE_SOURCE:-}" = variant ] && probe_src=".variants/$n/tools/latency_probe.cu"
   nvcc "${flags[@]}" "${extra[@]}" -I ".variants/$n/ffi" -c "$probe_src" -o "$obj/probe.o"
   wait
   nvcc -gencode arch=compute_90a,code=sm_90a "$obj"/*.o -o "$obj/latency_probe" \
     && echo "built probe $n" || echo "PROBE BUILD FAILED $n") &
done
wait
for round in $(seq 1 "${PROBE_ROUNDS:-2}"); do
  for n in $names; do
    echo "== probe $n (round $round)"
    sampler=()
    [ "${PROBE_POWER-}" = 1 ] && sampler=(python3 "$repo/tools/power_sample.py" --out \
      "$OUT/smi_${n}_r$round.csv" --)
    # shellcheck disable=SC2086  # PROBE_ARGS is split on purpose ("small", "random")
    ${sampler[@]+"${sampler[@]}"} timeout "${PROBE_TIMEOUT:-90}" "/tmp/probe_obj/$n/latency_probe" \
      ${PROBE_ARGS-} >"$OUT/probe_${n}_r$round.txt" 2>&1
    grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |split_k_override|timeline|power_sample" \
      "$OUT/probe_${n}_r$round.txt"
  done
done
