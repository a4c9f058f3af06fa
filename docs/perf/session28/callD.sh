#!/usr/bin/env bash
# Session 28, call D: where the layer stack's ~20-23 us a layer goes (NOTES item 3):
# tools/stack_trace.py traces one call of the bench's 32-layer stack (4096 x 4096, M = 1,
# tanh between layers), dense and 4-bit, on this tree (main at 2c93170 + the tool).
#   run(command="bash docs/perf/session28/callD.sh", carry=[".ffi"])
# *Predicted*: dense one GEMM kernel a layer (XLA fuses the tanh into its dot) and 4-bit
# three or four (main kernel, reduce, tanh, maybe a memset), so ~2-3 more dependent
# launches a layer, ~1-1.5 us each in a graph: the 4 us a layer between the two.
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "build exit $? at $(el) s"
(cd /tmp && timeout 200 python3 "$OLDPWD/tools/stack_trace.py" --out /tmp/stack_trace) \
  > "$OUT/stack_trace.txt" 2>&1
cat "$OUT/stack_trace.txt" | grep -v "^WARNING\|^I0000\|^W0000" | tail -30
echo "total $(el) s"
