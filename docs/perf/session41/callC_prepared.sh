#!/usr/bin/env bash
# Prepared in session 41 (no device was lent; not run). Does the next projection's
# weights, prefetched into the L2 at the end of a GEMM, arrive while the decode
# example's small XLA kernels leave DRAM idle, and make that projection faster?
# Session 37's call M tried the prefetch with GEMMs back to back (~1.5 us of idle DRAM
# a call) and lost 4-17%; in the decode example ~93 us a token (~23 us a layer, 4
# layers) is small kernels of 1.1-1.8 us each (session 22 call C), idle DRAM the int4
# model could fill. tools/latency_probe.cu's `layers=` chains a layer's four projections
# (qkv 4096 x 6144, o 4096 x 4096, gate/up 4096 x 28672, down 14336 x 4096) with 8 / 3 /
# 1 / 3 small kernels after them, over 16 layers' weights (1.7 GB, past the L2).
# Variants: main; pf (wip/l2-hint.patch's ffi/ and tools/: after its loop and its outputs,
# warp 0 of each block issues cp.async.bulk.prefetch.L2 for its slices of the next
# projection's codes, the next layer's qkv after down, up to a cap: 4, 8, 16, 32, 64 MB in
# turn and 0, the launcher's default of half the L2, spread over the codes: the first
# part of every 16 KB slice). pf's first "cold:" line runs with no hint: the hint's code
# at the kernel's end moved the scheduling of the step loops (session 42: the hint as a
# kernel parameter of its own, `tools/sass_mix.py --compare`: a median 7.7% of a loop's
# instructions, 25 of 120 loops unchanged; as StreamParams fields, session 41's form, 43%
# and none), so it reads what the patch costs a model that names no next weights.
# Predicted (M = 1, us a layer, CUDA graphs):
#   main, with the small kernels: ~43 of GEMMs (7.1 + 5.7 + 19.4 + 11.2 in graphs) + 15 x
#   ~1.3 -> ~60-66; back to back ~43-46;
#   hot against cold (a projection's own weights in the L2, with its small kernels): qkv
#   -2 to -3 us, o -1.5 to -2.5, down -3 to -5 (30 MB, mostly held), gate/up within 1 us
#   (59 MB does not fit);
#   pf with the small kernels, best cap (16-32 MB): -4 to -9 us a layer (what hot saves
#   on qkv and o, plus parts of gate/up and down); cap 64 no better than 32 (gate/up's
#   59 MB would evict itself); back to back: 0 to +3 us (call M's loss).
#   M = 16: the same absolute savings within 1-2 us; pf without the hint within 1% of main.
# If pf saves >= 5 us a layer at M = 1 with the small kernels (>= 8%): the next step
# is the rest of the same patch (matmul_nbits(..., prefetch=next_weights), jmf.Linear's
# prefetch, the decode example chaining every projection to the next): callD_prepared.sh
# (GPU tests, memcheck) and callE_prepared.sh (the decode example with and without it).
#   run(command="bash docs/perf/session41/callC_prepared.sh", carry=[".ffi"])  (~4 minutes)
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
rm -rf .variants && mkdir -p .variants
for v in main pf; do
  mkdir -p ".variants/$v" && cp -r ffi tools ".variants/$v/"
done
# (--include matches the path after --directory's prefix)
git apply --include=".variants/pf/ffi/*" --include=".variants/pf/tools/*" --directory=.variants/pf \
  docs/perf/session41/wip/l2-hint.patch || echo "PATCH FAILED"
grep -c l2_prefetch .variants/*/ffi/stream_kernel.cu .variants/*/tools/latency_probe.cu
PROBE_SOURCE=variant PROBE_ROUNDS=2 PROBE_TIMEOUT=150 PROBE_ARGS="values layers=1,16" \
  timeout 420 bash tools/probe_variants.sh > "$OUT/probe.log" 2>&1
grep -E "built|FAILED" "$OUT/probe.log"
for f in "$OUT"/probe_*_r*.txt; do echo "== $f"; grep -vE "^(empty|small|blocks)" "$f"; done
rm -rf .variants
