"""Why two of audit 9's chosen search cells under-cover (measurement only; nothing here changes the engine).
(``local_share`` left the engine with examples/qrank3; this script reads the copy in examples/qrank3/rules.py, and
``shown_rank_error`` is now the engine's current rule, so a re-run no longer reproduces diagnose.txt.)

1. NaiveNBS, 3 atoms of 10% each plus a normal part on INTEGER 0..100, n = 20,000, ε = 0.5, τ = 0.1: which values
   the answers land on, how often the shown rank error misses on each, and what ``local_share`` estimated there.
2. BayeSS at n = 2,000, ε = 1 in the tails (τ = 0.1 and 0.9) on smooth shapes of our own, and audit 9's rounded
   lognormal(4, 0.8) cell: coverage of ±z·σ alone and of the shown rank error, the 95th percentile of the rank
   error over z·σ.

    nice python examples/qrank2/diagnose.py   -> diagnose.txt
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "audit9"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "qrank3"))

import quantile_heldout as h
from one_round_share import shapes
from rules import old_local_share

from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

Z = planner.Z95


def atoms() -> None:
    shape, n, eps, tau = "3 atoms (10% each) + normal 0..100", 20_000, 0.5, 0.1
    coins, x = h.shapes(n)[shape]
    hist = np.bincount(x, minlength=coins)
    cdf = np.cumsum(hist) / n
    c = h.candidates(coins, tau)["naive_nbs"]
    sigma = c.predict(eps, n)
    print(f"{shape}, n = {n}, ε = {eps}, τ = {tau}: F(18..22) = {np.round(cdf[18:23], 4)}, z·σ = {Z * sigma:.4f}")
    runs, misses, shown, shares = Counter(), Counter(), {}, {}
    for t in range(200):
        a = simulate(c.protocol(eps)(n), np.random.default_rng([77, t]), hist=hist).extra["answers"][tau]
        v = int(a.extra["coin"])
        err = max(0.0, (cdf[v - 1] if v else 0.0) - tau, tau - cdf[v])
        s = planner.shown_rank_error(a, tau, sigma, Z)
        runs[v] += 1
        misses[v] += err > s
        shown.setdefault(v, []).append(s)
        qs = np.array([(q.coin, q.estimate, q.variance) for q in a.extra["questions"]])
        shares.setdefault(v, []).append(old_local_share(qs, v, 6))
    print("answer  runs  missed  rank error  mean shown  mean local_share")
    for v in sorted(runs):
        err = max(0.0, (cdf[v - 1] if v else 0.0) - tau, tau - cdf[v])
        print(f"{v:6d} {runs[v]:5d} {misses[v]:7d} {err:11.4f} {np.mean(shown[v]):11.4f} {np.mean(shares[v]):12.4f}")


def tails() -> None:
    cells = [(f"own {s}", *shapes(2000)[s], tau) for s in ("normal(300,40) 0..600", "lognormal(3,1) 0..1000",
                                                          "uniform 0..199") for tau in (0.1, 0.9)]
    cells.append(("audit9 lognormal(4,0.8) 0..2000", *h.shapes(2000)["lognormal(4,0.8) 0..2000"], 0.9))
    print("\nBayeSS, n = 2,000, ε = 1 (150 runs; audit 9's cell 200 runs on its seeds)")
    print("cell                                 τ    z·σ     cov ±z·σ  cov shown  q95 error / z·σ")
    for name, coins, x, tau in cells:
        hist = np.bincount(x, minlength=coins)
        cdf = np.cumsum(hist) / len(x)
        c = h.candidates(coins, tau)["bayess"]
        sigma = c.predict(1.0, len(x))
        audit = name.startswith("audit9")
        e, s = [], []
        for t in range(200 if audit else 150):
            a = simulate(c.protocol(1.0)(len(x)), np.random.default_rng([77 if audit else 5, t]),
                         hist=hist).extra["answers"][tau]
            v = int(a.extra["coin"])
            e.append(max(0.0, (cdf[v - 1] if v else 0.0) - tau, tau - cdf[v]))
            s.append(planner.shown_rank_error(a, tau, sigma, Z))
        e, s = np.array(e), np.array(s)
        print(f"{name:36s} {tau:3.1f} {Z * sigma:.4f} {np.mean(e <= Z * sigma):9.3f} {np.mean(e <= s):10.3f} "
              f"{np.quantile(e, 0.95) / (Z * sigma):10.2f}")


if __name__ == "__main__":
    atoms()
    tails()
