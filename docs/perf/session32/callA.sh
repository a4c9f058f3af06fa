#!/usr/bin/env bash
# Session 32 call A: session 31's call D (the layer-stack bench rows now that medians_us
# warms up first, and the decode example's median of three), then the dense path's kernels
# at M = 4096 (4096 x 4096) under Nsight Compute.
#   run(command="bash docs/perf/session32/callA.sh", carry=[".ffi"])
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
repo="$(pwd)"
bash docs/perf/session31/callD.sh
source tools/gpu_probes.sh
NCU_KERNEL="." run_ncu "--K 4096 --N 4096 --M 4096 --impl dense" 100 "$OUT/ncu_dense.txt"
