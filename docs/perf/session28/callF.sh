#!/usr/bin/env bash
# Session 28, call F: 4096 x 4096 at M = 256 (0.85x fp16 in call C's bench, 23.7 us, where
# the probe's kernel alone in a CUDA graph reads 19.3-20.2 us): the bench's timed loop
# traced (tools/gap_trace.py, our planned call and jnp.dot): each call's kernel time, the
# gap to the next call, the checksum between passes and the wall time a GEMM.
#   run(command="bash docs/perf/session28/callF.sh", carry=[".ffi"])
# *Predicted*: the kernel ~20 us in the trace too, so the ~3.5 us over it are gaps and the
# pass's checksum (session 13: ~1 us a GEMM for ours at M = 1).
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
SKIP_EXAMPLES=1 bash tools/device_check.sh --co -q > "$OUT/check.log" 2>&1
echo "build exit $? at $(el) s"
(cd /tmp && timeout 100 python3 "$OLDPWD/tools/gap_trace.py" --K 4096 --N 4096 --M 256 \
  --copies 29 --cases auto,dense --kernel wgmma_gemm --wall-passes 32) > "$OUT/gap_trace.txt" 2>&1
grep -v "^WARNING\|^I0000\|^W0000" "$OUT/gap_trace.txt" | tail -12
rm -f "$OUT/pytest.log"
echo "total $(el) s"
