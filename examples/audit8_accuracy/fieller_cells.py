"""Audit 8: Fieller's interval for the conditional mean on cells the builder's grid did not use (skewed values
near one bound, 30-70% NULL, tiny n·ε, large n), at 80/90/95%, through CollisionMean directly (the estimator a
statement runs). Per cell: coverage, flagged share, whole-range share, degenerate intervals (NaN, inverted,
zero-width, excluding the point), and the mean width against the delta method's on the same releases.

    nice python examples/audit8_accuracy/fieller_cells.py [R]    -> fieller_cells.csv (R = 300: a few minutes)
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms.conditional import MISSING, CollisionMean, answer, covariance, with_interval

LO, HI = 0.0, 10.0
SHAPES = {   # x' in [-1, 1]
    "near_hi": lambda rng, n: 1 - 2 * rng.beta(0.3, 8, n),        # piled against hi, long tail down
    "near_lo": lambda rng, n: -1 + 2 * rng.beta(0.3, 8, n),
    "lo": lambda rng, n: np.full(n, -1.0),
    "mid": lambda rng, n: np.zeros(n),
}
CELLS = [  # shape, n, NULL share, eps, runs factor
    ("near_hi", 2000, 0.3, 1.0), ("near_hi", 2000, 0.7, 1.0), ("near_hi", 20000, 0.5, 0.5),
    ("near_lo", 2000, 0.3, 1.0), ("near_lo", 2000, 0.7, 1.0), ("near_lo", 20000, 0.5, 0.5),
    ("lo", 2000, 0.6, 1.0), ("lo", 20000, 0.7, 0.3), ("mid", 2000, 0.5, 1.0),
    ("near_hi", 200, 0.5, 0.3), ("near_lo", 100, 0.3, 1.0), ("mid", 1000, 0.7, 0.1), ("lo", 300, 0.3, 0.5),
    ("near_hi", 200000, 0.5, 4.0), ("mid", 200000, 0.7, 2.0), ("near_lo", 200000, 0.3, 8.0),
]
CONFS = (0.95, 0.9, 0.8)


def delta_width(r, summary, n, z):
    f = r.estimate(summary, n)
    plug = np.clip(f, 0, 1)
    cov = covariance(r.p_true, r.p_false, plug) / n
    present = max(float(plug.sum()), 1 / n)
    grad = (HI - LO) / 2 * np.array([2 * plug[1], -2 * plug[0]]) / present ** 2
    return 2 * z * min(math.sqrt(max(float(grad @ cov @ grad), 0.0)), (HI - LO) / 2)


def cell(shape, n, share, eps, runs, seed):
    rng = np.random.default_rng(seed)
    x, null = SHAPES[shape](rng, n), rng.random(n) < share
    null[0] = False
    truth = 5 + 5 * float(x[~null].mean())
    r = CollisionMean(eps)
    xs = np.where(null, MISSING, x)
    out = {c: [] for c in CONFS}
    dw = []
    for _ in range(runs):
        summary = r.inner.simulate(r.elements(xs, rng), rng)
        est = answer(r, summary, n, "mean", LO, HI)
        for c in CONFS:
            out[c].append(with_interval(est, c))
        dw.append(delta_width(r, summary, n, NormalDist().inv_cdf(0.975)))
    row = {"shape": shape, "n": n, "null": share, "eps": eps, "runs": runs, "truth": round(truth, 4)}
    for c in CONFS:
        lo = np.array([e.interval[0][0] for e in out[c]])
        hi = np.array([e.interval[1][0] for e in out[c]])
        v = np.array([e.values[0] for e in out[c]])
        flag = np.array([bool(e.note) for e in out[c]])
        hit = (lo <= truth) & (truth <= hi)
        tag = f"{int(c * 100)}"
        row[f"cov{tag}"] = round(hit.mean(), 4)
        row[f"flag{tag}"] = round(flag.mean(), 3)
        row[f"whole{tag}"] = round(((lo == LO) & (hi == HI)).mean(), 3)
        row[f"unflag_cov{tag}"] = round(hit[~flag].mean(), 4) if (~flag).any() else ""
        row[f"bad{tag}"] = int((~np.isfinite(lo) | ~np.isfinite(hi) | (hi < lo) | (hi - lo <= 0)
                               | (v < lo - 1e-12) | (v > hi + 1e-12)).sum())
        if c == 0.95:
            row["width95"] = round(float((hi - lo).mean()), 5)
            row["delta_width95"] = round(float(np.mean(dw)), 5)
    return row


def main(runs: int = 300) -> None:
    rows = []
    for k, (shape, n, share, eps) in enumerate(CELLS):
        rows.append(cell(shape, n, share, eps, runs if n < 100_000 else max(runs // 3, 50), 8000 + k))
        print(rows[-1], flush=True)
    path = Path(__file__).parent / "fieller_cells.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
