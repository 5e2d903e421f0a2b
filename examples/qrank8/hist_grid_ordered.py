"""qrank8: examples/qrank6/hist_grid.py's audit14 grid in another cell order, so that a run cut for time still holds
whole groups of cells. Every cell is run exactly as hist_grid.py runs it (same function, seeds [1414, t] per cell,
t = 0..REPS-1), only the order of the cells differs; compare.py matches cells by (shape, n, ε, τ).

Order (widths = coins per bin, from examples/qrank7/audit14_compare.csv): bins of 2-8 coins first (the cells
0d1235b's zoom_error change targets), then wider bins, then bins of one coin (never zoomed; runs identical at all
versions).

    cd /tmp/qr8; PYTHONPATH=/tmp/qr8_head python /work/main/examples/qrank8/hist_grid_ordered.py REPS OUT.pkl
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "qrank6"))

import hist_grid  # noqa: E402  (examples/qrank6/hist_grid.py, which qrank7 ran too)


def width_of() -> dict:
    with open(HERE.parent / "qrank7" / "audit14_compare.csv") as fh:
        return {(r["shape"], int(r["n"]), float(r["eps"]), float(r["tau"])): (int(r["width"]) if r["width"] else 0)
                for r in csv.DictReader(fh)}


def ordered():
    w = width_of()
    cells = list(_original())
    rank = lambda c: (0 if 2 <= w.get((c[1], c[0], c[3], c[2]), 0) <= 8 else
                      1 if w.get((c[1], c[0], c[3], c[2]), 0) > 8 else 2)
    return sorted(cells, key=rank)   # stable: grid order within a group


_original = hist_grid.audit14_cells
hist_grid.audit14_cells = ordered

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "audit14", *sys.argv[1:]]
    hist_grid.main()
