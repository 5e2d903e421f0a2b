"""Audit 9's held-out cells where the planner chose a one-round release (hierarchical / histogram), re-run with the
same seeds: coverage of ±z·σ alone (``before``, what these releases showed) and of the widened rank error.

    nice python examples/qrank2/one_round_check.py   -> one_round_check.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "audit9"))

import quantile_heldout as h


def main() -> None:
    with open(HERE.parent / "audit9" / "quantile_heldout.csv") as fh:
        cells = [r for r in csv.DictReader(fh) if r["chosen"] == "True" and r["mechanism"] in ("hierarchical", "histogram")]
    rows = []
    for r in cells:
        n, eps, tau = int(r["n"]), float(r["eps"]), float(r["tau"])
        coins, x = h.shapes(n)[r["shape"]]
        out = h.run(h.candidates(coins, tau)[r["mechanism"]], x, coins, tau, eps, 200)
        rows.append({k: r[k] for k in ("shape", "n", "eps", "tau", "mechanism")} | out)
        print(rows[-1], flush=True)
    with open(HERE / "one_round_check.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
