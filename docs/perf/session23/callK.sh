#!/usr/bin/env bash
# session 23 call K, from branch wip/tail-map (its default build is main's): 
#  1. the bench's two rows call J's budget cut (bf16 28672 x 8192 and 4096 x 4096), for
#     docs/perf/h200.csv;
#  2. probes: r0 (main: the producer leaves last row blocks under 128 rows to the cp.async
#     ring) against tm (-DJAX_MARLIN_WGMMA_TAIL_MAP=1: the last row block's activations
#     through a second tensor map whose box holds only its rows, the producer everywhere).
#     Predicted: tm at M = 257 / 300 / 384 x 4096 x 4096 within 1.5 us of 512's 26.6 us
#     (r0: ~32), and 300 x 8192 x 28672 ~350 us (r0 ~402).
# run(command="bash docs/perf/session23/callK.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false PIP_NO_INDEX=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo=$(pwd)
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
f=(-std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DJAX_MARLIN_WGMMA=1)
pc=/tmp/pc; mkdir -p $pc /tmp/po/r0 /tmp/po/tm
(nv=(timeout 280 nvcc "${f[@]}" -I ffi -c)
 "${nv[@]}" ffi/marlin_kernel.cu -o $pc/marlin_kernel.o &
 "${nv[@]}" ffi/stream_kernel.cu -o $pc/stream_kernel.o &
 "${nv[@]}" tools/latency_probe.cu -o $pc/probe.o &
 "${nv[@]}" ffi/wgmma_kernel.cu -o /tmp/po/r0/wgmma_kernel.o &
 "${nv[@]}" ffi/wgmma_kernel.cu -DJAX_MARLIN_WGMMA_TAIL_MAP=1 -o /tmp/po/tm/wgmma_kernel.o &
 wait
 for n in r0 tm; do
   timeout 60 nvcc -gencode arch=compute_90a,code=sm_90a $pc/*.o /tmp/po/$n/wgmma_kernel.o \
     -o /tmp/po/$n/probe || echo "PROBE BUILD FAILED $n"
 done
 echo "probes built at $(el) s") > /tmp/probe_build.log 2>&1 &
pb=$!
python3 -m pip install --no-build-isolation --no-deps . \
  -Ccmake.define.XLA_FFI_INCLUDE_DIR="$repo/.ffi/include" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; }
echo "package built at $(el) s"
for shape in 28672x8192 4096x4096; do
  (cd /tmp && timeout 120 python3 -m jax_marlin.bench --shapes $shape --ms 1,4,16,64,256,1024 \
    --dtypes bfloat16 --impls dense,jax_marlin,tinygemm --no-forced --no-repack --budget-s 100 \
    --csv "$OUT/bench_$shape.csv" 2>&1 | tee "$OUT/bench_$shape.log" | grep -E "jax_marlin|total" | tail -8)
done
wait $pb; cat /tmp/probe_build.log
keep() { grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ "; }
shapes="257x4096x4096 300x4096x4096 384x4096x4096 512x4096x4096 300x8192x8192 300x4096x14336
  300x14336x4096 300x8192x28672 520x8192x28672"
for v in tm r0 tm r0; do
  [ $(el) -gt 300 ] && { echo "$v skipped at $(el) s"; continue; }
  echo "== $v at $(el) s" | tee -a $OUT/probe.log
  # shellcheck disable=SC2086
  timeout 90 /tmp/po/$v/probe splits= $shapes 2>&1 | keep | tee -a $OUT/probe.log
done
echo "total $(el) s"
