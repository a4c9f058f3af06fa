#!/usr/bin/env bash
# session 20 call B: session 19's prepared calls F (the streaming fast prologue's parts) and
# G (deeper wgmma rings), on main after call A's landing. Variants, made on this machine:
#   mk(){ mkdir -p $1 && git archive $2 ffi | tar -x -C $1; [ -n "${3-}" ] && echo "$3" > $1/CUDA_FLAGS; true; }
#   mk .variants/main main; mk .variants/deep wip/deep2 "-DJAX_MARLIN_WGMMA_PREFETCH_128=6 -DJAX_MARLIN_WGMMA_PREFETCH_32=8"
#   mk .vf/main main; mk .vf/s wip/fast-prologue-parts "-DJAX_MARLIN_STREAM_SKIP_EMPTY_REFILL=1"
#   mk .vf/fp3s wip/fast-prologue-parts "-DJAX_MARLIN_STREAM_FAST_PROLOGUE=3 -DJAX_MARLIN_STREAM_SKIP_EMPTY_REFILL=1"
#   mk .vf/fp4s wip/fast-prologue-parts "-DJAX_MARLIN_STREAM_FAST_PROLOGUE=4 -DJAX_MARLIN_STREAM_SKIP_EMPTY_REFILL=1"
# run(command="bash docs/perf/session20/callB.sh", carry=[".ffi", ".variants", ".vf"])
set -u
f=(-std=c++17 -O3 --expt-relaxed-constexpr)
a90a=(-gencode arch=compute_90a,code=sm_90a)
common=/tmp/pc; mkdir -p $common
# F: probe binaries with the wgmma kernel built for sm_90 (empty): stream shapes only
nvcc "${f[@]}" -gencode arch=compute_90,code=sm_90 -I .vf/main/ffi -c .vf/main/ffi/wgmma_kernel.cu -o $common/wgmma_kernel.o &
nvcc "${f[@]}" "${a90a[@]}" -I .vf/main/ffi -c .vf/main/ffi/marlin_kernel.cu -o $common/marlin_kernel.o &
nvcc "${f[@]}" "${a90a[@]}" -I .vf/main/ffi -c tools/latency_probe.cu -o $common/probe.o &
for n in main s fp3s fp4s; do
  mkdir -p /tmp/po/$n
  nvcc "${f[@]}" "${a90a[@]}" $(cat .vf/$n/CUDA_FLAGS 2>/dev/null) -I .vf/$n/ffi -c .vf/$n/ffi/stream_kernel.cu -o /tmp/po/$n/stream_kernel.o &
done
wait
for n in main s fp3s fp4s; do nvcc "${a90a[@]}" $common/*.o /tmp/po/$n/stream_kernel.o -o /tmp/po/$n/probe && echo "built $n"; done
# G's builds run while F's probes run (CPU only; the probes time CUDA graphs)
(PROBE_ROUNDS=0 bash tools/probe_variants.sh > /tmp/gbuild.log 2>&1) &
gpid=$!
for r in 1 2; do for n in main s fp3s fp4s; do
  echo "== $n r$r" | tee -a $OUT/probe_parts.log; timeout 40 /tmp/po/$n/probe splits= 1x4096x4096 1x14336x4096 16x4096x4096 8x4096x4096 2>&1 | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " | tee -a $OUT/probe_parts.log
done; done
wait $gpid; grep -E "built|FAIL" /tmp/gbuild.log
PROBE_BUILD=0 PROBE_TIMEOUT=150 PROBE_ROUNDS=2 PROBE_ARGS="splits= 128x8192x28672 128x28672x8192 100x4096x14336 256x4096x4096 256x8192x4096 32x8192x28672 32x28672x8192 20x4096x14336 32x4096x4096" \
  bash tools/probe_variants.sh 2>&1 | grep -v "split_k_override:$" > $OUT/probe_deep.log
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |== probe" $OUT/probe_deep.log
rm -f $OUT/probe_*_r*.txt
