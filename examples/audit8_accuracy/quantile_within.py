"""Audit 8: does the shown rank-error prediction (±1.96σ) of the candidate the planner now picks on small integer
domains (NaiveNBS, after BayeSS's weight by domain size) hold on smooth shapes? Share of runs whose rank error is
within ±1.96σ, for NaiveNBS and BayeSS (forced), 400 runs per cell.

    nice python examples/audit8_accuracy/quantile_within.py [reps]   -> quantile_within.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import regret_shapes as rs

CELLS = [(31, 20_000, 0.5, 0.5, "normal"), (51, 10_000, 1.0, 0.5, "lognormal (grid h)"),
         (51, 2_000, 2.0, 0.25, "lognormal (grid h)"), (101, 10_000, 1.0, 0.5, "uniform"),
         (501, 50_000, 2.0, 0.1, "bimodal (grid m)"), (501, 50_000, 2.0, 0.1, "uniform")]


def main(reps: int = 400) -> None:
    rows = []
    for coins, n, eps, tau, shape in CELLS:
        x = rs.quantile_shapes(coins, n)[shape]
        res = rs.run_candidates(x, coins, eps, tau, reps, only=("bayess", "naive_nbs"))
        for m, (rms, within, sigma, q95) in res.items():
            rows.append({"B": coins, "n": n, "eps": eps, "tau": tau, "shape": shape, "mechanism": m, "reps": reps,
                         "rms": round(rms, 5), "shown_196sigma": round(1.96 * sigma, 5), "within": round(within, 4),
                         "sigma_multiple_for_95": round(q95 / sigma, 3)})
            print(rows[-1], flush=True)
    with open(HERE / "quantile_within.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
