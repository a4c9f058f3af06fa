"""Where a decode step's time goes on the GPU: kernels and the gaps between them.

    python3 tools/decode_trace.py --batch 1 --steps 16 --out /tmp/trace

Builds examples/decode.py's model (its GPU defaults unless given), traces one jitted
generate call of the fp16 model and one of the 4-bit model with ``jax.profiler``
(CUPTI: device-side kernel timestamps, which the device machine has where it has no
Nsight Systems), and prints for each: the GPU span of the timed call, the time
kernels ran, the idle time between them, and the kernels that took the most time,
grouped by name. The decode example's 1.88x at batch 1 sits on top of ~300 us a
token, four GEMMs a layer (docs/perf/NOTES.md): this says how much of it is GEMM,
how much the other kernels, and how much no kernel at all.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import pathlib
import sys
import time

# Under a profiler XLA runs a program op by op unless told to keep its command
# buffers (CUDA graphs): without this the trace would time another execution than
# the benchmark's, with more gaps. Set before jax starts its backend.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_enable_command_buffers_during_profiling=true").strip()

import jax  # noqa: E402
from flax import nnx  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import decode  # noqa: E402  (examples/decode.py)

import jax_marlin.flax as jmf  # noqa: E402


def trace_events(logdir: pathlib.Path):
    """The Chrome-format events of the newest perfetto trace under `logdir`, the process
    names by pid and the thread names by (pid, tid)."""
    path = max(logdir.rglob("perfetto_trace.json.gz"), key=lambda p: p.stat().st_mtime)
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    meta = [e for e in events if e.get("ph") == "M"]
    processes = {e["pid"]: e.get("args", {}).get("name", "")
                 for e in meta if e.get("name") == "process_name"}
    threads = {(e["pid"], e.get("tid")): e.get("args", {}).get("name", "")
               for e in meta if e.get("name") == "thread_name"}
    return events, processes, threads


def device_kernels(events, processes, threads):
    """(start us, duration us, name) of every kernel: the complete events on the GPU
    process's stream lines (its other lines, XLA modules and ops, span the same kernels).
    Also the GPU's line names, to show what the trace held when nothing matched."""
    gpu = {pid for pid, name in processes.items() if "GPU" in name}
    lines = {key: name for key, name in threads.items() if key[0] in gpu}
    streams = {key for key, name in lines.items() if name.startswith("Stream")}
    rows = [(float(e["ts"]), float(e.get("dur", 0.0)), e.get("name", "?"))
            for e in events
            if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in streams]
    return sorted(rows), sorted(set(processes.values())) + sorted(set(lines.values()))


def last_burst(rows, gap_us: float):
    """The kernels after the last idle stretch longer than `gap_us`: the timed call."""
    start, end = 0, None
    for i, (ts, dur, _) in enumerate(rows):
        if end is not None and ts - end > gap_us:
            start = i
        end = max(end or 0.0, ts + dur)
    return rows[start:]


def busy_us(rows):
    """The time at least one event ran: the union of the intervals (streams overlap)."""
    total, end = 0.0, None
    for ts, dur, _ in rows:  # sorted by start
        if end is None or ts >= end:
            total += dur
            end = ts + dur
        elif ts + dur > end:
            total += ts + dur - end
            end = ts + dur
    return total


def summarize(label, rows, steps, top, wall_us, unit="token"):
    if not rows:
        print(f"{label}: no GPU kernels in the trace")
        return
    span = max(ts + dur for ts, dur, _ in rows) - rows[0][0]
    busy = busy_us(rows)
    copies = [r for r in rows if "memcpy" in r[2].lower() or "memset" in r[2].lower()]
    print(f"{label}: {len(rows)} events ({len(copies)} copies/sets, {busy_us(copies):.1f} us) "
          f"over {span:.1f} us ({span / steps:.1f} us a {unit}; the same call untraced "
          f"{wall_us:.1f} us wall): busy {busy:.1f} us, idle {span - busy:.1f} us "
          f"({(span - busy) / max(len(rows) - 1, 1):.2f} us a gap)")
    for name, n, d in kernel_times(rows)[:top]:
        print(f"  {d:10.1f} us {n:6d} x {d / n:8.2f} us  {name[:100]}")


def kernel_times(rows, width=None):
    """The kernels of `rows` by name (its first `width` characters, if given), busiest
    first: (name, launches, total us)."""
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for _, d, name in rows:
        by_name[name[:width]][0] += 1
        by_name[name[:width]][1] += d
    return sorted(((name, n, d) for name, (n, d) in by_name.items()), key=lambda t: -t[2])


def traced(model, batch, steps, logdir: pathlib.Path):
    """Compiles and warms up outside the trace, times one call untraced, then traces one.
    Returns the trace's events, processes and threads, and the untraced wall time (us)."""
    generate, args = decode.generator(model, batch, steps)
    jax.block_until_ready(generate(*args))
    start = time.perf_counter()
    jax.block_until_ready(generate(*args))
    wall_us = (time.perf_counter() - start) * 1e6
    logdir.mkdir(parents=True, exist_ok=True)
    with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
        jax.block_until_ready(generate(*args))
    return (*trace_events(logdir), wall_us)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--gap-us", type=float, default=2000.0,
                        help="idle GPU time that separates the traced call from anything before")
    parser.add_argument("--top", type=int, default=14)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/decode_trace"))
    args = parser.parse_args(argv)
    defaults = decode.CPU_DEFAULTS if jax.default_backend() == "cpu" else decode.GPU_DEFAULTS
    dims = dict(defaults, **({"layers": args.layers} if args.layers else {}))
    cfg = decode.Config(**dims, max_len=args.steps)
    model = decode.Decoder(cfg, nnx.Rngs(0))
    print(f"backend {jax.default_backend()}; {cfg}; batch {args.batch}, {args.steps} steps")
    for label in ("fp16", "4-bit"):
        if label == "4-bit":
            jmf.quantize_model(model, bits=4, block_size=128)
        *trace, wall_us = traced(model, args.batch, args.steps, args.out / label)
        rows, lines = device_kernels(*trace)
        if not rows:
            print(f"{label}: processes and GPU lines in the trace: {lines}")
        summarize(label, last_burst(rows, args.gap_us), args.steps, args.top, wall_us)


if __name__ == "__main__":
    main()
