#!/usr/bin/env bash
# session 19 call B: probes (wgmma: main/ctwo/both; stream: main/fp/fps), then bench traces with per-output checksums
set -u
repo=$(pwd)
ls /tmp/probe_obj/*/latency_probe >/dev/null 2>&1 && export PROBE_BUILD=0
(cd /tmp && python3 -c "import jax_marlin" 2>/dev/null) || (PIP_NO_INDEX=1 python3 -m pip install --no-build-isolation --no-deps . -Ccmake.define.XLA_FFI_INCLUDE_DIR=$repo/.ffi/include -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $OUT/build.log 2>&1 &)
echo "PROBE_BUILD=${PROBE_BUILD-1}"
W="splits= 64x4096x14336 32x4096x14336 20x4096x14336 64x5120x13824 64x8192x28672 64x28672x8192 64x4096x4096 256x14336x4096 256x8192x28672 256x4096x4096"
C="splits= 64x4096x14336 32x4096x14336 20x4096x14336 64x5120x13824"
S="splits=-2 1x4096x4096 1x14336x4096 16x4096x4096"
PROBE_TIMEOUT=120 PROBE_ROUNDS=2 PROBE_NAMES="main both" PROBE_ARGS="$W" bash tools/probe_variants.sh 2>&1 | tee $OUT/probe_w.log | tail -3
export PROBE_BUILD=0
mkdir -p $OUT/w && mv $OUT/probe_*_r*.txt $OUT/w/
PROBE_TIMEOUT=60 PROBE_ROUNDS=2 PROBE_NAMES="ctwo" PROBE_ARGS="$C" bash tools/probe_variants.sh 2>&1 | tee $OUT/probe_c.log | tail -3
mkdir -p $OUT/c && mv $OUT/probe_*_r*.txt $OUT/c/
PROBE_TIMEOUT=60 PROBE_ROUNDS=2 PROBE_NAMES="main fp fps" PROBE_ARGS="$S" bash tools/probe_variants.sh 2>&1 | tee $OUT/probe_s.log | tail -3
mkdir -p $OUT/s && mv $OUT/probe_*_r*.txt $OUT/s/
wait
cd /tmp
sp=$(python3 -c "import jax_marlin, os; print(os.path.dirname(jax_marlin.__file__))")
cp $sp/bench.py /tmp/bench_main.py; cp $repo/.variants_bench/bench_per.py $sp/bench.py
for cell in "--K 4096 --N 4096 --M 256 --copies 16" "--K 4096 --N 4096 --M 64 --copies 29" "--K 4096 --N 4096 --M 1 --copies 29"; do
  echo "=== per $cell"
  timeout 80 python3 $repo/tools/bench_trace.py $cell --out /tmp/bt_per 2>&1 | grep -v "^W0\|^I0" | tee -a $OUT/trace_per.log | head -24
done
cp /tmp/bench_main.py $sp/bench.py
