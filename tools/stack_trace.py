"""Where the bench's layer stack spends a layer: kernels and the gaps between them.

    python3 tools/stack_trace.py [--layers 32] [--shape 4096] [--out /tmp/stack_trace]

The bench's `jax_marlin_stack32` row (jax_marlin/bench.py run_layer_stack: 32 layers of
4096 x 4096 at M = 1, each output through tanh into the next layer, under one jit)
reads ~20-23 us a layer for the 4-bit stack against ~19 for dense, while the 4-bit
GEMM alone runs ~6 us in a CUDA graph (docs/perf/NOTES.md). This traces one call of
each stack with jax.profiler (CUPTI, command buffers kept, as tools/decode_trace.py
does) and prints the kernels a layer, their times by name, and the idle time.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_enable_command_buffers_during_profiling=true").strip()

import jax  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import decode_trace as dt  # noqa: E402  (its trace parsing)

from jax_marlin import bench  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--shape", type=int, default=4096)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/stack_trace"))
    args = parser.parse_args(argv)
    K = N = args.shape
    key_w, key_x = jax.random.split(jax.random.key(0))
    onnx = bench.onnx_copies(key_w, K, N, 128, "float16", args.layers)
    weights = {"dense": tuple(bench.dense_weight(q, "float16") for q in onnx),
               "jax_marlin": tuple(bench.marlin_weights(q, "float16") for q in onnx)}
    x = jax.random.normal(key_x, (1, K)).astype("float16")
    for impl in ("dense", "jax_marlin"):
        stack = bench.chained(bench.JAX_OPS[impl])
        for _ in range(3):
            jax.block_until_ready(stack(x, weights[impl]))
        start = time.perf_counter()
        for _ in range(20):
            y = stack(x, weights[impl])
        jax.block_until_ready(y)
        wall_us = (time.perf_counter() - start) * 1e6 / 20
        logdir = args.out / impl
        logdir.mkdir(parents=True, exist_ok=True)
        with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
            jax.block_until_ready(stack(x, weights[impl]))
        rows, lines = dt.device_kernels(*dt.trace_events(logdir))
        if not rows:
            print(f"{impl}: processes and GPU lines in the trace: {lines}")
            continue
        dt.summarize(f"{impl} stack of {args.layers}", dt.last_burst(rows, 2000.0),
                     args.layers, args.top, wall_us, unit="layer")


if __name__ == "__main__":
    main()
