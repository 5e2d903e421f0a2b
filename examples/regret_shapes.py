"""Can a data-independent rule fix the last planner-regret cells of the coverage grid? (issue 11)

The planner sees only public facts (n, ε, τ, the declared domain); the coverage grid's remaining regret cells
are one data shape at one public cell each. This script runs every candidate, forced, at the public facts of
such a cell on several data shapes with the same declared domain, and prints each candidate's error and the
planner's choice per shape: when the best candidate changes with the shape at the same public facts, no rule
on those facts can be within the regret limit on every shape.

    nice python examples/regret_shapes.py [--reps 300] [--part quantile|extreme|zipf|coins]

- ``quantile``: the cells median_d (n = 10^4, ε = 1, τ = 0.5, INTEGER 0..100) and quantile10_h (n = 10^3,
  ε = 1, τ = 0.1, INTEGER 0..20000); the root mean square rank error of each local candidate (the grid's
  regret metric), in-memory driver (``ldpql.simulation.simulate``, the executor's protocols).
- ``extreme``: the cell min_m (n = 10^3, ε = 4, a continuous column BETWEEN 0 AND 100), LDP_MIN and LDP_MAX
  of several shapes through SQL (``EVALUATE ... REPEAT``), RMSE against the true extreme (the grid's metric).
- ``coins``: BayeSS against NaiveNBS on 3 smooth shapes at 5 coin counts B (101 .. 20,001) x 4 (n, ε), τ = 0.5:
  the measured ratio of their root mean square rank errors against the ratio the planner predicts without and
  with BayeSS's weight for B (``ldpql.planner.quantile.bayess_weight``), and the least squares fit of that
  weight's exponent (log of measured over predicted, medians per (B, n, ε), on log(ln B / ln 1024)).
- ``zipf``: the share of runs within the predicted ±1.96σ (the note's 95% rank error) for BayeSS and NaiveNBS
  on Zipf-like columns (zipf(a) − 1 capped at the domain's top) and on smooth shapes of the same domain, and the
  multiple of σ each would need for 95%.

Writes nothing; the printed tables are in examples/coverage_results/regret8/shapes.txt.
"""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
import coverage_grid as cg
import quantile_grid as qg

import ldpql
from ldpql.planner import minimum as pm
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

GRID_DISCRETE = ((0, 3, 7, 20, 21, 22, 60, 100), (.10, .15, .05, .25, .10, .05, .20, .10))   # coverage grid's d


def quantile_shapes(coins: int, n: int, seed: int = 5) -> dict[str, np.ndarray]:
    """Integer data on 0..coins-1 of several shapes (fixed seeds)."""
    rng = np.random.default_rng([seed, n, coins])
    top = coins - 1
    scale = top / 100
    out = {
        "grid discrete (d)": np.rint(rng.choice(GRID_DISCRETE[0], n, p=GRID_DISCRETE[1]) * scale),
        "uniform": rng.integers(0, coins, n),
        "lognormal (grid h)": np.exp(rng.normal(7.8, 1.0, n)) * top / 20000,
        "bimodal (grid m)": np.where(rng.random(n) < 0.6, rng.normal(25, 6, n), rng.normal(75, 8, n)) * scale,
        "normal": rng.normal(50, 15, n) * scale,
        "zipf 1.3": rng.zipf(1.3, n) - 1.0,
        "12 atoms (geometric)": rng.choice(np.arange(12) * 8 + 4, n, p=np.geomspace(1, .15, 12) / np.geomspace(1, .15, 12).sum()) * scale,
    }
    return {k: np.clip(np.rint(v), 0, top).astype(np.int64) for k, v in out.items()}


def rank_errors(cdf: np.ndarray, coins: np.ndarray, tau: float) -> np.ndarray:
    below = np.where(coins > 0, cdf[np.maximum(coins - 1, 0)], 0.0)
    return np.maximum(np.maximum(below - tau, tau - cdf[coins]), 0.0)


def run_candidates(x: np.ndarray, coins: int, eps: float, tau: float, reps: int,
                   only: tuple[str, ...] | None = None) -> dict[str, tuple[float, float, float, float]]:
    """Per local candidate: (rms rank error, share within ±1.96σ, σ, the 95% quantile of the rank error)."""
    hist = np.bincount(x, minlength=coins)
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    out = {}
    for c in qg.candidates(coins, tau):
        if (only and c.mechanism not in only) or (c.check is not None and c.check(eps, n)):
            continue
        sigma = c.predict(eps, n)
        answers = np.array([int(simulate(c.protocol(eps)(n), np.random.default_rng([29, t]), hist=hist)
                                .extra["answers"][tau].extra["coin"]) for t in range(reps)])
        e = rank_errors(cdf, answers, tau)
        out[c.mechanism] = (float(np.sqrt(np.mean(e ** 2))), float(np.mean(e <= planner.Z95 * sigma)), sigma,
                            float(np.quantile(e, 0.95)))
    return out


def pick(coins: int, tau: float, eps: float, n: int) -> str:
    """The planner's choice among the local candidates: the smallest σ·W, the first listed on a tie."""
    cands = [c for c in qg.candidates(coins, tau) if c.check is None or not c.check(eps, n)]
    return min(cands, key=lambda c: c.predict(eps, n) * c.choice_weight).mechanism


def part_quantile(reps: int) -> None:
    for label, coins, n, eps, tau in (("median_d", 101, 10_000, 1.0, 0.5), ("quantile10_h", 20_001, 1_000, 1.0, 0.1)):
        chosen = pick(coins, tau, eps, n)
        print(f"\n{label}: INTEGER 0..{coins - 1}, n = {n:,}, ε = {eps:g}, τ = {tau:g}; the planner chooses {chosen} "
              f"(the same on every shape: public facts only). RMS rank error per candidate, {reps} runs:")
        names = None
        for shape, x in quantile_shapes(coins, n).items():
            res = run_candidates(x, coins, eps, tau, reps)
            if names is None:
                names = list(res)
                print(f"  {'shape':22s} " + " ".join(f"{m:>12s}" for m in names) + "   best         regret")
            best = min(res, key=lambda m: res[m][0])
            print(f"  {shape:22s} " + " ".join(f"{res[m][0]:12.4f}" for m in names)
                  + f"   {best:12s} {_ratio(res[chosen][0], res[best][0]):6.2f}", flush=True)


def part_zipf(reps: int) -> None:
    coins = 1001
    print(f"\nPredicted 95% rank error (±1.96σ) held, INTEGER 0..1000, {reps} runs: share within, and the multiple of "
          f"σ that 95% would need (the 95% quantile of the rank error over 1.96σ)")
    for n, eps, tau in ((5_000, 1.0, 0.5), (5_000, 1.0, 0.9), (20_000, 1.0, 0.5), (5_000, 4.0, 0.5),
                        (50_000, 0.5, 0.5)):
        rng = np.random.default_rng([41, n])
        shapes = {f"zipf {a:g}": np.minimum(rng.zipf(a, n) - 1, coins - 1) for a in (1.1, 1.3, 1.6, 2.0)}
        smooth = quantile_shapes(coins, n)
        shapes.update({k: smooth[k] for k in ("uniform", "lognormal (grid h)", "bimodal (grid m)", "normal")})
        print(f"  n = {n:,}, ε = {eps:g}, τ = {tau:g}")
        for shape, x in shapes.items():
            res = run_candidates(x, coins, eps, tau, reps, only=("bayess", "naive_nbs"))
            print(f"    {shape:20s} " + "   ".join(
                f"{m} ±{1.96 * s:.4f}: {w:.3f} (×{q / (1.96 * s):.2f})" for m, (_, w, s, q) in res.items()),
                flush=True)


def part_coins(reps: int) -> None:
    print(f"\nBayeSS / NaiveNBS, RMS rank error, τ = 0.5, {reps} runs; predicted: σ·W without / with the B weight")
    xs, ys = [], []
    for coins in (101, 301, 1001, 4001, 20_001):
        for n, eps in ((1_000, 1.0), (10_000, 1.0), (100_000, 1.0), (10_000, 4.0)):
            rng = np.random.default_rng([3, coins, n])
            shapes = {"uniform": rng.integers(0, coins, n),
                      "normal": np.clip(np.rint(rng.normal(coins / 2, coins / 7, n)), 0, coins - 1).astype(np.int64),
                      "lognormal": np.clip(np.rint(np.exp(rng.normal(7.8, 1.0, n)) * (coins - 1) / 20000), 0,
                                           coins - 1).astype(np.int64)}
            base = (planner.sigma_bayess(eps, n, coins) * planner.W_BAYESS
                    / (planner.sigma_nbs(eps, n, coins) * planner.W_NBS))
            now = base * planner.bayess_weight(coins) / planner.W_BAYESS
            ratios = []
            for x in shapes.values():
                res = run_candidates(x, coins, eps, 0.5, reps, only=("bayess", "naive_nbs"))
                ratios.append(res["bayess"][0] / res["naive_nbs"][0])
            xs.append(math.log(math.log(coins) / planner.LN_CALIBRATION))
            ys.append(math.log(np.median(ratios) / base))
            print(f"  B {coins:6d} n {n:7,d} ε {eps:g}: measured {' '.join(f'{r:.2f}' for r in ratios)}; predicted "
                  f"{base:.2f} / {now:.2f} ({'bayess' if now <= 1 else 'naive_nbs'} chosen)", flush=True)
    slope, intercept = np.polyfit(xs, ys, 1)
    print(f"  fit: log(measured / predicted) = {intercept:.2f} + {slope:.2f} log(ln B / ln 1024)")


def extreme_table(n: int, seed: int = 7) -> pa.Table:
    """The coverage grid's columns m and u (the same users) and three more shapes on 0..100."""
    rng = np.random.default_rng([seed, n])
    grid = cg.make_table(n)
    return pa.table({
        "m": grid.column("m"),   # bimodal: the grid's min_m cell
        "u": grid.column("u"),   # uniform
        "nrm": np.clip(rng.normal(50, 12, n), 0, 100),
        "skew": np.clip(np.exp(rng.normal(3.0, 0.5, n)), 0, 100),
        "edge": np.clip(rng.exponential(8, n), 0, 100),
    })


def part_extreme(reps: int) -> None:
    n, eps = 1_000, 4.0
    table = extreme_table(n)
    con = ldpql.connect(evaluation=True, seed=3)
    con.register("t", table, private={c: {"between": (0.0, 100.0), "not_null": True} for c in table.column_names},
                 budget=1e12)
    print(f"\nmin_m: n = {n:,}, ε = {eps:g}, continuous BETWEEN 0 AND 100; RMSE against the true extreme, {reps} runs "
          f"(EVALUATE ... REPEAT)")
    print(f"  {'statement':14s} {'extreme':>8s} {'buckets_grr':>12s} {'buckets_oue':>12s}  chosen        best  regret"
          "   against m_γ (what it estimates; 100 runs)")
    for col in table.column_names:
        for fn in ("MIN", "MAX"):
            rmse = {}
            chosen = None
            for mech in ("buckets_grr", "buckets_oue"):
                res = con.sql(f"EVALUATE SELECT LDP_{fn}({col}, mechanism => '{mech}') FROM t EPSILON {eps} "
                              f"OPTIONS (seed = {zlib_seed(col + fn)}) REPEAT {reps}")
                row = dict(zip(res.columns, res.fetchall()[0]))
                rmse[mech], truth = row["rmse"], row["truth"]
            plan = con.sql(f"EXPLAIN SELECT LDP_{fn}({col}) FROM t EPSILON {eps}").plan
            chosen = plan.aggregates[0].chosen.mechanism
            best = min(rmse, key=rmse.get)
            # what the bucket search estimates: m_γ, γ the chosen plan's (docs/extremes.md)
            oracle = chosen.split("_")[1]
            gamma = pm._bucket_plan(oracle, eps, n, 1 << 30).gamma(lambda d, o=oracle: pm.BUCKET_ORACLES[o](eps, d), n, 0.95)
            x = np.sort(table.column(col).to_numpy())
            k = max(math.ceil(gamma * n), 1) - 1
            m_gamma = x[k] if fn == "MIN" else x[n - 1 - k]
            err = {mech: np.mean([abs(con.sql(f"SELECT LDP_{fn}({col}, mechanism => '{mech}') FROM t EPSILON {eps} "
                                              f"OPTIONS (seed = {zlib_seed(col + fn) + i})").fetchone()[0] - m_gamma)
                                  for i in range(min(reps, 100))]) for mech in rmse}
            print(f"  LDP_{fn}({col:4s})   {truth:8.2f} {rmse['buckets_grr']:12.2f} {rmse['buckets_oue']:12.2f}  "
                  f"{chosen:12s} {best:12s} {_ratio(rmse[chosen], rmse[best]):5.2f}   γ = {gamma:.3f}: m_γ "
                  f"{m_gamma:6.2f}, mean |error| grr {err['buckets_grr']:6.2f} oue {err['buckets_oue']:6.2f}",
                  flush=True)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else (1.0 if a == 0 else float("inf"))


def zlib_seed(text: str) -> int:
    return zlib.crc32(text.encode()) % 2 ** 31


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--part", choices=("quantile", "extreme", "zipf", "coins"), action="append")
    args = ap.parse_args()
    parts = args.part or ["quantile", "extreme", "zipf", "coins"]
    for p in parts:
        {"quantile": part_quantile, "extreme": part_extreme, "zipf": part_zipf, "coins": part_coins}[p](args.reps)


if __name__ == "__main__":
    main()
