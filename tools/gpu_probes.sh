# Sourced by tools/device_check.sh and tools/ab_variants.sh: the two GPU probes
# both run, in one place. Each runs in /tmp (so the installed package is the
# one imported; set PYTHONPATH to pick a variant) and appends to its log.
repo="${repo:-$(pwd)}"

# compute-sanitizer TOOL over the ragged sweep (tools/sanitize_sweep.py).
# No autotuning: under racecheck XLA's autotuner compiles and runs every
# candidate GEMM fusion instrumented, which took minutes and crashed the
# sanitizer once (session 3); the sweep's oracle needs no fast GEMM.
# A run that ends in exit 139 with no summary is run again, up to twice, its log kept
# as LOG.crash: compute-sanitizer itself segfaulted three times in session 16's eight
# calls (dmesg put the fault in its binary), and each of those runs passed when
# repeated; in session 43 (call E) it crashed at start-up, banner only, twice in a
# row. A crash of ours would crash every run.
run_sanitizer() {  # tool timeout_s log [sweep script: the checkout's by default]
  # SANITIZE_PARTS="fused dense ..." (tools/sanitize_sweep.py's PARTS): one process a
  # part, each with its own timeout and log (LOG.PART): compute-sanitizer crashed on the
  # whole sweep under racecheck in session 21, after the first parts had run clean.
  if [ -n "${SANITIZE_PARTS-}" ]; then
    local part
    for part in $SANITIZE_PARTS; do
      SWEEP_PARTS="$part" SANITIZE_PARTS="" run_sanitizer "$1" "$2" "$3.$part" "${4-}"
    done
    return
  fi
  local attempt rc
  for attempt in 1 2 3; do
    (cd /tmp && XLA_PYTHON_CLIENT_ALLOCATOR=platform \
       XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_autotune_level=0" timeout "$2" \
       compute-sanitizer --tool "$1" --kernel-name kns=marlin --error-exitcode 3 \
       python3 "${4:-$repo/tools/sanitize_sweep.py}" >"$3" 2>&1)
    rc=$?
    if [ "$rc" = 139 ] && [ "$attempt" != 3 ] && ! grep -q "SUMMARY" "$3"; then
      mv "$3" "$3.crash"
      echo "$1 crashed (exit 139, no summary; $3.crash): once more"
      continue
    fi
    break
  done
  echo "$1${SWEEP_PARTS:+ ($SWEEP_PARTS)} exit $rc"; grep "sanitize sweep" "$3" | tail -3; tail -1 "$3"
}

# memcheck, then racecheck, over the sweep's PARTS (run_sanitizer above,
# SANITIZE_PARTS), every log gathered into one file for $OUT (a device call
# returns at most 8 files).
run_sanitizers() {  # "parts" timeout_s gathered_log
  local tool f
  for tool in memcheck racecheck; do
    SANITIZE_PARTS="$1" run_sanitizer "$tool" "$2" "/tmp/sanitize_$tool.log"
  done
  for f in /tmp/sanitize_*.log.*; do echo "==== $f"; cat "$f"; done > "$3" 2>&1
}

# Nsight Compute on the streaming kernels of one GEMM (tools/profile_one.py
# arguments; NCU_KERNEL="wgmma|splitk" picks other kernels by name): duration,
# DRAM throughput, issue rate, registers and the stall reasons per issued
# instruction; and the busiest SM's active cycles against the kernel's elapsed
# cycles (sm__cycles_active.max / sm__cycles_elapsed.max): how much of a small
# kernel's duration its blocks run at all (the rest is launch and drain).
run_ncu() {  # "profile_one args" timeout_s log
  local stalls="" r
  for r in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle \
      not_selected selected dispatch_stall no_instruction branch_resolving barrier membar; do
    stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  # shellcheck disable=SC2086  # the shape arguments are split on purpose
  (cd /tmp && timeout "$2" ncu --kernel-name regex:"${NCU_KERNEL:-stream}" --launch-skip 6 --launch-count 2 \
     --clock-control none --metrics "gpu__time_duration.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,\
smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active,\
launch__registers_per_thread,sm__cycles_active.max,sm__cycles_elapsed.max$stalls" python3 "$repo/tools/profile_one.py" $1 >>"$3" 2>&1
   grep -E "stream_|wgmma_|splitk_|duration|throughput|inst_executed|issue_active|warps_active|registers|cycles_|stalled" \
     "$3" | tail -48 | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//')
}

# Nsight Compute's per-instruction warp-stall samples for the first streaming
# main kernel of one GEMM (tools/profile_one.py arguments): where in the SASS the
# warps wait, as CSV ($3), and the WarpStateStats/SourceCounters summary ($3.txt).
run_ncu_source() {  # "profile_one args" timeout_s csv
  local rep="/tmp/ncu_source_$$"
  # shellcheck disable=SC2086
  (cd /tmp && timeout "$2" ncu --kernel-name regex:"${NCU_KERNEL:-stream_gemm}" --launch-skip 3 --launch-count 1 \
     --clock-control none --section WarpStateStats --section SourceCounters \
     --section SpeedOfLight --import-source yes -f -o "$rep" \
     python3 "$repo/tools/profile_one.py" $1 >"$3.txt" 2>&1
   ncu -i "$rep.ncu-rep" --print-summary none >>"$3.txt" 2>&1
   ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"$3" 2>>"$3.txt"
   echo "ncu source $1: $(wc -l <"$3") SASS lines"; grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued" "$3.txt" | head -5)
}

# Nsight Compute's full set (every section, every pipe's utilization, L2 and
# DRAM traffic) for one launch of the kernels NCU_KERNEL names, printed with
# all details to $3 (the .ncu-rep is too large to bring back).
run_ncu_full() {  # "profile_one args" timeout_s txt
  local rep="/tmp/ncu_full_$$"
  # shellcheck disable=SC2086
  (cd /tmp && timeout "$2" ncu --kernel-name regex:"${NCU_KERNEL:-stream_gemm}" --launch-skip 6 --launch-count 1 \
     --clock-control none --set full -f -o "$rep" \
     python3 "$repo/tools/profile_one.py" $1 >"$3" 2>&1
   ncu -i "$rep.ncu-rep" --page details --print-details all >>"$3" 2>&1
   echo "ncu full $1: $(wc -l <"$3") lines"; grep -E "^    Duration|Compute \(SM\) Throughput|L2 Cache Throughput|Issue Slots Busy" "$3" | head -6)
}
