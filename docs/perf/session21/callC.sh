#!/usr/bin/env bash
# session 21 call C (prepared, not run: no device was lent after call B), on main: the decode
# example with a head-major KV cache and one rotary pass for q and k (the script applies
# docs/perf/session21/wip/decode-headmajor.diff to the device's copy) against the example as
# it is on main: tokens/s
# (examples/decode.py defaults: Llama-3-8B dimensions, 4 layers, 64 steps) and a kernel trace
# of each (tools/decode_trace.py, batch 1, 16 steps). The GPU runs tests/test_examples.py too.
# run(command="bash docs/perf/session21/callC.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
mkdir -p /tmp/old/examples /tmp/old/tools
cp examples/decode.py /tmp/old/examples/decode.py  # main's, before the diff
git apply docs/perf/session21/wip/decode-headmajor.diff || patch -p1 < docs/perf/session21/wip/decode-headmajor.diff || exit 1
cp tools/decode_trace.py /tmp/old/tools/
SKIP_EXAMPLES=1 TEST_TIMEOUT=120 DECODE=" " DECODE_TIMEOUT=150 \
  bash tools/device_check.sh -k examples > $OUT/check.log 2>&1
grep -E "took|passed|failed|total" $OUT/check.log; cat $OUT/decode.log
(cd /tmp && timeout 150 python3 /tmp/old/examples/decode.py --out $OUT/decode_old.json 2>&1 | tail -6 | tee $OUT/decode_old.log)
for v in new old; do
  t=$repo/tools/decode_trace.py; [ $v = old ] && t=/tmp/old/tools/decode_trace.py
  echo "== trace $v"
  (cd /tmp && timeout 120 python3 $t --batch 1 --steps 16 --top 40 --out /tmp/tr_$v 2>&1 | tee $OUT/trace_$v.log | grep -v "^ ")
done
