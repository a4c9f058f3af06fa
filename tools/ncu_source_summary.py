"""Where the warps of one kernel wait, from Nsight Compute's per-instruction samples.

    python tools/ncu_source_summary.py ncu_source_1.csv [--top 20]

Reads the CSV that ``run_ncu_source`` (tools/gpu_probes.sh) exports with
``ncu --page source --csv --print-source sass`` and prints the share of every
warp-stall reason over the whole kernel and the instructions holding the most
samples, with their SASS. The raw CSV is ~1 MB per kernel; this summary is what
docs/perf keeps.
"""

import argparse
import csv


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--context", type=int, default=0,
                        help="also print this many SASS lines either side of the three "
                             "busiest instructions (what a wait loop's branch waits on)")
    parser.add_argument("--per", type=float, default=0,
                        help="also print the hot loop's executed instructions by opcode, "
                             "divided by this (e.g. blocks x warps x stages: a warp-stage)")
    args = parser.parse_args()
    with open(args.csv, newline="") as f:
        rows = list(csv.reader(f))
    kernel = rows[0][1] if len(rows[0]) > 1 else "?"
    header, data = rows[1], rows[2:]
    samples = header.index("Warp Stall Sampling (All Samples)")
    source = header.index("Source")

    def count(row, col):
        try:
            return int(float(row[col] or 0))
        except ValueError:
            return 0

    reasons = {h[len("stall_"):]: j for j, h in enumerate(header)
               if h.startswith("stall_") and "Not Issued" not in h}
    totals = {name: sum(count(r, j) for r in data) for name, j in reasons.items()}
    all_samples = sum(totals.values()) or 1
    print(f"kernel: {kernel}")
    print(f"{len(data)} SASS instructions, {all_samples} stall samples")
    print("stall reasons (share of samples): " + ", ".join(
        f"{name} {v / all_samples:.2f}" for name, v in sorted(totals.items(), key=lambda x: -x[1])
        if v / all_samples >= 0.01))
    top = sorted(range(len(data)), key=lambda i: -count(data[i], samples))[:args.top]
    print(f"top {len(top)} instructions by samples (index in the kernel's SASS, samples, share):")
    for i in sorted(top):
        n = count(data[i], samples)
        print(f"  {i:5d} {n:6d} {n / all_samples:5.1%}  {data[i][source].strip()}")
    for i in top[:3] if args.context else []:
        print(f"around {i} (index, samples, SASS):")
        for j in range(max(0, i - args.context), min(len(data), i + args.context + 1)):
            mark = ">" if j == i else " "
            print(f" {mark}{j:5d} {count(data[j], samples):6d}  {data[j][source].strip()}")
    if args.per:
        print_mix(data, header.index("Instructions Executed"), source, count, args.per)


def print_mix(data, executed, source, count, per):
    """The executed warp instructions of the hottest code (every instruction run at least
    a fifth as often as the most run one: the mainloop) by opcode, over `per`; predicated-
    off `@!PT` instructions (ptxas's padding, still issued) apart."""
    most = max(count(r, executed) for r in data) or 1
    mix = {}
    for r in data:
        n = count(r, executed)
        if n < most / 5:
            continue
        words = r[source].split()
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        op = ("@!PT " if words[0] == "@!PT" else "") + op.split(".")[0]
        mix[op] = mix.get(op, 0) + n
    total = sum(mix.values())
    print(f"hot loop: {total / per:.1f} executed a unit ({per:g} units; "
          f"{total / max(1, sum(count(r, executed) for r in data)):.1%} of the kernel's)")
    print("  " + " ".join(f"{op} {n / per:.2f}" for op, n in sorted(mix.items(), key=lambda x: -x[1])))


if __name__ == "__main__":
    main()
