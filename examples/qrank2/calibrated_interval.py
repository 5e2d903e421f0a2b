"""The calibrated value interval of a search (``interval => 'calibrated'``) against the rank error its result shows,
on cells of our own (not examples/audit9's): the share of runs where the shown rank error held and the interval
missed the true quantile (``disagree``), its coverage and its width, for the asked coins read as they are (the
interval before: B·z·σ, not widened) and made monotone (``monotone_points``) at several interval factors B; and what the engine shows now.

    nice python examples/qrank2/calibrated_interval.py [reps]   -> calibrated_interval.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace, pooled, rank_interval
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from one_round_share import shapes

Z = planner.Z95
BEFORE = {"bayess": 2 ** (30 / 12), "naive_nbs": 2 ** (6 / 12)}   # the factors of the unsmoothed read-out
FACTORS = {"bayess": [2 ** (k / 12) for k in (6, 24, 25, 26, 28, 30)], "naive_nbs": [2 ** (k / 12) for k in (0, 6, 7)]}


def cell(mech: str, x: np.ndarray, coins: int, tau: float, eps: float, reps: int) -> dict | None:
    target = planner.QuantileTarget("x", Encoding("x", coins, "x"), "", None, planner.UNIT, tau=tau,
                                    space=CoinSpace(coins), taus=(tau,))
    c = {c.mechanism: c for c in planner.quantile_candidates(target)}[mech]
    n = len(x)
    if c.check(eps, n):
        return None
    hist = np.bincount(x, minlength=coins)
    cdf = np.cumsum(hist) / n
    truth = int(np.searchsorted(cdf, tau - 1e-12))
    sigma = c.predict(eps, n)
    out: dict[str, list] = {}
    for t in range(reps):
        a = simulate(c.protocol(eps)(n), np.random.default_rng([9, t]), hist=hist).extra["answers"][tau]
        v = int(a.extra["coin"])
        shown = planner.shown_rank_error(a, tau, sigma, Z)
        held = max(0.0, (cdf[v - 1] if v else 0.0) - tau, tau - cdf[v]) <= shown
        raw = sorted(pooled(a.extra["questions"]).items())
        raw = (np.array([k for k, _ in raw]), np.array([f for _, (f, _) in raw]))
        widen = max(shown - Z * sigma, 0.0)
        reads = {f"before_B{BEFORE[mech]:.3g}": (raw, Z * sigma * BEFORE[mech])}
        reads |= {f"mono_B{b:.3g}": (planner.monotone_points(a.extra["questions"]), Z * sigma * b + widen)
                  for b in FACTORS[mech]}
        for name, (points, alpha) in reads.items():
            lo, hi = rank_interval(points, tau, alpha, v, coins)
            out.setdefault(name, []).append((held, lo <= truth <= hi, (hi - lo) / coins))
        lo, hi = planner.shown_interval(a, tau, sigma, 0.95, "calibrated", CoinSpace(coins))
        out.setdefault("shown", []).append((held, lo[0] <= truth <= hi[0], (hi[0] - lo[0]) / coins))
    row = {}
    for name, rs in out.items():
        r = np.array(rs, dtype=float)
        row |= {f"{name}_disagree": float(np.mean(r[:, 0] * (1 - r[:, 1]))), f"{name}_cov": float(r[:, 1].mean()),
                f"{name}_width": float(r[:, 2].mean())}
    return row


def main(reps: int = 60) -> None:
    rows = []
    for n in (2_000, 5_000):
        for shape, (coins, x) in shapes(n).items():
            for tau in (0.2, 0.5, 0.8):
                for eps in (1.0, 4.0):
                    for mech in FACTORS:
                        row = cell(mech, x, coins, tau, eps, reps)
                        if row is not None:
                            rows.append({"shape": shape, "n": n, "tau": tau, "eps": eps, "mechanism": mech, **row})
    with open(HERE / "calibrated_interval.csv", "w", newline="") as fh:
        keys = list(dict.fromkeys(k for r in rows for k in r))
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    for mech in FACTORS:
        rs = [r for r in rows if r["mechanism"] == mech]
        for name in [k[: -len("_disagree")] for k in rs[0] if k.endswith("_disagree")]:
            print(f"{mech:10s} {name:12s} cells {len(rs)} disagree max {max(r[name + '_disagree'] for r in rs):.3f} "
                  f"cov mean {np.mean([r[name + '_cov'] for r in rs]):.3f} min {min(r[name + '_cov'] for r in rs):.3f} "
                  f"width mean {np.mean([r[name + '_width'] for r in rs]):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
