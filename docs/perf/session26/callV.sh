#!/usr/bin/env bash
# Session 26, call V, from branch wip/stream-k (store_outputs' grid epilogue as main's again):
# session 24's call M with every sanitizer, the probe on random bits at the shapes call U
# compared, and the bench at M = 128-768 on the README's three fp16 shapes.
#   run(command="bash docs/perf/session26/callV.sh", carry=[".ffi"])
SANITIZERS="racecheck memcheck synccheck" PROBE_FILL=random \
PROBE_SHAPES="128x4096x4096 256x4096x4096 256x8192x8192 256x8192x28672 512x8192x28672
  768x8192x28672 300x8192x8002" \
BENCH_SHAPES=8192x28672,28672x8192,4096x4096 BENCH_MS=128,256,512,768 \
  bash docs/perf/session24/callM.sh
