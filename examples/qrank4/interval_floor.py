"""The calibrated value interval of a search with a per-coin floor: each asked coin ends the interval only where
its own estimate, ± z_c·se, says so (z_c: none, z, or Bonferroni's over the asked coins), at several interval
factors B; on examples/qrank2's own cells (not audit 9's or 14's). Per rule: the worst cell's share of runs where
the shown rank error held and the interval missed the true quantile (``disagree``), coverage and width.

    nice python examples/qrank4/interval_floor.py [reps]   -> interval_floor.csv (and a summary on stdout)
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace, pooled, rank_interval
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "qrank2"))
from one_round_share import shapes  # noqa: E402

Z = planner.Z95
FACTORS = {"bayess": [2 ** (k / 12) for k in (6, 12, 18, 25)], "naive_nbs": [2 ** (k / 12) for k in (0, 6)]}
FLOORS = ("none", "z", "bonf")


def intervals(a, tau: float, sigma: float, coins: int, mech: str) -> dict[str, tuple[int, int]]:
    """Every rule's interval for one answer, clipped to the certified one as the engine clips it."""
    shown = planner.shown_rank_error(a, tau, sigma, Z)
    points = planner.monotone_points(a.extra["questions"])
    stats = pooled(a.extra["questions"])
    se = np.sqrt([stats[int(c)][1] for c in points[0]])
    zc = {"none": 0.0, "z": Z, "bonf": NormalDist().inv_cdf(1 - 0.05 / (2 * len(stats)))}
    cert = a.extra["interval"](0.95)
    space = CoinSpace(coins)
    out = {}
    for b in FACTORS[mech]:
        alpha = Z * sigma * b + max(shown - Z * sigma, 0.0)
        for floor in FLOORS:
            lo, hi = rank_interval(points, tau, np.maximum(alpha, zc[floor] * se), int(a.extra["coin"]), coins)
            lo, hi = max(space.value(lo), cert[0][0]), min(space.value(hi), cert[1][0])
            out[f"B{b:.3g}_{floor}"] = (round(lo), round(hi))
    return out


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
        held = max(0.0, (cdf[v - 1] if v else 0.0) - tau, tau - cdf[v]) <= planner.shown_rank_error(a, tau, sigma, Z)
        for name, (lo, hi) in intervals(a, tau, sigma, coins, mech).items():
            out.setdefault(name, []).append((held, lo <= truth <= hi, (hi - lo) / coins))
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
    with open(HERE / "interval_floor.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    for mech in FACTORS:
        rs = [r for r in rows if r["mechanism"] == mech]
        for name in [k[: -len("_disagree")] for k in rs[0] if k.endswith("_disagree")]:
            print(f"{mech:10s} {name:14s} cells {len(rs)} disagree max {max(r[name + '_disagree'] for r in rs):.3f} "
                  f"cov mean {np.mean([r[name + '_cov'] for r in rs]):.3f} min {min(r[name + '_cov'] for r in rs):.3f} "
                  f"width mean {np.mean([r[name + '_width'] for r in rs]):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
