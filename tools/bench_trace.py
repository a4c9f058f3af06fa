"""A benchmark cell's kernels on the GPU timeline: what runs between the GEMMs.

    python3 tools/bench_trace.py --K 8192 --N 28672 --M 1 --out /tmp/bench_trace

Runs ``jax_marlin.bench``'s timed loop (``make_loop``: a pass over the weight
copies, repeated by a ``fori_loop``) for the int4 path and for ``jnp.dot``,
times one call of each untraced, then traces one with ``jax.profiler`` (CUPTI,
command buffers kept) and prints the kernels by name with their mean duration,
and the idle time between them. The bench's per-GEMM time is the call's wall
time over its GEMMs; this says how much of it the kernels take.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys
import time

PROFILE_WITH_COMMAND_BUFFERS = "--xla_enable_command_buffers_during_profiling=true"
if PROFILE_WITH_COMMAND_BUFFERS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " +
                               PROFILE_WITH_COMMAND_BUFFERS).strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jax_marlin import bench  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from decode_trace import device_kernels, kernel_times, summarize, trace_events  # noqa: E402


def add_cell_arguments(p, K: int, N: int, copies: int):
    """The benchmark cell's arguments: the weight's shape, M, how many distinct weights, and
    how many weights a pass (the bench's 4096 x 4096 runs 29 distinct copies a pass)."""
    p.add_argument("--K", type=int, default=K)
    p.add_argument("--N", type=int, default=N)
    p.add_argument("--M", type=int, default=1)
    p.add_argument("--copies", type=int, default=copies, help="distinct weights")
    p.add_argument("--min-pass-gemms", type=int, default=16,
                   help="weights a pass, duplicates of the copies where fewer (as the bench)")


def cell_inputs(args, dtype):
    """The cell's ONNX weight copies (group 128) and its activations, as the bench makes them."""
    qs = bench.onnx_copies(jax.random.key(0), args.K, args.N, 128, dtype, args.copies)
    x = jax.random.normal(jax.random.key(1), (args.M, args.K), jnp.float32).astype(dtype)
    return qs, x


def gap_summary(rows, top: int):
    """The idle time between consecutive kernels, by the kinds on either side: the
    GEMM's own kernel (the busiest name that is not a reduce kernel) or any other (a
    reduce, the checksum's fusions, the loop's step), so a per-call gap tells from a
    per-pass one; then the longest gaps. A gap is measured from the latest end so far,
    so a negative one is an overlap (a programmatic launch's early start). Nothing where
    the trace holds fewer than two kernels (no GPU: summarize said so)."""
    if len(rows) < 2:
        return
    gemm = next((name for name, _, _ in kernel_times(rows) if "reduce" not in name.lower()),
                None)

    def kind(name):
        return "GEMM" if name == gemm else "other"

    pairs = collections.defaultdict(list)
    gaps = []
    end, last = rows[0][0] + rows[0][1], rows[0][2]
    for ts, dur, name in rows[1:]:
        gap = ts - end
        pairs[(kind(last), kind(name))].append(gap)
        gaps.append((gap, last, name))
        end, last = max(end, ts + dur), name
    for (a, b), values in sorted(pairs.items()):
        print(f"  gaps {a:5s} -> {b:5s}: {len(values):4d}, "
              f"mean {sum(values) / len(values):7.2f} us, max {max(values):7.2f} us")
    for gap, a, b in sorted(gaps, reverse=True)[:top]:
        print(f"  gap {gap:7.2f} us after {a[:50]} before {b[:50]}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_cell_arguments(p, K=8192, N=28672, copies=2)
    p.add_argument("--passes", type=int, default=16)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--out", default="/tmp/bench_trace")
    args = p.parse_args(argv)
    dtype = jnp.float16
    qs, x = cell_inputs(args, dtype)
    gemms = 1 + args.passes * max(args.copies, args.min_pass_gemms)
    for impl, make in (("jax_marlin", bench.marlin_weights), ("dense", bench.dense_weight)):
        weights = bench.in_rotation(tuple(make(q, dtype) for q in qs), args.min_pass_gemms)
        loop = bench.LOOPS[impl]
        jax.block_until_ready(loop(x, weights, args.passes))
        start = time.perf_counter()
        jax.block_until_ready(loop(x, weights, args.passes))
        wall_us = (time.perf_counter() - start) * 1e6
        logdir = pathlib.Path(args.out) / impl
        logdir.mkdir(parents=True, exist_ok=True)
        with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
            jax.block_until_ready(loop(x, weights, args.passes))
        rows, _ = device_kernels(*trace_events(logdir))
        print(f"{args.K}x{args.N} M={args.M} {impl}: {gemms} GEMMs, untraced "
              f"{wall_us / gemms:.2f} us a GEMM")
        # The trace holds this one call (the untraced ones were waited for): all of its
        # kernels, its one-time stretches too (last_burst would cut them off).
        summarize(impl, rows, gemms, args.top, wall_us, unit="GEMM")
        gap_summary(rows, args.top)
        del weights


if __name__ == "__main__":
    main()
