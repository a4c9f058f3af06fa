"""The SM clock and the board's power while a command runs: whether a sustained GPU run
sat at the power cap, and at what clock.

    python3 tools/power_sample.py --out /tmp/smi.csv -- ./latency_probe values 512x4096x4096

Samples ``nvidia-smi`` every ``--every-ms`` (50) in the background, runs the command, then
prints one line: the samples above ``--busy-watts`` (the GPU at work, not between runs),
their median and lowest SM clock and their median and highest power. Under the H200's
700 W cap a 256-row GEMM's 64-call runs held ~691 W with the clock at ~1470 MHz of 1980
(session 36 call D): what a kernel gains there follows the energy it saves, so an A/B of
two variants reads their clocks beside their times. Without ``nvidia-smi`` the command
still runs and the line says so. Exits with the command's status.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys

QUERY = "clocks.sm,power.draw"


def summarize(text: str, busy_watts: float = 200.0) -> dict:
    """``nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits`` lines
    -> counts and the busy samples' clock (MHz) and power (W) figures. Lines that are not
    two numbers (a header, "[N/A]", a cut last line) are skipped."""
    samples = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 2:
            continue
        try:
            samples.append((float(fields[0]), float(fields[1])))
        except ValueError:
            continue
    busy = [s for s in samples if s[1] > busy_watts]
    out = {"samples": len(samples), "busy": len(busy)}
    if busy:
        clocks, watts = [s[0] for s in busy], [s[1] for s in busy]
        out.update(clock_median=statistics.median(clocks), clock_min=min(clocks),
                   power_median=statistics.median(watts), power_max=max(watts))
    return out


def describe(summary: dict, busy_watts: float) -> str:
    line = f"{summary['samples']} samples, {summary['busy']} over {busy_watts:.0f} W"
    if summary["busy"]:
        line += (f": SM clock median {summary['clock_median']:.0f} MHz "
                 f"(lowest {summary['clock_min']:.0f}), power median "
                 f"{summary['power_median']:.0f} W (highest {summary['power_max']:.0f})")
    return line


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the samples, as nvidia-smi wrote them")
    p.add_argument("--every-ms", type=int, default=50)
    p.add_argument("--busy-watts", type=float, default=200.0)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command given (put it after --)")
    smi = shutil.which("nvidia-smi")
    with open(args.out, "w") as samples:
        sampler = None
        if smi is not None:
            sampler = subprocess.Popen(
                [smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                 "-lms", str(args.every_ms)], stdout=samples, stderr=subprocess.DEVNULL)
        try:
            status = subprocess.call(command)
        finally:
            if sampler is not None:
                sampler.terminate()
                sampler.wait()
    if smi is None:
        print("power_sample: no nvidia-smi here, nothing sampled", flush=True)
    else:
        with open(args.out) as samples:
            print("power_sample: " + describe(summarize(samples.read(), args.busy_watts),
                                              args.busy_watts), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
