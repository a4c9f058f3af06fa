#!/usr/bin/env bash
# session 21 call C (prepared, not run: no device was lent after call B), on main: the decode
# example in three forms, each in its own copy under /tmp/<variant>/ (examples/, tests/,
# tools/decode_trace.py), against the installed package:
#   main       examples/decode.py as it is
#   headmajor  + session21/wip/decode-headmajor.diff (a [B, kv_heads, max_len, d] cache, as the
#              attention's matmuls batch it; q and k rotated in one pass, angles once a token)
#   cudnn      + session21/wip/decode-cudnn-attention.diff (on a GPU, cuDNN's fused attention,
#              jax.nn.dot_product_attention(implementation="cudnn"), for XLA's three kernels)
# For each: tests/test_examples.py on the GPU (the cached decoding against the float64 oracle),
# tokens/s (decode.py's defaults: Llama-3-8B dimensions, 4 layers, 64 steps, batch 1 and 16),
# and a kernel trace (tools/decode_trace.py, batch 1, 16 steps). VARIANTS="main cudnn" to run
# fewer (each takes ~150 s; the build ~70 s).
# run(command="bash docs/perf/session21/callC.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
repo=$(pwd)
SKIP_EXAMPLES=1 TEST_TIMEOUT=60 bash tools/device_check.sh --co -q > $OUT/check.log 2>&1
grep -E "took|total" $OUT/check.log
for v in ${VARIANTS:-main headmajor cudnn}; do
  mkdir -p /tmp/$v/examples /tmp/$v/tests /tmp/$v/tools
  cp examples/decode.py /tmp/$v/examples/; cp tests/test_examples.py /tmp/$v/tests/
  cp tools/decode_trace.py /tmp/$v/tools/
  if [ $v != main ]; then
    diff=$(ls $repo/docs/perf/session21/wip/decode-$v*.diff)
    (cd /tmp/$v && { git apply "$diff" 2>/dev/null || patch -p1 < "$diff"; }) || exit 1
  fi
  echo "== $v"
  (cd /tmp && timeout 90 python3 -m pytest -q -p no:cacheprovider /tmp/$v/tests/test_examples.py 2>&1 | tail -1)
  (cd /tmp && timeout 150 python3 /tmp/$v/examples/decode.py --out $OUT/decode_$v.json 2>&1 | tail -4)
  (cd /tmp && timeout 120 python3 /tmp/$v/tools/decode_trace.py --batch 1 --steps 16 --top 40 \
     --out /tmp/tr_$v > $OUT/trace_$v.log 2>&1; grep -v "^ " $OUT/trace_$v.log)
done
