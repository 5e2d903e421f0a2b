"""Audit 9 (hostile review) of issue 11's widened quantile rank error: held-out coverage.

The grid below was fixed BEFORE any result was seen, on shapes and cells the builder's
``examples/audit8_accuracy/quantile_discrete.py`` did not use: binomial, Poisson, geometric, a mixture of three
atoms on a smooth part, rounded normals and lognormals at several scales (largest per-value share 0.03%-20%),
τ ∈ {0.1, 0.25, 0.5, 0.75, 0.9}, n ∈ {2,000, 20,000}, ε ∈ {0.5, 1, 4}. Per cell: the planner's choice (the
mechanism ``EXPLAIN`` picks, public facts only) and each search forced (BayeSS, NaiveNBS, shuffled NaiveNBS at
δ = 1e-8 where the shuffle model applies). Per run: the rank error (τ's distance to the answer's rank interval
[F(v-1), F(v)]) against the rank error the result shows (``ldpql.planner.quantile.shown_rank_error``: ±z·σ plus
k × the share per value near the answer that the release estimates), at 95% and 90%.

    nice python examples/audit9/quantile_heldout.py [reps] [part/parts]   -> quantile_heldout[_part].csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))


import ldpql
from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

Z = {0.95: 1.959964, 0.90: 1.644854}
TAUS, NS, EPSILONS = (0.1, 0.25, 0.5, 0.75, 0.9), (2_000, 20_000), (0.5, 1.0, 4.0)


def shapes(n: int) -> dict[str, tuple[int, np.ndarray]]:
    """name -> (B, values on INTEGER 0..B-1); fixed seeds, fixed before any result."""
    rng = np.random.default_rng([909, n])

    def clip(x, b):
        return np.clip(np.rint(x), 0, b - 1).astype(np.int64)
    smooth = rng.normal(50, 20, n)
    atoms = np.where(rng.random(n) < 0.3, rng.choice([20, 45, 70], n), smooth)
    return {
        "binomial(60,0.3) 0..60": (61, rng.binomial(60, 0.3, n)),
        "poisson(3) 0..30": (31, np.minimum(rng.poisson(3, n), 30)),
        "geometric(0.03) 0..300": (301, np.minimum(rng.geometric(0.03, n) - 1, 300)),
        "3 atoms (10% each) + normal 0..100": (101, clip(atoms, 101)),
        "normal(50,5) 0..100": (101, clip(rng.normal(50, 5, n), 101)),
        "normal(500,60) 0..1000": (1001, clip(rng.normal(500, 60, n), 1001)),
        "normal(5000,1500) 0..10000": (10_001, clip(rng.normal(5000, 1500, n), 10_001)),
        "lognormal(1,0.6) 0..100": (101, clip(np.exp(rng.normal(1, 0.6, n)), 101)),
        "lognormal(4,0.8) 0..2000": (2001, clip(np.exp(rng.normal(4, 0.8, n)), 2001)),
    }


def target(coins: int, tau: float) -> planner.QuantileTarget:
    return planner.QuantileTarget("x", Encoding("x", coins, "x"), "", None, planner.UNIT, tau=tau,
                                  space=CoinSpace(coins), taus=(tau,))


def chosen(x: np.ndarray, coins: int, tau: float, eps: float) -> str:
    """The planner's choice for the statement (EXPLAIN: public facts only)."""
    con = ldpql.connect(seed=1, evaluation=True)
    con.register("t", pa.table({"x": x}), private={"x": {"between": (0, coins - 1), "integer": True}}, budget=100)
    return con.sql(f"EXPLAIN SELECT LDP_QUANTILE(x, {tau}) FROM t EPSILON {eps}").plan.aggregates[0].chosen.mechanism


def candidates(coins: int, tau: float) -> dict:
    out = {c.mechanism: c for c in planner.quantile_candidates(target(coins, tau))}
    out["shuffle_nbs"].delta = 1e-8
    return out


def run(c, x: np.ndarray, coins: int, tau: float, eps: float, reps: int) -> dict:
    hist = np.bincount(x, minlength=coins)
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    sigma = c.predict(eps, n)
    errors, shown = [], {q: [] for q in Z}
    for t in range(reps):
        answer = simulate(c.protocol(eps)(n), np.random.default_rng([77, t]), hist=hist).extra["answers"][tau]
        v = int(answer.extra["coin"])
        errors.append(max(0.0, (cdf[v - 1] if v > 0 else 0.0) - tau, tau - cdf[v]))
        for q, z in Z.items():
            shown[q].append(planner.shown_rank_error(answer, tau, sigma, z))   # (one-round releases too)
    e = np.array(errors)
    row = {"sigma": round(sigma, 5), "mean_error": round(float(e.mean()), 5)}
    for q, z in Z.items():
        a = np.array(shown[q])
        row[f"cov{int(q * 100)}"] = round(float(np.mean(e <= a)), 4)
        row[f"before{int(q * 100)}"] = round(float(np.mean(e <= min(z * sigma, max(tau, 1 - tau)))), 4)
        row[f"width{int(q * 100)}"] = round(float(a.mean() / (z * sigma)), 3)
    return row


def main(reps: int = 200, part: str = "1/1") -> None:
    k, parts = (int(s) for s in part.split("/"))
    rows, i = [], 0
    for n in NS:
        for shape, (coins, x) in shapes(n).items():
            share = float(np.bincount(x).max() / n)
            for tau in TAUS:
                for eps in EPSILONS:
                    i += 1
                    if i % parts != k - 1:
                        continue
                    pick = chosen(x, coins, tau, eps)
                    cands = candidates(coins, tau)
                    for mech in dict.fromkeys([pick, "bayess", "naive_nbs", "shuffle_nbs"]):
                        c = cands[mech]
                        base = {"shape": shape, "B": coins, "n": n, "eps": eps, "tau": tau, "max_share": round(share, 4),
                                "mechanism": mech, "chosen": mech == pick, "reps": reps}
                        why = c.check(eps, n) if c.check is not None else None
                        if why:
                            rows.append({**base, "refused": why[:60]})
                            continue
                        rows.append({**base, **run(c, x, coins, tau, eps, reps)})
                        print(rows[-1], flush=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(HERE / f"quantile_heldout{'' if parts == 1 else f'_{k}'}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, sys.argv[2] if len(sys.argv) > 2 else "1/1")
