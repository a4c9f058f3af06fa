"""Merges bench CSVs into docs/perf/h200.csv and redraws h200.png (session 37).

Each new row replaces h200.csv's row of the same (K, N, M, dtype, group, impl); rows of
new cells are appended. A merged row's note names its call ("session 37 call G", from
the path's session and call folders), as the earlier merges' rows do. h200.csv is a merge of several calls (docs/perf/NOTES.md says
which rows come from where).

    python3 docs/perf/session37/merge_h200.py docs/perf/session37/callG/bench.csv ...
"""

import csv
import re
import sys

from jax_marlin import bench

KEY = ("K", "N", "M", "dtype", "group", "impl")


def main(paths):
    table = "docs/perf/h200.csv"
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    index = {tuple(r[k] for k in KEY): i for i, r in enumerate(rows)}
    replaced = added = 0
    for path in paths:
        session, call = re.search(r"session(\d+)/call(\w)", path).groups()
        source = f"session {session} call {call}"
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                r["note"] = "; ".join(n for n in (r["note"], source) if n)
                key = tuple(r[k] for k in KEY)
                if key in index:
                    rows[index[key]] = r
                    replaced += 1
                else:
                    index[key] = len(rows)
                    rows.append(r)
                    added += 1
    with open(table, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=bench.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    typed = [dict(r, M=int(r["M"]), group=int(r["group"]),
                  speedup_vs_dense=float(r["speedup_vs_dense"] or 0)) for r in rows]
    bench.plot(typed, "docs/perf/h200.png", 128)
    print(f"{table}: {replaced} rows replaced, {added} added, {len(rows)} in all")


if __name__ == "__main__":
    main(sys.argv[1:])
