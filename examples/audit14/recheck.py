"""Audit 14: re-run the grid's flagged cells on FRESH seeds ([2727, t], never used by quantile_grid14.py), so that a
flag is not the chance of one seed set, and so that an engine change made after reading the grid's CSV (22fc91f,
which fixed a flagged histogram cell) is checked on runs it was not tuned on.

    AUDIT14_CODE=<commit> PYTHONPATH=/tmp/code_<commit> nice python examples/audit14/recheck.py [reps] [which]
        -> recheck_<commit>_<which>.csv

``which``: 'searches' (every search cell of grid14_71ea9e8.csv under nominal - 2 points at some confidence) or
'histogram' (every cell where the planner chose the histogram and it was under at some confidence) or 'all'.
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import quantile_grid14 as grid

HEAD = 2727


def flagged(which: str) -> pd.DataFrame:
    df = pd.read_csv(HERE / "grid14_71ea9e8.csv")
    df = df[df["refused"].isna()]
    under = (df["cov80"] < 0.78) | (df["cov90"] < 0.88) | (df["cov95"] < 0.93) | (df["cov99"] < 0.97)
    if which == "searches":
        return df[under & df["mechanism"].isin(grid.SEARCHES)]
    if which == "histogram":
        return df[under & (df["mechanism"] == "histogram")]
    return df[under]


def main(reps: int = 400, which: str = "all") -> None:
    code = os.environ.get("AUDIT14_CODE", "head")
    rows = []
    cache: dict[int, dict] = {}
    for _, r in flagged(which).iterrows():
        n, name, tau, eps, mech = int(r["n"]), r["shape"], float(r["tau"]), float(r["eps"]), r["mechanism"]
        shape = cache.setdefault(n, grid.shapes(n))[name]
        c = grid.candidates(shape, tau)[mech]
        row = {"shape": name, "n": n, "eps": eps, "tau": tau, "mechanism": mech, "chosen": r["chosen"],
               "seeds": f"[{HEAD}, t]", "reps": reps, **grid.run_cell(c, shape, tau, eps, reps, head=HEAD)}
        rows.append(row)
        print({k: row[k] for k in ("shape", "n", "eps", "tau", "mechanism", "cov80", "cov90", "cov95", "cov99",
                                   "width95")}, flush=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(HERE / f"recheck_{code}_{which}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400, sys.argv[2] if len(sys.argv) > 2 else "all")
