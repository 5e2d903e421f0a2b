"""Issue 11: does a search's shown rank error hold where single values hold many users? Per cell (declared
INTEGER 0..B-1, n, ε, τ, a data shape) and search (BayeSS and NaiveNBS, forced): the share of runs whose rank
error (the distance from τ to the answer's rank interval [F(v-1), F(v)]) is within the calibrated ±z·σ alone
(before) and within the shown rank error (after: ±z·σ plus k times the share of users per value near the answer
that the release estimates, ``ldpql.planner.quantile.shown_rank_error``), at 95% and 90%, and the mean ratio of
the two. Cells: the two expected failures of issue 11 (a Zipf column on 0..1000; INTEGER 0..30/50/500), held-out
atom shapes (the coverage grid's discrete column, 12 geometric atoms, Zipf 1.3/1.6/2), and smooth or continuous
columns (which should not widen).

    nice python examples/audit8_accuracy/quantile_discrete.py [reps] [filter]   -> quantile_discrete[_filter].csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import coverage_grid as cg
import regret_shapes as rs

from ldpql.mechanisms.quantile import CoinSpace, bayess_protocol, nbs_protocol
from ldpql.planner.quantile import BAYESS_ROUNDS, shown_rank_error, sigma_bayess, sigma_nbs
from ldpql.simulation import simulate

Z = {0.95: 1.959964, 0.90: 1.644854}


def cells():
    """(label, B, data, ε, τ, kind): kind 'xfail', 'held-out' or 'smooth'."""
    yield "zipf(1.3)-1", 1001, np.minimum(np.random.default_rng(11).zipf(1.3, 5000) - 1, 1000), 1.0, 0.5, "xfail"
    rng = np.random.default_rng([5, 20_000, 31])
    yield "normal", 31, np.clip(np.rint(rng.normal(50, 15, 20_000) * 30 / 100), 0, 30).astype(np.int64), 0.5, 0.5, "xfail"
    for coins, n, eps, tau, shape in ((51, 10_000, 1.0, 0.5, "lognormal (grid h)"), (51, 2_000, 2.0, 0.25, "lognormal (grid h)"),
                                      (101, 10_000, 1.0, 0.5, "uniform"), (501, 50_000, 2.0, 0.1, "bimodal (grid m)"),
                                      (501, 50_000, 2.0, 0.1, "uniform")):
        yield shape, coins, rs.quantile_shapes(coins, n)[shape], eps, tau, "xfail"
    for coins, n, eps, tau in ((101, 10_000, 2.0, 0.5), (1001, 5_000, 1.0, 0.9), (1001, 20_000, 0.5, 0.25)):
        shapes = rs.quantile_shapes(coins, n, seed=9)
        rng = np.random.default_rng([3, n])
        data = {s: shapes[s] for s in ("grid discrete (d)", "12 atoms (geometric)", "zipf 1.3")}
        data.update({f"zipf {a:g}": np.minimum(rng.zipf(a, n) - 1, coins - 1) for a in (1.6, 2.0)})
        for shape, x in data.items():
            yield shape, coins, x, eps, tau, "held-out"
        yield "normal", coins, shapes["normal"], eps, tau, "smooth"
    for coins, n, eps, tau, shape in ((1001, 10_000, 1.0, 0.5, "uniform"), (1001, 10_000, 1.0, 0.5, "lognormal (grid h)"),
                                      (1001, 10_000, 1.0, 0.1, "bimodal (grid m)"), (1001, 50_000, 0.5, 0.5, "normal")):
        yield shape, coins, rs.quantile_shapes(coins, n)[shape], eps, tau, "smooth"
    table = cg.make_table(10_000)   # the coverage grid's columns at n = 10^4 (examples/coverage_grid.py)
    for col, coins, taus in (("h", 20_001, (0.1, 0.5, 0.9)), ("d", 101, (0.5,))):
        for tau in taus:
            yield f"coverage grid {col} ({cg.SHAPES[col]})", coins, table[col].to_numpy(), 1.0, tau, "grid"
    m = np.minimum((table["m"].to_numpy() / 100 * 65536).astype(np.int64), 65535)
    yield "coverage grid m (bimodal, continuous)", 65536, m, 1.0, 0.5, "grid"
    rng = np.random.default_rng(7)   # continuous columns: 2^16 buckets (the default resolution)
    yield "lognormal (continuous)", 65536, np.minimum((np.exp(rng.normal(0, 1, 10_000)) / 20 * 65536).astype(int), 65535), 1.0, 0.5, "smooth"
    rng = np.random.default_rng(8)
    yield "normal (continuous)", 65536, np.clip(rng.normal(32768, 8000, 20_000), 0, 65535).astype(int), 2.0, 0.1, "smooth"


def run_cell(coins: int, x: np.ndarray, eps: float, tau: float, mechanism: str, reps: int) -> dict:
    hist = np.bincount(x, minlength=coins)
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    space = CoinSpace(coins)
    protocol = bayess_protocol(space, eps, tau, max_rounds=BAYESS_ROUNDS) if mechanism == "bayess" else \
        nbs_protocol(space, eps, tau)
    sigma = (sigma_bayess if mechanism == "bayess" else sigma_nbs)(eps, n, coins, tau)
    errors, shown = [], {c: [] for c in Z}
    for t in range(reps):
        answer = simulate(protocol(n), np.random.default_rng([29, t]), hist=hist)
        v = int(answer.extra["coin"])
        errors.append(max(0.0, (cdf[v - 1] if v > 0 else 0.0) - tau, tau - cdf[v]))
        for c, z in Z.items():
            shown[c].append(shown_rank_error(answer, tau, sigma, z))
    e = np.array(errors)
    row = {"n": n, "sigma": round(sigma, 5), "max_value_share": round(float(hist.max() / n), 3)}
    for c, z in Z.items():
        a = np.array(shown[c])
        row[f"before{int(c * 100)}"] = round(float(np.mean(e <= z * sigma)), 3)
        row[f"after{int(c * 100)}"] = round(float(np.mean(e <= a)), 3)
        row[f"widening{int(c * 100)}"] = round(float(np.mean(a) / (z * sigma)), 2)
    return row


def main(reps: int = 300, only: str = "") -> None:
    rows = []
    for shape, coins, x, eps, tau, kind in cells():
        if only and only not in shape:
            continue
        for mechanism in ("bayess", "naive_nbs"):
            row = {"kind": kind, "shape": shape, "B": coins, "eps": eps, "tau": tau, "mechanism": mechanism, "reps": reps}
            row.update(run_cell(coins, x, eps, tau, mechanism, reps))
            rows.append(row)
            print(row, flush=True)
    with open(HERE / f"quantile_discrete{'_' + only.split()[0] if only else ''}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, sys.argv[2] if len(sys.argv) > 2 else "")
