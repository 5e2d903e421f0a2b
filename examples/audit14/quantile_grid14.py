"""Audit 14 (hostile review) of the bracket-bound rank error (commits 19f4c8d, 02e29fb): a NEW held-out grid.

The grid below was written down BEFORE any of its results were seen. None of its shapes is one of examples/qrank2's
(the six shapes the rule was chosen on) or examples/audit9's (its held-out check); its seeds ([1414, ...]) are new.

Shapes (``shapes(n)``; fixed seed [1414, n]; exact counts where a step is named):
  gap50     INTEGER 0..1000: exactly n/2 users N(250, 40) clipped to 0..449, n/2 N(750, 40) clipped to 551..1000:
            F == 0.5 on the whole gap 449..550 (τ = 0.5 falls exactly in the gap).
  gap05     INTEGER 0..1000: exactly 5% uniform on 0..99, 95% N(600, 100) clipped to 300..1000: F == 0.05 on 99..299.
  zipf      INTEGER 0..200000: Zipf(1.3) - 1, clipped (value 0 holds ~25%, a long tail of atoms).
  wideunif  INTEGER 0..100000: uniform (100,001 coins, about one user per value at n <= 10^5).
  gamma     DOUBLE BETWEEN 0 AND 20: Gamma(2, 1), the engine's default 2^16 coins.
  narrow1k  DOUBLE BETWEEN 0 AND 10, resolution => 1024: N(5, 0.05) (declared range 100 sd wide; buckets of 0.0098
            hold up to ~8% each).
  steps10   INTEGER 0..99: exactly n/10 users on each of 5, 15, ..., 95: F(v) == τ exactly for τ = 0.3, 0.5, 0.9.
  bounds    INTEGER 0..1000: exactly 30% at 0, 30% at 1000, 40% uniform 1..999: F(0) == 0.3 (τ = 0.3 on the step),
            τ <= 0.05 and τ >= 0.95 inside the point masses at the domain's bounds.
n ∈ {500, 2,000, 20,000, 100,000}; τ ∈ {0.02, 0.05, 0.3, 0.5, 0.9, 0.95, 0.98}; ε ∈ {0.25, 1, 8};
per cell: the planner's own choice (EXPLAIN on the registered table, public facts only) and each search forced
(BayeSS, NaiveNBS, shuffled NaiveNBS at δ = 1e-8 where the shuffle model applies); 200 runs, seeds [1414, t].
Per run, through the engine's own path (``ldpql.simulation.simulate`` of the candidate's protocol, as
examples/audit9/quantile_heldout.py and examples/qrank3/collect.py do): the coin rank error
max(F(v-1) - τ, τ - F(v), 0) against ``shown_rank_error`` at the statement confidences 0.8, 0.9, 0.95, 0.99; and what
a SQL result DISPLAYS (the cell note's ±α, :.3g, when α > 1.05 z·σ, otherwise the predicted ±z·σ, :.3g).
For the DOUBLE shapes also the rank error of the reported VALUE (the bucket midpoint m): max(P(x < m) - τ,
τ - P(x <= m), 0).
Scored per cell and confidence: coverage, exact Clopper-Pearson 95% range, width = mean shown / z·σ, and
efficiency = mean shown / the realised error's nominal quantile in the cell (how much wider than needed).

    AUDIT14_CODE=<commit> PYTHONPATH=/tmp/code_<commit> nice python examples/audit14/quantile_grid14.py [reps] \
        [part/parts[:sub/subs]]                                   -> parts/grid14_<commit>[_part[_sub]].csv
    (run as 1/10, 2/10:1/2, 2/10:2/2, ..., 10/10:2/2, one at a time: each under ~10 minutes)
    AUDIT14_CODE=<commit> python examples/audit14/quantile_grid14.py merge  -> grid14_<commit>.csv
"""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

HERE = Path(__file__).parent
# which engine the rows were measured on (the commit of the ldpql on PYTHONPATH): grid14_<code>.csv. The engine
# changed during this audit (02e29fb -> 71ea9e8: bracket_bound pools the k nearest coins), so both were measured from
# snapshots (git archive <commit> ldpql | tar -x -C /tmp/code_<commit>; PYTHONPATH=/tmp/code_<commit>).
CODE = os.environ.get("AUDIT14_CODE", "head")
CONFS = (0.8, 0.9, 0.95, 0.99)
Z = {c: NormalDist().inv_cdf(0.5 + c / 2) for c in CONFS}
NS = (500, 2_000, 20_000, 100_000)
TAUS = (0.02, 0.05, 0.3, 0.5, 0.9, 0.95, 0.98)
EPSILONS = (0.25, 1.0, 8.0)
SEARCHES = ("bayess", "naive_nbs", "shuffle_nbs")
SEED = 1414


class Shape:
    """A column: its declaration (integer or DOUBLE range, resolution) and the users' raw values."""

    def __init__(self, name: str, values: np.ndarray, low: float, high: float, integer: bool,
                 resolution: int | None = None):
        self.name, self.x, self.low, self.high, self.integer = name, values, low, high, integer
        self.resolution = resolution
        if integer:
            self.size, self.step = int(high - low + 1), 1.0
            self.coins = (np.rint(values) - low).astype(np.int64)
        else:
            self.size = resolution or planner.RESOLUTION
            self.step = (high - low) / self.size
            # the engine's bucket: floor((clamp(x) - low) / step), forced into [0, size)
            self.coins = np.clip(np.floor((np.clip(values, low, high) - low) / self.step), 0, self.size - 1
                                 ).astype(np.int64)
        self.hist = np.bincount(self.coins, minlength=self.size)
        self.cdf = np.cumsum(self.hist) / len(values)
        self.sorted = np.sort(values) if not integer else None

    @property
    def sql_args(self) -> str:
        return f", resolution => {self.resolution}" if self.resolution else ""

    def coin_error(self, v: int, tau: float) -> float:
        return max(0.0, (self.cdf[v - 1] if v > 0 else 0.0) - tau, tau - self.cdf[v])

    def value_error(self, v: int, tau: float) -> float:
        """The rank error of the value the result reports (a bucket's midpoint on a DOUBLE column)."""
        if self.integer:
            return self.coin_error(v, tau)
        m = self.low + v * self.step + self.step / 2
        n = len(self.sorted)
        below, upto = np.searchsorted(self.sorted, m, "left") / n, np.searchsorted(self.sorted, m, "right") / n
        return max(0.0, below - tau, tau - upto)


def shapes(n: int) -> dict[str, Shape]:
    rng = np.random.default_rng([SEED, n])
    half, five, tenth, thirty = n // 2, n * 5 // 100, n // 10, n * 3 // 10
    gap50 = np.concatenate([np.clip(np.rint(rng.normal(250, 40, half)), 0, 449),
                            np.clip(np.rint(rng.normal(750, 40, n - half)), 551, 1000)])
    gap05 = np.concatenate([rng.integers(0, 100, five), np.clip(np.rint(rng.normal(600, 100, n - five)), 300, 1000)])
    zipf = np.minimum(rng.zipf(1.3, n) - 1, 200_000)
    steps = np.repeat(np.arange(5, 100, 10), tenth)
    bounds = np.concatenate([np.zeros(thirty), np.full(thirty, 1000), rng.integers(1, 1000, n - 2 * thirty)])
    out = [Shape("gap50", gap50, 0, 1000, True), Shape("gap05", gap05, 0, 1000, True),
           Shape("zipf", zipf, 0, 200_000, True), Shape("wideunif", rng.integers(0, 100_001, n), 0, 100_000, True),
           Shape("gamma", rng.gamma(2.0, 1.0, n), 0.0, 20.0, False),
           Shape("narrow1k", rng.normal(5.0, 0.05, n), 0.0, 10.0, False, 1024),
           Shape("steps10", steps, 0, 99, True), Shape("bounds", bounds, 0, 1000, True)]
    for s in out:
        assert len(s.x) == n, (s.name, len(s.x))
    return {s.name: s for s in out}


def target(shape: Shape, tau: float, confidence: float = 0.95) -> planner.QuantileTarget:
    # (the coins as the planner declares them: a DOUBLE column's buckets report their midpoints; session 11, the
    # rank error of a bucketed answer is its midpoint's, so the harness must say which coins are buckets)
    space = CoinSpace(shape.size, low=shape.low, step=shape.step, integer=shape.integer,
                      offset=0.0 if shape.integer else shape.step / 2)
    return planner.QuantileTarget("x", Encoding("x", shape.size, "x"), "", None, planner.UNIT, tau=tau,
                                  space=space, taus=(tau,), confidence=confidence)


def candidates(shape: Shape, tau: float, confidence: float = 0.95) -> dict:
    """The planner's candidates for the statement at ``confidence`` (a bound answer's σ and a useless search's capped
    σ are shown at the statement's z, so σ depends on it; the protocols do not)."""
    out = {c.mechanism: c for c in planner.quantile_candidates(target(shape, tau, confidence))}
    out["shuffle_nbs"].delta = 1e-8
    return out


def chosen(shape: Shape, tau: float, eps: float) -> str:
    """The planner's choice (EXPLAIN: public facts only) on the registered column."""
    con = ldpql.connect(seed=1, evaluation=True)
    decl = {"between": (shape.low, shape.high)} | ({"integer": True} if shape.integer else {})
    con.register("t", pa.table({"x": shape.x}), private={"x": decl}, budget=100)
    plan = con.sql(f"EXPLAIN SELECT LDP_QUANTILE(x, {tau}{shape.sql_args}) FROM t EPSILON {eps}").plan
    return plan.aggregates[0].chosen.mechanism


def displayed(alpha: float, zs: float) -> float:
    """What a SQL result shows: the cell note's ±α (3 significant digits) when α > 1.05 z·σ, else the predicted."""
    return float(f"{alpha:.3g}") if alpha > zs * 1.05 else float(f"{zs:.3g}")


def clopper(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def run_cell(c, shape: Shape, tau: float, eps: float, reps: int, head: int = SEED) -> dict:
    n = len(shape.x)
    sigmas = {q: candidates(shape, tau, q)[c.mechanism].predict(eps, n) for q in CONFS}
    sigma = sigmas[0.95]
    errs, verrs, fallback = [], [], 0
    shown = {q: [] for q in CONFS}
    disp = {q: [] for q in CONFS}
    for t in range(reps):
        est = simulate(c.protocol(eps)(n), np.random.default_rng([head, t]), hist=shape.hist)
        a = est.extra["answers"][tau]
        v = int(a.extra["coin"])
        errs.append(shape.coin_error(v, tau))
        verrs.append(shape.value_error(v, tau))
        fallback += a.extra.get("search") == "naive_nbs"
        for q, z in Z.items():
            s = planner.shown_rank_error(a, tau, sigmas[q], z)
            shown[q].append(s)
            disp[q].append(displayed(s, z * sigmas[q]))
    e, ve = np.array(errs), np.array(verrs)
    row = {"sigma": round(sigma, 6), "mean_error": round(float(e.mean()), 6), "fallback": fallback}
    for q, z in Z.items():
        a, d = np.array(shown[q]), np.array(disp[q])
        k = int(np.sum(e <= a + 1e-12))
        lo, hi = clopper(k, reps)
        need = float(np.quantile(e, q))
        tag = round(q * 100)
        row.update({f"cov{tag}": k / reps, f"cp_lo{tag}": round(lo, 4), f"cp_hi{tag}": round(hi, 4),
                    f"disp_cov{tag}": float(np.mean(e <= d + 1e-12)),
                    f"width{tag}": round(float(a.mean() / (z * sigmas[q])), 3) if sigmas[q] > 0 else math.nan,
                    f"shown{tag}": round(float(a.mean()), 5),
                    f"eff{tag}": round(float(a.mean() / need), 2) if need > 0 else math.inf,
                    f"capped{tag}": float(np.mean(a >= max(tau, 1 - tau) - 1e-12))})
        if not shape.integer:
            row[f"vcov{tag}"] = float(np.mean(ve <= a + 1e-12))
    if not shape.integer:
        row["mean_value_error"] = round(float(ve.mean()), 6)
    return row


def configs():
    for n in NS:
        for name in ("gap50", "gap05", "zipf", "wideunif", "gamma", "narrow1k", "steps10", "bounds"):
            for tau in TAUS:
                for eps in EPSILONS:
                    yield n, name, tau, eps


def main(reps: int = 200, part: str = "1/1") -> None:
    """``part`` k/parts (every parts-th configuration), or k/parts:j/m (every m-th of those, from the j-th)."""
    spec, _, sub = part.partition(":")
    k, parts = (int(s) for s in spec.split("/"))
    j, m = (int(s) for s in sub.split("/")) if sub else (1, 1)
    rows = []
    cache: dict[int, dict[str, Shape]] = {}
    mine = [c for i, c in enumerate(configs()) if i % parts == k - 1]
    for i, (n, name, tau, eps) in enumerate(configs()):
        if i % parts != k - 1 or mine.index((n, name, tau, eps)) % m != j - 1:
            continue
        shape = cache.setdefault(n, shapes(n))[name]
        pick = chosen(shape, tau, eps)
        cands = candidates(shape, tau)
        for mech in dict.fromkeys([pick, *SEARCHES]):
            c = cands[mech]
            base = {"shape": name, "B": shape.size, "n": n, "eps": eps, "tau": tau, "mechanism": mech,
                    "chosen": mech == pick, "reps": reps, "max_share": round(float(shape.hist.max() / n), 4)}
            why = c.check(eps, n) if c.check is not None else None
            if why:
                rows.append({**base, "refused": why[:70]})
                continue
            rows.append({**base, **run_cell(c, shape, tau, eps, reps)})
        print(i, n, name, tau, eps, pick, flush=True)
    write(rows, HERE / "parts" / f"grid14_{CODE}{'' if parts == 1 else f'_{k}'}{'' if m == 1 else f'_{j}'}.csv")


def write(rows: list[dict], path: Path) -> None:
    keys = list(dict.fromkeys(key for r in rows for key in r))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def merge() -> None:
    rows = []
    for p in sorted((HERE / "parts").glob(f"grid14_{CODE}_*.csv")):
        with open(p) as fh:
            rows += list(csv.DictReader(fh))
    order = {key: i for i, key in enumerate(configs())}
    rows.sort(key=lambda r: (order[(int(r["n"]), r["shape"], float(r["tau"]), float(r["eps"]))],
                             r["chosen"] != "True", r["mechanism"]))
    write(rows, HERE / f"grid14_{CODE}.csv")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "merge":
        merge()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, sys.argv[2] if len(sys.argv) > 2 else "1/1")
