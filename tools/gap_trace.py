"""The idle time between back-to-back custom calls inside XLA's command buffer, per kind
of call: which property of our kernels makes the gaps (session 13: 3.2 us between our
4096 x 4096 GEMMs in the bench's loop, 1.3 us between XLA's own dots, ~1 us in a CUDA
graph of our own; the nesting of a traced call as a child graph costs nothing).

    python3 tools/gap_trace.py --K 4096 --N 4096 --M 1 --out /tmp/gap_trace

Each case is the bench's timed loop (``jax_marlin.bench.make_loop``: passes over 16
weights, a checksum a pass) around one kind of call, traced once with ``jax.profiler``
(CUPTI, command buffers kept):
- ``auto``: the planned grid (4096 x 4096 at M = 1: the tile split, clusters of 2);
- ``split_k=-1``: the tile split without clusters; ``-2``: with clusters of 2;
- ``split_k=3``: stream-K cut 3 ways, and its reduce kernel;
- ``dequantize``: the dense path's CUDA dequantization, a custom call whose kernel has
  neither clusters nor large shared memory;
- ``dense``: ``jnp.dot`` of the dequantized weight (XLA's own kernel).

For each, the kernel that runs once a call: its mean duration, and the mean gap from its
end to the start of the next GEMM's first kernel (``gap``), over consecutive calls in a
pass. If the gaps follow the clusters or the shared memory, the launch attributes are the
cause; if every custom call has them, it is how XLA runs a custom call.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# bench_trace sets XLA_FLAGS for profiling with the command buffers kept, before jax runs.
from bench_trace import add_cell_arguments, cell_inputs  # noqa: E402
from decode_trace import device_kernels, kernel_times, last_burst, trace_events  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jax_marlin import bench, ops  # noqa: E402


def fused(split_k):
    return lambda x, w: ops._bind(x, w, None, impl="fused", split_k=split_k)


def dequantize(x, w):
    # The weight is the call's only output; x enters only through the checksum's nudge,
    # so a tiny product keeps the call inside the loop without another GEMM.
    return ops._dequantize_cuda_weights(w, x.dtype)[:1, :1] * x[:1, :1]


# name: (the op on (x, int4 weights), part of the name of the kernel run once a call;
# None: our GEMM kernel, --kernel)
CASES = {
    "auto": (bench.op_marlin("auto"), None),
    "split_k=-1": (fused(-1), None),
    "split_k=-2": (fused(-2), None),
    "split_k=3": (fused(3), None),
    "dequantize": (dequantize, "dequant"),
}


def gaps_between(rows, name_part):
    """Mean duration of the kernels whose name holds `name_part`, and the mean idle time
    from the end of one to the start of the next kernel that is not a checksum fusion
    (the next call's first kernel), over consecutive calls."""
    calls = [i for i, r in enumerate(rows) if name_part in r[2]]
    if not calls:
        return None
    durations = [rows[i][1] for i in calls]
    gaps = []
    for i in calls:
        j = i + 1
        while j < len(rows) and "fusion" not in rows[j][2] and name_part not in rows[j][2]:
            j += 1  # a reduce kernel of the same call
        if j < len(rows) and name_part in rows[j][2]:
            end = max(ts + d for ts, d, _ in rows[i:j])
            gaps.append(rows[j][0] - end)
    mean_gap = statistics.mean(gaps) if gaps else float("nan")
    return statistics.mean(durations), mean_gap, len(calls), len(gaps)


def pass_boundaries(rows, name_part):
    """The time a pass's checksum takes between two GEMMs: the mean idle-or-busy span
    from the end of a pass's last call to the start of the next pass's first, the names
    of the kernels run in it, and the trace's span from the first call to the last
    kernel's end divided by the calls (the per-GEMM cost the trace shows)."""
    calls = [i for i, r in enumerate(rows) if name_part in r[2]]
    spans, names = [], set()
    for a, b in zip(calls, calls[1:]):
        between = [r for r in rows[a + 1:b] if "fusion" in r[2]]
        if between:
            spans.append(rows[b][0] - (rows[a][0] + rows[a][1]))
            names.update(r[2][:40] for r in between)
    total = max(ts + d for ts, d, _ in rows[calls[0]:]) - rows[calls[0]][0]
    mean = statistics.mean(spans) if spans else float("nan")
    return mean, sorted(names), total / len(calls)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_cell_arguments(p, K=4096, N=4096, copies=16)
    p.add_argument("--passes", type=int, default=4)
    p.add_argument("--wall-passes", type=int, default=64)
    p.add_argument("--out", default="/tmp/gap_trace")
    p.add_argument("--cases", default=",".join([*CASES, "dense"]),
                   help="which of the cases, comma-separated")
    p.add_argument("--kernel", default="stream_gemm",
                   help="the name part of our kernel run once a call (wgmma_gemm past M = 16)")
    args = p.parse_args(argv)
    dtype = jnp.float16
    qs, x = cell_inputs(args, dtype)
    marlin = bench.in_rotation(tuple(bench.marlin_weights(q, dtype) for q in qs),
                               args.min_pass_gemms)
    dense = bench.in_rotation(tuple(bench.dense_weight(q, dtype) for q in qs),
                              args.min_pass_gemms)
    chosen = args.cases.split(",")
    cases = [(name, bench.make_loop(op), marlin, kernel or args.kernel)
             for name, (op, kernel) in CASES.items() if name in chosen]
    if "dense" in chosen:
        cases.append(("dense", bench.LOOPS["dense"], dense, "gemm"))
    print(f"{args.K}x{args.N} M={args.M}: {len(marlin)} weights a pass, {args.passes} passes")
    for name, loop, weights, kernel in cases:
        jax.block_until_ready(loop(x, weights, args.passes))
        jax.block_until_ready(loop(x, weights, args.passes))
        logdir = pathlib.Path(args.out) / name.replace("=", "")
        logdir.mkdir(parents=True, exist_ok=True)
        with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
            jax.block_until_ready(loop(x, weights, args.passes))
        rows, _ = device_kernels(*trace_events(logdir))
        burst = last_burst(rows, 200.0)
        found = gaps_between(burst, kernel)
        if found is None:
            # Name the trace's busiest kernels, so the next run can ask for the right one.
            print(f"  {name:12s} no kernel named *{kernel}* in the trace; busiest: "
                  + "; ".join(f"{n} {t:.0f} us" for n, _, t in kernel_times(burst, 60)[:4]))
            continue
        duration, gap, calls, n = found
        # Fewer calls than 1 + passes x weights: XLA hoisted some out of the loop.
        print(f"  {name:12s} {calls:4d} calls (of {1 + args.passes * len(weights)}), kernel "
              f"{duration:7.2f} us, gap to the next call {gap:5.2f} us ({n} gaps)")
        boundary, names, per_call = pass_boundaries(burst, kernel)
        # The bench's own measure of the same loop: wall time of a long call per GEMM.
        passes = args.wall_passes
        jax.block_until_ready(loop(x, weights, passes))  # compiles this trip count
        wall = bench.median_call_s(lambda: loop(x, weights, passes), 5)
        print(f"  {'':12s} trace span a call {per_call:6.2f} us; between passes "
              f"{boundary:6.2f} us ({', '.join(names)}); wall a GEMM over "
              f"{passes} passes {wall * 1e6 / (1 + passes * len(weights)):6.2f} us")


if __name__ == "__main__":
    main()
