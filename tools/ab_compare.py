"""The A/B rounds of tools/ab_variants.sh side by side: one line per benchmark cell.

    python tools/ab_compare.py OUT main variant [...]

reads OUT/<variant>/bench.csv (round 1) and bench_r2.csv, ... (later rounds), and prints,
per jax_marlin cell (K, N, M, dtype, group), every variant's time in each round and its
mean. The first variant is the reference. Its spread over rounds is this call's noise
between processes. A difference larger than that spread is worth reading, and one
within it is not.
"""

import csv
import pathlib
import statistics
import sys


def _rounds(out: pathlib.Path, variant: str):
    files = [out / variant / "bench.csv"]
    files += sorted((out / variant).glob("bench_r*.csv"), key=lambda p: int(p.stem[7:]))
    rounds = []
    for path in files:
        if not path.exists():
            continue
        with path.open() as f:
            rounds.append({(r["K"], r["N"], r["M"], r["dtype"], r["group"]): float(r["us"])
                           for r in csv.DictReader(f) if r["impl"] == "jax_marlin"})
    return rounds


def compare(out, variants):
    """Lines of text: a header, then one line per cell the first variant measured."""
    out = pathlib.Path(out)
    data = {v: _rounds(out, v) for v in variants}
    ref = variants[0]
    cells = sorted({c for r in data[ref] for c in r},
                   key=lambda c: (int(c[0]), int(c[1]), c[3], int(c[4]), int(c[2])))
    lines = ["K x N, M, dtype, group: us per round (mean) for " + ", ".join(variants)
             + f"; spread = {ref}'s max - min over rounds"]
    for cell in cells:
        parts, means = [], {}
        for v in variants:
            times = [r[cell] for r in data[v] if cell in r]
            if not times:
                parts.append(f"{v} -")
                continue
            means[v] = statistics.fmean(times)
            parts.append(f"{v} " + " / ".join(f"{t:.1f}" for t in times) + f" ({means[v]:.1f})")
        ref_times = [r[cell] for r in data[ref] if cell in r]
        spread = max(ref_times) - min(ref_times) if len(ref_times) > 1 else float("nan")
        K, N, M, dtype, group = cell
        lines.append(f"{K}x{N} M={M} {dtype} g{group}: " + "; ".join(parts)
                     + f"; spread {spread:.1f}")
    return lines


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    print("\n".join(compare(sys.argv[1], sys.argv[2:])))
