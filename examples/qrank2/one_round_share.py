"""Choose (nearest, k) of the one-round releases' widened rank error on cells of our own (not audit 9's).

A hierarchical or histogram release holds an estimated frequency per value (or bin); the result's rank error adds
k times the share per unit near its answer, as the release estimates it (``release_share`` over the ``nearest``
units). This grid (shapes, n, ε, τ all different from examples/audit9's held-out grid) records, per run, the rank
error, ±z·σ and the release's share at several ``nearest``, and prints the coverage of z·σ + k·share for several k.

    nice python examples/qrank2/one_round_share.py [reps]   -> one_round_share.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace, release_share
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

HERE = Path(__file__).parent
Z = {95: 1.959964, 90: 1.644854}
NEAREST, KS = (1, 3, 5, 9), (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
TAUS, NS, EPSILONS = (0.2, 0.5, 0.8), (5_000, 50_000), (2.0, 4.0, 8.0)


def shapes(n: int) -> dict[str, tuple[int, np.ndarray]]:
    rng = np.random.default_rng([4242, n])

    def clip(x, b):
        return np.clip(np.rint(x), 0, b - 1).astype(np.int64)
    atoms = np.where(rng.random(n) < 0.3, rng.choice([100, 200], n), rng.uniform(0, 300, n))
    return {"normal(300,40) 0..600": (601, clip(rng.normal(300, 40, n), 601)),
            "poisson(8) 0..50": (51, np.minimum(rng.poisson(8, n), 50)),
            "uniform 0..199": (200, rng.integers(0, 200, n)),
            "binomial(400,0.5) 0..400": (401, rng.binomial(400, 0.5, n)),
            "lognormal(3,1) 0..1000": (1001, clip(np.exp(rng.normal(3, 1, n)), 1001)),
            "2 atoms (15% each) + uniform 0..300": (301, clip(atoms, 301))}


def cell(mech: str, x: np.ndarray, coins: int, tau: float, eps: float, reps: int) -> dict:
    target = planner.QuantileTarget("x", Encoding("x", coins, "x"), "", None, planner.UNIT, tau=tau,
                                    space=CoinSpace(coins), taus=(tau,))
    c = {c.mechanism: c for c in planner.quantile_candidates(target)}[mech]
    hist = np.bincount(x, minlength=coins)
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    sigma = c.predict(eps, n)
    err, share, final = [], {m: [] for m in NEAREST}, {q: [] for q in Z}
    for t in range(reps):
        a = simulate(c.protocol(eps)(n), np.random.default_rng([31, t]), hist=hist).extra["answers"][tau]
        v = int(a.extra["coin"])
        err.append(max(0.0, (cdf[v - 1] if v > 0 else 0.0) - tau, tau - cdf[v]))
        for m in NEAREST:
            share[m].append(release_share(a.extra["units"], v, m))
        for q, z in Z.items():   # what the result shows (DISCRETE and SLACK as chosen)
            final[q].append(planner.shown_rank_error(a, tau, sigma, z))
    e = np.array(err)
    row = {"sigma": sigma}
    for q, z in Z.items():
        row[f"shown_cov{q}"] = float(np.mean(e <= np.array(final[q])))
        row[f"shown_w{q}"] = float(np.mean(final[q]) / (z * sigma))
        for m in NEAREST:
            for k in KS:
                shown = np.minimum(z * sigma + k * np.array(share[m]), max(tau, 1 - tau))
                row[f"cov{q}_m{m}_k{k:g}"] = float(np.mean(e <= shown))
                row[f"w{q}_m{m}_k{k:g}"] = float(shown.mean() / (z * sigma))
    return row


def main(reps: int = 100) -> None:
    rows = []
    for n in NS:
        for shape, (coins, x) in shapes(n).items():
            for tau in TAUS:
                for eps in EPSILONS:
                    for mech in ("hierarchical", "histogram"):
                        rows.append({"shape": shape, "n": n, "eps": eps, "tau": tau, "mechanism": mech,
                                     **cell(mech, x, coins, tau, eps, reps)})
    with open(HERE / "one_round_share.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary(rows)


def summary(rows: list[dict]) -> None:
    """Per (nearest, k): cells under nominal - 2 points at 95% / 90%, minimum coverage, mean width / z·σ."""
    print("nearest k under95 min95 under90 min90 width95")
    for m in NEAREST:
        for k in KS:
            c95 = np.array([r[f"cov95_m{m}_k{k:g}"] for r in rows])
            c90 = np.array([r[f"cov90_m{m}_k{k:g}"] for r in rows])
            w = np.array([r[f"w95_m{m}_k{k:g}"] for r in rows])
            print(m, k, int(np.sum(c95 < 0.93)), c95.min(), int(np.sum(c90 < 0.88)), c90.min(), round(w.mean(), 2))
    c95, c90 = (np.array([r[f"shown_cov{q}"] for r in rows]) for q in Z)
    w = np.array([r["shown_w95"] for r in rows])
    print("shown", int(np.sum(c95 < 0.93)), c95.min(), int(np.sum(c90 < 0.88)), c90.min(), round(float(np.median(w)), 2),
          "(median width)", int(np.sum((c95 > 0.995) & (w > 2))), "over-wide")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
