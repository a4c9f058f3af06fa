"""The SM clock and the board's power while a command runs: whether a sustained GPU run
sat at the power cap, and at what clock.

    python3 tools/power_sample.py --out /tmp/smi.csv -- ./latency_probe values replays=56 \
        splits= 512x28672x8192

Samples ``nvidia-smi`` (one GPU, ``--gpu``) every ``--every-ms`` (50) in the background,
runs the command, then prints one line: the samples above ``--busy-watts`` (the GPU at
work), and of those the ones at the cap (the power within 3% of the board's limit), with
the median and lowest SM clock of each set. The H200 reports its power as a 1-second
average, so a run needs several seconds for its samples to reach the cap (with
``latency_probe``, replays=N near 20,800 / its us a GEMM makes each timing ~4 s), and the
samples of the second after it still count as busy: read the capped set. Under the 700 W
cap a 256-row GEMM's 64-call runs held ~690 W with the clock near 1470 MHz of 1980
(session 36 call D), so an A/B of two variants reads their clocks beside their times.
Without ``nvidia-smi`` the command still runs and the line says so. Exits with the
command's status (128 + N where a signal N ended it); a SIGTERM to this process stops the
command (SIGTERM, then SIGKILL after 5 s) and the sampler, and exits with 143.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys

QUERY = "clocks.sm,power.draw,power.limit"
CAP_SHARE = 0.97  # a sample within 3% of the limit is at the cap


def summarize(text: str, busy_watts: float = 200.0) -> dict:
    """``nvidia-smi --query-gpu=clocks.sm,power.draw,power.limit --format=csv,noheader,nounits``
    lines -> counts, and the clock (MHz) and power (W) figures of the busy samples and of
    those at the cap. Lines without a numeric clock and power (a header, "[N/A]", a cut last
    line) are skipped; a limit that is not a number ([N/A]) keeps the sample, never at the
    cap."""
    samples = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            continue
        try:
            clock, watts = float(fields[0]), float(fields[1])
        except ValueError:
            continue
        try:
            limit = float(fields[2])
        except ValueError:
            limit = float("inf")
        samples.append((clock, watts, limit))
    busy = [s for s in samples if s[1] > busy_watts]
    capped = [s for s in busy if s[1] >= CAP_SHARE * s[2]]
    out = {"samples": len(samples), "busy": len(busy), "capped": len(capped)}
    for name, chosen in (("busy", busy), ("capped", capped)):
        if chosen:
            clocks, watts = [s[0] for s in chosen], [s[1] for s in chosen]
            out.update({f"{name}_clock_median": statistics.median(clocks),
                        f"{name}_clock_min": min(clocks),
                        f"{name}_power_median": statistics.median(watts)})
    return out


def describe(summary: dict, busy_watts: float) -> str:
    line = f"{summary['samples']} samples, {summary['busy']} over {busy_watts:.0f} W"
    if summary["busy"]:
        line += (f" (SM clock median {summary['busy_clock_median']:.0f} MHz, power median "
                 f"{summary['busy_power_median']:.0f} W)")
    line += f", {summary['capped']} at the cap"
    if summary["capped"]:
        line += (f": SM clock median {summary['capped_clock_median']:.0f} MHz (lowest "
                 f"{summary['capped_clock_min']:.0f}), power median "
                 f"{summary['capped_power_median']:.0f} W")
    return line


def default_gpu() -> str:
    """The first GPU this process would see: CUDA_VISIBLE_DEVICES' first entry where it
    is an index or a UUID (GPU-..., MIG-...: nvidia-smi's -i takes both), else 0. (An index
    means the same GPU to CUDA and to nvidia-smi only in PCI order, CUDA_DEVICE_ORDER's.)"""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return first if first.isdigit() or first.startswith(("GPU-", "MIG-")) else "0"


def stop(proc: subprocess.Popen) -> None:
    """Ends `proc` if it still runs: SIGTERM (which timeout(1) passes on to its own
    command), then SIGKILL after 5 s; waited for either way, so no zombie is left."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_command(command) -> int:
    """The command's exit status (negative for a signal, as subprocess gives it). If this
    process is stopped meanwhile (SIGTERM raises SystemExit, below), the command is
    stopped too."""
    proc = subprocess.Popen(command)
    try:
        return proc.wait()
    finally:
        stop(proc)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the samples, as nvidia-smi wrote them")
    p.add_argument("--gpu", default=default_gpu(), help="nvidia-smi's -i")
    p.add_argument("--every-ms", type=int, default=50)
    p.add_argument("--busy-watts", type=float, default=200.0)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command given (put it after --)")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    smi = shutil.which("nvidia-smi")
    # A SIGTERM to this process alone (not its group, as timeout sends) still stops the
    # command and the sampler: the handler raises, and the finallys run.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        with out.open("w") as samples:
            sampler = None
            if smi is not None:
                sampler = subprocess.Popen(
                    [smi, "-i", args.gpu, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                     "-lms", str(args.every_ms)], stdout=samples, stderr=subprocess.DEVNULL)
            try:
                status = run_command(command)
            finally:
                if sampler is not None:
                    stop(sampler)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if smi is None:
        print("power_sample: no nvidia-smi here, nothing sampled", flush=True)
    else:
        print("power_sample: " + describe(summarize(out.read_text(), args.busy_watts),
                                          args.busy_watts), flush=True)
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main())
