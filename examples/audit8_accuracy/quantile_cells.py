"""Audit 8: the quantile planner's BayeSS weight by domain size (ldpql.planner.quantile.bayess_weight) on cells
its fit did not use (coin counts B below and between its grid, τ other than 0.5, other ε and n). Per cell and
shape: every local candidate's RMS rank error (forced, the executor's protocols, examples/regret_shapes.py's
run_candidates), the planner's choice with the B weight (now) and without it (before, W_BAYESS flat), their
regrets against the best candidate, and the share of runs within the chosen candidate's shown ±1.96σ.

    nice python examples/audit8_accuracy/quantile_cells.py [reps]   -> quantile_cells.csv (reps = 200: minutes)
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import quantile_grid as qg
import regret_shapes as rs

from ldpql.planner import quantile as planner

CELLS = [(51, 10_000, 1.0, 0.5), (51, 2_000, 2.0, 0.25), (31, 20_000, 0.5, 0.5), (2_001, 3_000, 2.0, 0.25),
         (501, 50_000, 2.0, 0.1), (5_001, 2_000, 1.0, 0.75), (200_001, 10_000, 1.0, 0.9)]
SHAPES = ("uniform", "normal", "lognormal (grid h)", "bimodal (grid m)")


def choice(coins: int, tau: float, eps: float, n: int, flat: bool) -> str:
    cands = [c for c in qg.candidates(coins, tau) if c.check is None or not c.check(eps, n)]

    def weight(c):
        return planner.W_BAYESS if (flat and c.mechanism == "bayess") else c.choice_weight
    return min(cands, key=lambda c: c.predict(eps, n) * weight(c)).mechanism


def main(reps: int = 200) -> None:
    rows = []
    for coins, n, eps, tau in CELLS:
        now, before = choice(coins, tau, eps, n, False), choice(coins, tau, eps, n, True)
        for shape, x in rs.quantile_shapes(coins, n).items():
            if shape not in SHAPES:
                continue
            res = rs.run_candidates(x, coins, eps, tau, reps)
            best = min(res, key=lambda m: res[m][0])
            rows.append({"B": coins, "n": n, "eps": eps, "tau": tau, "shape": shape, "reps": reps,
                         **{f"rms_{m}": round(v[0], 5) for m, v in res.items()}, "best": best,
                         "chosen_now": now, "regret_now": round(res[now][0] / max(res[best][0], 1e-12), 3),
                         "chosen_before": before,
                         "regret_before": round(res[before][0] / max(res[best][0], 1e-12), 3),
                         "within_196_now": round(res[now][1], 3)})
            print(rows[-1], flush=True)
    keys = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
    with open(HERE / "quantile_cells.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
