"""Confirmation of ratio_grid.py's cells where most answers are flagged (the unflagged ones, just above the flag,
are the ones the selection-aware interval is for, and ratio_grid's 300 releases leave only 2-9 of them): the same
cells with many more releases, and seeds not used by the grid. Rule fixed before the run: an unflagged coverage more
than 2 points below nominal with >= 100 unflagged answers is a defect.

    nice python examples/audit9b/ratio_confirm.py   -> examples/audit9b/ratio_confirm.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ratio_grid import CONF, judge, nullable

CELLS = [("collision", "hi", 500, 0.8, 1.0, 6000), ("collision", "hi", 500, 0.95, 2.0, 20_000),
         ("collision", "hi", 5000, 0.95, 0.5, 6000), ("collision", "twopoint", 500, 0.8, 1.0, 6000),
         ("collision", "uniform", 500, 0.8, 1.0, 6000), ("split", "hi", 500, 0.8, 2.0, 6000),
         ("split", "hi", 5000, 0.95, 1.0, 6000)]


def main() -> None:
    rows = []
    for k, (path, shape, n, share, eps, runs) in enumerate(CELLS):
        parts = nullable(path, shape, n, share, eps, runs, np.random.default_rng([77, k]))
        for c in CONF:
            rows.append({"cell": f"nullable {path} {shape} null={share} n={n} eps={eps}", "confidence": c,
                         **judge(parts, c)})
            print(rows[-1], flush=True)
    with open(Path(__file__).with_name("ratio_confirm.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
