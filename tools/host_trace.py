"""Where the host's time goes in one call of the bench's layer stack, by traced event.

    python3 tools/host_trace.py [--layers 32] [--shape 4096] [--calls 5] [--top 30]

tools/stack_dispatch.py (session 33, call C) read one 32-layer call of the 4-bit stack
taking the host 412 us to dispatch against dense's 222, and 880 us until its result was
ready against 677, while chained calls ran 7.6 us a layer of GPU time. This traces
``--calls`` single calls of each stack (each waited for, as ``stack_dispatch``'s
``single``) with jax.profiler, command buffers kept, and prints for each impl:

- the host's events by name (XLA's and the runtime's TraceMe annotations, the CUDA API
  calls CUPTI records), inclusive us a call and count a call, busiest first: what the
  4-bit call does on the host that dense's does not;
- for each call, from the start of its dispatch (jaxlib's ``PjitFunction``) to the GPU's
  first kernel, the GPU's busy time, and to its last kernel's end: whether the GPU
  waits for the host before it starts or between kernels.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys
import time

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_enable_command_buffers_during_profiling=true").strip()

import jax  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import decode_trace as dt  # noqa: E402  (its trace parsing)
import stack_dispatch as sd  # noqa: E402  (the stack's operands)

from jax_marlin import bench  # noqa: E402


def host_events(events, processes):
    """(start us, duration us, name) of the complete events on the host's lines."""
    gpu = {pid for pid, name in processes.items() if "GPU" in name}
    # By start, the longer first: an outer event before the ones it holds.
    return sorted(((float(e["ts"]), float(e.get("dur", 0.0)), e.get("name", "?"))
                   for e in events if e.get("ph") == "X" and e.get("pid") not in gpu),
                  key=lambda t: (t[0], -t[1]))


def call_spans(host):
    """Each call's dispatch on the host: jaxlib's outermost ``PjitFunction(...)`` event
    (the trace nests two a call), in time order."""
    spans = []
    for e in host:
        if e[2].startswith("PjitFunction") and (not spans or e[0] >= sum(spans[-1][:2])):
            spans.append(e)
    return spans


def report(impl, logdir: pathlib.Path, calls: int, top: int, dispatch_us):
    events, processes, threads = dt.trace_events(logdir)
    host = host_events(events, processes)
    kernels, lines = dt.device_kernels(events, processes, threads)
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for _, dur, name in host:
        by_name[name][0] += 1
        by_name[name][1] += dur
    print(f"\n== {impl}: host events a call (inclusive us, count), {calls} calls; "
          f"dispatch under the profiler {dispatch_us:.1f} us a call ==")
    for name, (n, total) in sorted(by_name.items(), key=lambda t: -t[1][1])[:top]:
        print(f"  {total / calls:10.1f} us {n / calls:8.1f} x  {name[:110]}")
    if not kernels:
        print(f"  no GPU kernels in the trace; lines: {lines}")
        return
    print("  per call: host span, first kernel after the host's start, GPU busy, last end")
    spans = call_spans(host)
    for i, (ts, dur, name) in enumerate(spans):
        # A call's kernels: those that start before the next call's dispatch does.
        until = spans[i + 1][0] if i + 1 < len(spans) else ts + dur + 5000.0
        mine = [k for k in kernels if ts <= k[0] < until]  # (the last call: 5 ms)
        if not mine:
            print(f"    {name[:40]:40s} host {dur:8.1f} us: no kernel before the next call")
            continue
        first = mine[0][0] - ts
        last = max(k[0] + k[1] for k in mine) - ts
        print(f"    {name[:40]:40s} host {dur:8.1f} us, first kernel at {first:8.1f}, "
              f"{len(mine)} kernels busy {dt.busy_us(mine):8.1f}, last end {last:8.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--shape", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--top", type=int, default=30)
    sd.add_impls_argument(parser)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/host_trace"))
    args = parser.parse_args(argv)
    K = N = args.shape
    x, weights = sd.stack_operands(K, args.layers)
    print(f"backend {jax.default_backend()}; {args.layers} layers of {K}x{N}, M = 1")
    for impl in args.impls:
        stack = bench.chained(sd.OPS[impl])
        for _ in range(3):
            jax.block_until_ready(stack(x, weights[impl]))
        logdir = args.out / impl
        logdir.mkdir(parents=True, exist_ok=True)
        dispatch = []
        with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
            for _ in range(args.calls):
                start = time.perf_counter()
                y = stack(x, weights[impl])
                dispatch.append(time.perf_counter() - start)
                jax.block_until_ready(y)
                time.sleep(0.002)  # calls apart in the trace
        report(impl, logdir, args.calls, args.top, 1e6 * sorted(dispatch)[len(dispatch) // 2])


if __name__ == "__main__":
    main()
