"""Score rules for a search's shown rank error on collected releases (collect.py): per cell, the share of runs whose
rank error is within the rule's value (coverage) at 95% and 90%, and the mean value over z·σ (width).

    python examples/qrank3/rules.py GRID[,GRID_2...]   -> prints a summary per rule, writes GRID_rules.csv
"""

from __future__ import annotations

import csv
import math
import pickle
import sys
from pathlib import Path

import numpy as np
from scipy.stats import beta

from ldpql.mechanisms import Estimate
from ldpql.mechanisms.quantile import Question
from ldpql.planner import quantile as planner

HERE = Path(__file__).parent
Z = {0.95: 1.959964, 0.90: 1.644854}


def answer(mech: str, v: int, qs: np.ndarray) -> Estimate:
    questions = [Question(int(c), float(f), 1, float(var)) for c, f, var in qs]
    return Estimate(np.array([float(v)]), np.array([math.nan]), extra={"mechanism": mech, "coin": v,
                                                                        "questions": questions})


def pooled(qs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    coins = np.unique(qs[:, 0])
    f, se = np.empty(len(coins)), np.empty(len(coins))
    for i, c in enumerate(coins):
        s = qs[qs[:, 0] == c]
        w = 1 / s[:, 2]
        f[i], se[i] = np.sum(w * s[:, 1]) / w.sum(), math.sqrt(1 / w.sum())
    return coins, f, se


def search_bound(qs: np.ndarray, v: int, tau: float, z: float, nearest_only: bool = False,
                 multiplicity: float = 0.0) -> float:
    coins, f, se = pooled(qs)
    if multiplicity:   # Bonferroni over the asked coins that could be a bracket with a large error
        from statistics import NormalDist
        m = max(int(np.sum(np.abs(f - tau) < multiplicity * z * se)), 1)
        z = NormalDist().inv_cdf(1 - NormalDist().cdf(-z) / m)
    up, lo = coins >= v - 1, coins <= v
    if nearest_only:
        up = coins == coins[up].min() if up.any() else up
        lo = coins == coins[lo].max() if lo.any() else lo
    ucb = min(np.min(f[up] + z * se[up]), 1.0) if up.any() else 1.0
    lcb = max(np.max(f[lo] - z * se[lo]), 0.0) if lo.any() else 0.0
    if v == 0:
        ucb = 0.0   # F(-1) = 0
    return max(ucb - tau, tau - lcb, 0.0)


OLD_DISCRETE = {"bayess": (10, 3.0), "naive_nbs": (6, 1.0), "shuffle_nbs": (6, 1.0)}


def old_local_share(qs: np.ndarray, coin: int, nearest: int) -> float:
    """The widening before (``local_share`` of commit 19f4c8d): the weighted slope of the pooled F̂ over the
    ``nearest`` asked coins, half its noise subtracted."""
    coins, f, se = pooled(qs)
    if len(coins) < 2:
        return 0.0
    near = np.argsort(np.abs(coins - coin), kind="stable")[:nearest]
    x, y, w = coins[near].astype(float), f[near], 1 / np.maximum(se[near] ** 2, 1e-12)
    centred = x - np.average(x, weights=w)
    spread = float(np.sum(w * centred ** 2))
    if spread <= 0:
        return 0.0
    slope = float(np.sum(w * centred * y)) / spread
    return math.sqrt(max(slope * slope - 0.5 / spread, 0.0)) if slope > 0 else 0.0


def window_bound(qs: np.ndarray, v: int, tau: float, z: float, ks: tuple = (1, 2, 4, 8, 16, 32),
                 bonferroni: bool = True) -> float:
    """The bracket bound from nested windows of the k nearest asked coins on each side (their inverse-variance
    pooled estimate bounds a weighted mean of F over the window, itself >= F(v-1) above, <= F(v) below)."""
    from statistics import NormalDist
    coins, f, se = pooled(qs)
    zk = NormalDist().inv_cdf(1 - NormalDist().cdf(-z) / len(ks)) if bonferroni else z
    def side(sel, order):
        c, ff, ss = coins[sel][order], f[sel][order], se[sel][order]
        best = None
        for k in ks:
            if k > len(c):
                break
            w = 1 / ss[:k] ** 2
            m, e = float(np.sum(w * ff[:k]) / w.sum()), float(np.sqrt(1 / w.sum()))
            best = (m, e) if best is None else best
            yield m, e
    up = [m + zk * e for m, e in side(coins >= v - 1, slice(None))]
    down = [m - zk * e for m, e in side(coins <= v, slice(None, None, -1))]
    high = 0.0 if v == 0 else min(min(up), 1.0) if up else 1.0
    low = max(max(down), 0.0) if down else 0.0
    return max(high - tau, tau - low, 0.0)


def rules(row: dict, v: int, qs: np.ndarray, z: float) -> dict[str, float]:
    tau, sigma, mech = row["tau"], row["sigma"], row["mechanism"]
    cap = max(tau, 1 - tau)
    zs = min(z * sigma, cap)
    nearest, k = OLD_DISCRETE[mech]
    out = {"before": min(z * sigma + k * old_local_share(qs, v, nearest), cap), "zsigma": zs,
           "engine": planner.shown_rank_error(answer(mech, v, qs), tau, sigma, z)}
    for w in (0.0, 1.0):
        out[f"max(zs,sbm{w:g})"] = max(zs, search_bound(qs, v, tau, z, True, w))   # (the engine of 02e29fb: w = 0 / 1)
    out["max(zs,win)"] = max(zs, window_bound(qs, v, tau, z))
    out["max(zs,win-nob)"] = max(zs, window_bound(qs, v, tau, z, bonferroni=False))
    out["max(zs,win124)"] = max(zs, window_bound(qs, v, tau, z, (1, 2, 4)))
    return out


def low_range(k: int, m: int) -> float:
    """Upper end of the exact 95% range of a coverage of k in m (Clopper-Pearson)."""
    return 1.0 if k == m else float(beta.ppf(0.975, k + 1, m - k))


def main(grids: str, only: str = "") -> None:
    rows = []
    for g in grids.split(","):
        rows += [r for r in pickle.load(open(HERE / f"{g}.pkl", "rb")) if not only or r["mechanism"] == only]
    out = []
    for row in rows:
        errs = np.array([r[1] for r in row["runs"]])
        rec = {k: row[k] for k in ("shape", "n", "eps", "tau", "mechanism", "max_share")}
        for q, z in Z.items():
            vals: dict[str, list] = {}
            for v, _, qs, _ in row["runs"]:
                for name, val in rules(row, v, qs, z).items():
                    vals.setdefault(name, []).append(val)
            for name, val in vals.items():
                a = np.array(val)
                rec[f"{name}|cov{int(q*100)}"] = float(np.mean(errs <= a + 1e-12))
                rec[f"{name}|w{int(q*100)}"] = float(a.mean() / (z * row["sigma"]))
        out.append(rec)
    names = list(dict.fromkeys(k.split("|")[0] for r in out for k in r if k.endswith("|cov95")))
    m = len(rows[0]["runs"])
    print(f"{len(out)} cells, {m} runs each")
    for mech in ("all", "bayess", "naive_nbs", "shuffle_nbs"):
        sel = [r for r in out if mech == "all" or r["mechanism"] == mech]
        for small in (True, False):
            part = [r for r in sel if (r["n"] <= 2000) == small]
            if not part:
                continue
            print(f"\n== {mech} n {'<=' if small else '>'} 2000: {len(part)} cells")
            for name in names:
                line = f"{name:24s}"
                for q in (95, 90):
                    if not all(f"{name}|cov{q}" in r for r in part):
                        continue
                    cov = np.array([r[f"{name}|cov{q}"] for r in part])
                    sig = sum(low_range(round(c * m), m) < q / 100 for c in cov)
                    wid = np.median([r[f"{name}|w{q}"] for r in part])
                    line += f" | {q}: under-2 {np.sum(cov < q/100 - 0.02):3d} sig {sig:3d} min {cov.min():.3f} " \
                            f"mean {cov.mean():.3f} >.995 {np.sum(cov > 0.995):3d} medw {wid:.2f}"
                print(line)
    with open(HERE / f"{grids.replace(',', '+')}{'_' + only if only else ''}_rules.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in out for k in r)))
        w.writeheader()
        w.writerows(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
