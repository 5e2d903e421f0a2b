"""The mean over the users with a value (SQL's AVG on a nullable column), estimated privately by Collision with
d = 1, s = 1 (Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in the Local and
Shuffle Model"): coverage of its 95% intervals over a grid of (n, ε, NULL fraction), and its accuracy cost against
the unconditional mechanisms (Duchi et al., PM, HM) on data without NULLs, predicted and measured.

Run: ``python examples/nulls_coverage.py [reps]``; writes examples/nulls_results/coverage.csv and cost.csv.
The randomizers run on the mechanism modules directly (the engine's SQL path is exercised by tests/system/test_nulls.py).
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import numpy as np

from ldpql.mechanisms.conditional import CollisionMean, answer, predicted_variance
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.planner.aggregates import worst_case_variance

LOW, HIGH = 0.0, 200_000.0
OUT = Path(__file__).resolve().parent / "nulls_results"


def wages(n: int, null_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Lognormal wages (median ~30,000), clipped to the range, a share of them NULL (NaN), scaled to [-1, 1]."""
    w = np.clip(np.exp(rng.normal(10.3, 0.6, n)), LOW, HIGH)
    x = 2 * (w - LOW) / (HIGH - LOW) - 1
    return np.where(rng.random(n) < null_fraction, 2.0, x)


def run(r: CollisionMean, x: np.ndarray, rng: np.random.Generator):
    est = answer(r, r.aggregate(r.randomize(x, rng)), len(x), "mean", LOW, HIGH)
    return float(est.values[0]), float(est.stderr[0])


def coverage(reps: int) -> list[dict]:
    rows = []
    for n, eps, frac in [(5_000, 1.0, 0.1), (20_000, 0.5, 0.44), (20_000, 2.0, 0.7), (50_000, 1.0, 0.44),
                         (50_000, 4.0, 0.9), (100_000, 0.25, 0.3), (2_000, 8.0, 0.5)]:
        rng = np.random.default_rng(hash((n, eps, frac)) % 2**32)
        x = wages(n, frac, rng)
        ok = x < 1.5
        truth = LOW + (HIGH - LOW) * (x[ok].mean() + 1) / 2
        r = CollisionMean(eps)
        got = [run(r, x, rng) for _ in range(reps)]
        errs = np.array([v - truth for v, _ in got])
        ses = np.array([s for _, s in got])
        rows.append({"n": n, "epsilon": eps, "null_fraction": frac, "reps": reps, "truth": round(truth, 1),
                     "coverage95": round(float(np.mean(np.abs(errs) <= 1.96 * ses)), 3),
                     "rmse": round(float(np.sqrt(np.mean(errs ** 2))), 1), "mean_se": round(float(ses.mean()), 1),
                     "bias": round(float(errs.mean()), 1),
                     "predicted_se_at_share_1": round(math.sqrt(predicted_variance(eps, "mean", LOW, HIGH) / n), 1)})
        print(rows[-1], flush=True)
    return rows


def cost(reps: int, n: int = 20_000) -> list[dict]:
    """On data without NULLs: the conditional mean's error against the best unconditional mechanism's."""
    rows = []
    rng = np.random.default_rng(7)
    x = wages(n, 0.0, rng)
    half = (HIGH - LOW) / 2
    for eps in (0.5, 1.0, 2.0, 4.0):
        r = CollisionMean(eps)
        col = np.array([run(r, x, rng)[0] for _ in range(reps)])
        truth = LOW + half * (x.mean() + 1)
        mechs = {"duchi": Duchi(eps), "piecewise": Piecewise(eps), "hybrid": Hybrid(eps)}
        pred = {k: half * math.sqrt(worst_case_variance(m, n)) for k, m in mechs.items()}
        best = min(pred, key=pred.get)
        m = mechs[best]
        unc = np.array([LOW + half * (float(m.estimate(m.aggregate(m.randomize(x, rng)), n)[0]) + 1)
                        for _ in range(reps)])
        rows.append({"epsilon": eps, "n": n, "reps": reps, "unconditional": best,
                     "predicted_se_unconditional": round(pred[best], 1),
                     "predicted_se_collision": round(math.sqrt(predicted_variance(eps, "mean", LOW, HIGH) / n), 1),
                     "rmse_unconditional": round(float(np.sqrt(np.mean((unc - truth) ** 2))), 1),
                     "rmse_collision": round(float(np.sqrt(np.mean((col - truth) ** 2))), 1)})
        print(rows[-1], flush=True)
    return rows


def write(name: str, rows: list[dict]) -> None:
    OUT.mkdir(exist_ok=True)
    with open(OUT / name, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    write("coverage.csv", coverage(reps))
    write("cost.csv", cost(reps))
