"""Reproduce the experiments of seed 000 (Fukuchi et al. 2019, locally private minimum finding), spec §4.

Synthetic data (spec §4.1): x_min + Δ·Beta(α, β) on [-1, 1], in the fixed setting (x_(i) = x_min +
Δ·BetaPPF((i-1)/(N-1))) and the i.i.d. setting; error = |x̃ - x_min|, its mean over R runs at each of the six
x_min shifts, and the worst mean over the shifts with the 5%/95% quantiles at that shift (A15):
  - error against N = 2^10 .. 2^20 at ε = 1 and 4, both schedules ('lower α' with α₀ = 1, 'unknown α');
  - error against ε = 2^-3 .. 2^6 at N = 2^15 and 2^20, both schedules;
  - the naive Laplace baseline (spec §2.6) against N at ε = 1 and 4.
MovieLens (spec §4.2, optional: pass the ml-latest ``ratings.csv``): min and max of each user's average
rating (domain [0, 5]) and of each user's number of ratings (domain [0, movies/2]), N = 2^14 .. 2^18 users
subsampled without replacement in every run, unknown-α schedule, ε = 1 and 4; errors in [-1, 1] units
against the full-dataset extreme (A12; the subsample's own extreme is reported too), and the fitted
α = 1/(2A) of Err ≈ C·(ln N)^B/N^A (§4.4; also with B = 6A).

Simulation path: the engine's own protocol (``ldpql.mechanisms.minimum.search``, the generator that
LDP_MIN/LDP_MAX run), driven in numpy without SQL. Each round's reply is drawn by the round's randomizer
(the engine's binary RandomizedResponse at ε/L, behind ThresholdBit) with ``sample_aggregate``: two binomials
from the exact number of users at or below the threshold (spec §2.7). Those counts come from binary search
on the sorted data (fixed setting, MovieLens subsamples), or, in the i.i.d. setting, are drawn exactly and
lazily: the users inside a grid's range are split over its blocks by a multinomial with the Beta
probabilities (the same law as drawing the N values first). The Laplace baseline runs the engine's
LaplaceMin randomizer on every user (fewer runs at large N: see --laplace-runs).

    python examples/reproduce_min.py                      # full size: 1000 runs (about 10 minutes)
    python examples/reproduce_min.py --runs 100 --quick   # a few seconds
    python examples/reproduce_min.py --movielens ml-latest/ratings.csv

Writes CSV files (and PNG plots when matplotlib is installed: pip install 'ldpql[plot]') to --out, and
prints the measured errors beside the spec's reference numbers (§4.5) with their ratio.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special, stats

from ldpql.mechanisms.base import Encoding
from ldpql.mechanisms.minimum import Grid, GridEncoding, LaplaceMin, Lattice, laplace_error, schedule, search
from ldpql.simulation import drive

GRID_DEPTH = 8          # blocks per grid in this simulation (a simulation detail: the replies' law is the same)
SCHEDULES = {"lower": 1.0, "unknown": None}   # name -> α₀ (None: the unknown-α schedule)
DOMAIN = Lattice(-1.0, 1.0)

# spec §4.5: worst-shift mean error, fixed setting, α = β = 1, Δ = 0.3, 1000 runs
REFERENCE_N = {  # log2 N -> (lower ε=1, lower ε=4, unknown ε=1, unknown ε=4)
    10: (0.52, 0.087, 1.14, 0.089), 12: (0.17, 0.052, 0.32, 0.068), 14: (0.107, 0.031, 0.179, 0.048),
    16: (0.065, 0.018, 0.131, 0.035), 18: (0.039, 0.0104, 0.097, 0.025), 20: (0.0226, 0.0061, 0.066, 0.017)}
REFERENCE_EPS = {  # (schedule, log2 N) -> errors at ε = 2^-3 .. 2^6
    ("lower", 15): (2.00, 1.62, 0.175, 0.089, 0.046, 0.025, 0.015, 0.012, 0.011, 0.011),
    ("lower", 20): (0.176, 0.088, 0.045, 0.023, 0.012, 0.006, 0.0036, 0.0027, 0.0024, 0.0025),
    ("unknown", 15): (2.00, 2.00, 1.36, 0.162, 0.082, 0.043, 0.024, 0.014, 0.010, 0.009),
    ("unknown", 20): (2.00, 0.32, 0.131, 0.066, 0.033, 0.017, 0.009, 0.005, 0.003, 0.002)}
REFERENCE_LAPLACE = {(1.0, 10): 13.5, (1.0, 15): 20.4, (1.0, 20): 27.3, (4.0, 10): 3.27, (4.0, 15): 5.00,
                     (4.0, 20): 6.73}
REFERENCE_MOVIELENS_ALPHA = {("rating", "min"): 7.69, ("rating", "max"): 2.50, ("count", "min"): 1.31,
                             ("count", "max"): 113.0}


@dataclass(frozen=True)
class Beta:
    """x_min + Δ·Beta(a, b): the synthetic distributions of spec §4.1."""

    a: float = 1.0
    b: float = 1.0
    delta: float = 0.3

    def shifts(self) -> list[float]:
        """The six x_min ∈ {k·0.2·(2-Δ) - 1}, so that the support stays inside [-1, 1]."""
        return [k * 0.2 * (2 - self.delta) - 1 for k in range(6)]

    def fixed(self, n: int, xmin: float) -> np.ndarray:
        """The fixed setting: x_(i) = x_min + Δ·F*((i-1)/(N-1)), sorted."""
        return xmin + self.delta * stats.beta.ppf(np.linspace(0.0, 1.0, n), self.a, self.b)

    def cdf(self, x: np.ndarray, xmin: float) -> np.ndarray:
        return special.betainc(self.a, self.b, np.clip((np.asarray(x) - xmin) / self.delta, 0.0, 1.0))


# ---- counts of users per grid block: what the executor's exact path gets from DuckDB --------------------------

class SortedCounts:
    """Users per block by binary search on the users' sorted lattice indices (fixed data, subsamples)."""

    def __init__(self, sorted_values: np.ndarray, lattice: Lattice = DOMAIN):
        self.g = lattice.index(sorted_values)
        self.n = len(self.g)
        self._memo: tuple[Grid, np.ndarray] | None = None

    def __call__(self, encoding: Encoding) -> np.ndarray:
        grid = encoding.grid
        if self._memo is None or self._memo[0] != grid:
            self._memo = (grid, grid.histogram(self.g))
        return self._memo[1]


class LazyCounts:
    """Users per block for N i.i.d. draws from a CDF, drawn only where the search looks: the users inside a
    grid's range (a count already drawn) are split over its blocks by a multinomial with the CDF's block
    probabilities, which is the law of those counts had the N values been drawn first."""

    def __init__(self, n: int, cdf, rng: np.random.Generator, lattice: Lattice = DOMAIN):
        self.n, self.cdf, self.rng, self.lattice = n, cdf, rng, lattice
        self.known = {0: 0, lattice.top: n}   # lattice index -> users at or below (no mass at a point)
        self._memo: tuple[Grid, np.ndarray] | None = None

    def __call__(self, encoding: Encoding) -> np.ndarray:
        grid = encoding.grid
        if self._memo is None or self._memo[0] != grid:
            edges = grid.j0 + grid.step * np.arange(grid.size + 1)
            if any(int(j) not in self.known for j in edges[1:-1]):
                p = np.diff(self.cdf(self.lattice.points(edges)))
                total = p.sum()
                split = self.rng.multinomial(self.known[grid.j1] - self.known[grid.j0],
                                             p / total if total > 0 else np.full(len(p), 1 / len(p)))
                for j, c in zip(edges[1:], self.known[grid.j0] + np.cumsum(split)):
                    self.known[int(j)] = int(c)
            cum = np.array([self.known[int(j)] for j in edges[1:-1]], dtype=np.int64)
            self._memo = (grid, np.diff(np.concatenate([[0], cum, [self.n]])))
        return self._memo[1]


def encode(grid: Grid) -> GridEncoding:
    return GridEncoding("", grid.size, grid=grid)


def estimate(n: int, epsilon: float, alpha: float | None, counts, rng: np.random.Generator,
             lattice: Lattice = DOMAIN, negate: bool = False) -> float:
    """One run of the engine's protocol (LDP_MIN, or LDP_MAX when ``negate``) on [lattice.low, lattice.high]."""
    plan = schedule(n, epsilon, alpha)
    low, high = (-lattice.high, -lattice.low) if negate else (lattice.low, lattice.high)
    est = drive(search(n, plan, low, high, encode, negate, grid_depth=GRID_DEPTH), counts, rng)
    return float(est.values[0])


# ---- the synthetic experiments --------------------------------------------------------------------------------

def errors(n: int, epsilon: float, alpha: float | None, dist: Beta, xmin: float, setting: str, runs: int,
           rng: np.random.Generator, data: np.ndarray | None = None) -> np.ndarray:
    """|x̃ - x_min| over ``runs`` runs at one shift."""
    if setting == "fixed":
        counts = SortedCounts(dist.fixed(n, xmin) if data is None else data)
        return np.array([abs(estimate(n, epsilon, alpha, counts, rng) - xmin) for _ in range(runs)])
    out = np.empty(runs)
    for r in range(runs):
        counts = LazyCounts(n, lambda x: dist.cdf(x, xmin), rng)
        out[r] = abs(estimate(n, epsilon, alpha, counts, rng) - xmin)
    return out


def worst_shift(n: int, epsilon: float, alpha: float | None, dist: Beta, setting: str, runs: int,
                seed: int, data: dict | None = None) -> dict:
    """The worst mean error over the six shifts, with the 5%/95% quantiles at that shift (A15)."""
    best = None
    for k, xmin in enumerate(dist.shifts()):
        rng = np.random.default_rng([seed, n, int(epsilon * 1024), k, 0 if alpha is None else 1])
        e = errors(n, epsilon, alpha, dist, xmin, setting, runs, rng, None if data is None else data[(n, k)])
        if best is None or e.mean() > best["error"]:
            best = {"error": float(e.mean()), "q05": float(np.quantile(e, 0.05)), "q95": float(np.quantile(e, 0.95)),
                    "worst_xmin": xmin}
    s = schedule(n, epsilon, alpha)
    best.update(L=s.depth, h_N=s.h, gamma=s.gamma)
    return best


def sweep_n(ns, epsilons, runs: int, settings=("fixed",), dist: Beta = Beta(), seed: int = 0,
            progress=None) -> list[dict]:
    """Error against N (Fig. 1 left and middle, Fig. 2)."""
    rows = []
    for setting in settings:
        data = {(n, k): dist.fixed(n, xmin) for n in ns for k, xmin in enumerate(dist.shifts())} \
            if setting == "fixed" else None
        for name, alpha in SCHEDULES.items():
            for eps in epsilons:
                for n in ns:
                    r = worst_shift(n, eps, alpha, dist, setting, runs, seed, data)
                    rows.append({"setting": setting, "schedule": name, "epsilon": eps, "n": n, **r})
                    if progress:
                        progress(rows[-1])
    return rows


def sweep_eps(ns, epsilons, runs: int, dist: Beta = Beta(), seed: int = 1, progress=None) -> list[dict]:
    """Error against ε (Fig. 1 right), fixed setting."""
    return sweep_n(ns, epsilons, runs, ("fixed",), dist, seed, progress)


def laplace_baseline(ns, epsilons, runs: int, dist: Beta = Beta(), seed: int = 2, progress=None) -> list[dict]:
    """The naive baseline (spec §2.6): every user adds Laplace(2/ε) once (the engine's LaplaceMin), the server
    takes the minimum, unclamped. Its error does not depend on the shift (no clamping), so one shift is run;
    ``closed_form`` is its value with every user at the minimum (the worst case)."""
    rows = []
    xmin = dist.shifts()[0]
    for eps in epsilons:
        r = LaplaceMin(eps)
        for n in ns:
            rng = np.random.default_rng([seed, n, int(eps * 1024)])
            x = dist.fixed(n, xmin)
            e = np.array([abs(float(r.estimate(r.aggregate(r.randomize(x, rng)), n)[0]) - xmin) for _ in range(runs)])
            rows.append({"setting": "fixed", "schedule": "laplace", "epsilon": eps, "n": n, "error": float(e.mean()),
                         "q05": float(np.quantile(e, 0.05)), "q95": float(np.quantile(e, 0.95)), "worst_xmin": xmin,
                         "closed_form": laplace_error(n, eps), "runs": runs})
            if progress:
                progress(rows[-1])
    return rows


# ---- MovieLens ---------------------------------------------------------------------------------------------

def load_movielens(path: str) -> dict:
    """Per user: the average rating and the number of ratings (computed user-side, A20), and the number of
    distinct rated movies (the count domain is [0, movies/2], A19)."""
    import duckdb

    con = duckdb.connect()
    src = f"read_csv('{path}', header = true, auto_detect = true)"
    rows = con.execute(f"SELECT avg(rating), count(*) FROM {src} GROUP BY userId").fetchnumpy()
    movies = con.execute(f"SELECT count(DISTINCT movieId) FROM {src}").fetchall()[0][0]
    avg = np.asarray(rows["avg(rating)"], dtype=float)
    cnt = np.asarray(rows["count_star()"], dtype=float)
    return {"users": len(avg), "movies": int(movies),
            "tasks": {"rating": (avg, (0.0, 5.0)), "count": (cnt, (0.0, movies / 2))}}


def rescale(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """[low, high] -> [-1, 1] (spec §2.5), clipped locally to the domain (A7)."""
    return np.clip(2 * (np.asarray(x) - low) / (high - low) - 1, -1.0, 1.0)


def movielens(ml: dict, ns, epsilons, runs: int, seed: int = 3, progress=None) -> list[dict]:
    """Min and max of both tasks, unknown-α schedule; one subsample of users per run, shared by the tasks."""
    tasks = {name: rescale(values, *dom) for name, (values, dom) in ml["tasks"].items()}
    full = {(t, d): (v.min() if d == "min" else v.max()) for t, v in tasks.items() for d in ("min", "max")}
    out = []
    for n in ns:
        if n > ml["users"]:
            continue
        errs = {(t, d, e): ([], []) for t in tasks for d in ("min", "max") for e in epsilons}
        rng = np.random.default_rng([seed, n])
        for _ in range(runs):
            pick = rng.choice(ml["users"], n, replace=False)
            for t, v in tasks.items():
                sample = np.sort(v[pick])
                for d in ("min", "max"):
                    counts = SortedCounts(sample if d == "min" else -sample[::-1])  # the max: -x, sorted
                    sub = sample[0] if d == "min" else sample[-1]
                    for e in epsilons:
                        x = estimate(n, e, None, counts, rng, DOMAIN, negate=d == "max")
                        errs[(t, d, e)][0].append(abs(x - full[(t, d)]))
                        errs[(t, d, e)][1].append(abs(x - sub))
        for (t, d, e), (vs_full, vs_sub) in errs.items():
            a = np.array(vs_full)
            out.append({"task": t, "direction": d, "epsilon": e, "n": n, "error": float(a.mean()),
                        "q05": float(np.quantile(a, 0.05)), "q95": float(np.quantile(a, 0.95)),
                        "error_vs_subsample": float(np.mean(vs_sub)), "truth": float(full[(t, d)]),
                        "runs": runs})
            if progress:
                progress(out[-1])
    return out


def fit_rate(ns, errs_by_eps: dict) -> dict:
    """Err ≈ C_ε·(ln N)^B/N^A by OLS in log space, jointly over ε (shared A, B; one C per ε, A10), and with the
    Corollary 2 shape B = 6A; α = 1/(2A). With 5 N the 3-parameter fit is ill-conditioned (§4.4)."""
    ln_n = np.log(np.asarray(ns, dtype=float))
    rows, ys, rows6 = [], [], []
    eps_list = sorted(errs_by_eps)
    for i, e in enumerate(eps_list):
        for ln, err in zip(ln_n, errs_by_eps[e]):
            onehot = [1.0 if j == i else 0.0 for j in range(len(eps_list))]
            rows.append(onehot + [math.log(ln), -ln])
            rows6.append(onehot + [6 * math.log(ln) - ln])
            ys.append(math.log(max(err, 1e-300)))
    coef = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
    coef6 = np.linalg.lstsq(np.array(rows6), np.array(ys), rcond=None)[0]
    a, b, a6 = coef[-1], coef[-2], coef6[-1]
    return {"A": float(a), "B": float(b), "alpha": float(1 / (2 * a)) if a > 0 else math.inf,
            "A_b6a": float(a6), "alpha_b6a": float(1 / (2 * a6)) if a6 > 0 else math.inf}


# ---- output ------------------------------------------------------------------------------------------------

def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def compare_table(rows_n: list[dict], rows_eps: list[dict], rows_lap: list[dict]) -> tuple[str, list[dict]]:
    """The measured errors beside the spec's reference numbers (§4.5), with measured/reference."""
    lines, cells = [], []
    cols = [("lower", 1.0), ("lower", 4.0), ("unknown", 1.0), ("unknown", 4.0)]
    got = {(r["schedule"], r["epsilon"], r["n"]): r["error"] for r in rows_n if r["setting"] == "fixed"}
    lines.append("Err vs N (fixed, α=β=1, Δ=0.3; worst shift): measured / reference = ratio")
    lines.append("log2 N | " + " | ".join(f"{s} ε={e:g}" for s, e in cols))
    for k, ref in REFERENCE_N.items():
        parts = []
        for (s, e), r in zip(cols, ref):
            m = got.get((s, e, 1 << k))
            if m is not None:
                cells.append({"table": "n", "schedule": s, "epsilon": e, "log2_n": k, "measured": m, "reference": r,
                              "ratio": m / r})
            parts.append(f"{m:.4g} / {r:g} = {m / r:.2f}" if m is not None else "-")
        lines.append(f"{k:>6} | " + " | ".join(parts))
    got = {(r["schedule"], r["n"], r["epsilon"]): r["error"] for r in rows_eps}
    if got:
        lines.append("Err vs ε (fixed): measured / reference = ratio, ε = 2^-3 .. 2^6")
        for (s, k), ref in REFERENCE_EPS.items():
            parts = []
            for i, r in enumerate(ref):
                e = 2.0 ** (i - 3)
                m = got.get((s, 1 << k, e))
                if m is not None:
                    cells.append({"table": "epsilon", "schedule": s, "epsilon": e, "log2_n": k, "measured": m,
                                  "reference": r, "ratio": m / r})
                parts.append(f"{m / r:.2f}" if m is not None else "-")
            lines.append(f"{s:>7} N=2^{k}: " + " ".join(parts))
    got = {(r["epsilon"], r["n"]): r["error"] for r in rows_lap}
    if got:
        lines.append("Laplace baseline: measured / reference = ratio")
        for (e, k), r in REFERENCE_LAPLACE.items():
            m = got.get((e, 1 << k))
            if m is not None:
                cells.append({"table": "laplace", "schedule": "laplace", "epsilon": e, "log2_n": k, "measured": m,
                              "reference": r, "ratio": m / r})
                lines.append(f"  ε={e:g} N=2^{k}: {m:.4g} / {r:g} = {m / r:.2f}")
    return "\n".join(lines), cells


def plot(out: Path, rows_n, rows_eps, rows_lap, rows_ml) -> list[Path]:
    """PNG figures (needs matplotlib): Err vs N per schedule, Err vs ε, the baseline, MovieLens."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG (pip install 'ldpql[plot]')", file=sys.stderr)
        return []
    made = []

    def band(ax, rows, label, key="n"):
        rows = sorted(rows, key=lambda r: r[key])
        x = [r[key] for r in rows]
        ax.plot(x, [r["error"] for r in rows], marker="o", label=label)
        ax.fill_between(x, [r["q05"] for r in rows], [r["q95"] for r in rows], alpha=0.2)

    if rows_n:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, s in zip(axes, SCHEDULES):
            for setting in sorted({r["setting"] for r in rows_n}):
                for e in sorted({r["epsilon"] for r in rows_n}):
                    band(ax, [r for r in rows_n if r["schedule"] == s and r["epsilon"] == e and r["setting"] == setting],
                         f"ε = {e:g} ({setting})")
            ax.set(xscale="log", yscale="log", xlabel="N", title=f"{s} α", ylabel="worst-shift mean |x̃ - x_min|")
            ax.legend()
        made.append(out / "min_vs_n.png")
        fig.tight_layout(), fig.savefig(made[-1], dpi=120), plt.close(fig)
    if rows_eps:
        fig, ax = plt.subplots(figsize=(6, 4))
        for s in SCHEDULES:
            for n in sorted({r["n"] for r in rows_eps}):
                band(ax, [r for r in rows_eps if r["schedule"] == s and r["n"] == n], f"{s}, N = 2^{int(math.log2(n))}",
                     "epsilon")
        ax.set(xscale="log", yscale="log", xlabel="ε", ylabel="worst-shift mean error", title="error against ε")
        ax.legend()
        made.append(out / "min_vs_eps.png")
        fig.tight_layout(), fig.savefig(made[-1], dpi=120), plt.close(fig)
    if rows_lap and rows_n:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, e in zip(axes, (1.0, 4.0)):
            for s in SCHEDULES:
                band(ax, [r for r in rows_n if r["schedule"] == s and r["epsilon"] == e and r["setting"] == "fixed"],
                     f"{s} α")
            band(ax, [r for r in rows_lap if r["epsilon"] == e], "Laplace baseline")
            ax.set(xscale="log", yscale="log", xlabel="N", title=f"ε = {e:g}", ylabel="mean error")
            ax.legend()
        made.append(out / "min_baseline.png")
        fig.tight_layout(), fig.savefig(made[-1], dpi=120), plt.close(fig)
    if rows_ml:
        fig, axes = plt.subplots(1, 4, figsize=(18, 4))
        for ax, (t, d) in zip(axes, [("rating", "min"), ("rating", "max"), ("count", "min"), ("count", "max")]):
            for e in sorted({r["epsilon"] for r in rows_ml}):
                band(ax, [r for r in rows_ml if r["task"] == t and r["direction"] == d and r["epsilon"] == e],
                     f"ε = {e:g}")
            ax.set(xscale="log", yscale="log", xlabel="N", title=f"{t} {d}")
            ax.legend()
        made.append(out / "min_movielens.png")
        fig.tight_layout(), fig.savefig(made[-1], dpi=120), plt.close(fig)
    return made


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="runs per point (spec: 1000)")
    ap.add_argument("--laplace-runs", type=int, default=200, help="runs per point of the Laplace baseline")
    ap.add_argument("--out", default="min_results", help="directory for the CSV and PNG files")
    ap.add_argument("--quick", action="store_true", help="smaller grids (N up to 2^14), for a smoke test")
    ap.add_argument("--no-iid", action="store_true", help="skip the i.i.d. setting")
    ap.add_argument("--movielens", help="path of the ml-latest ratings.csv (userId,movieId,rating,timestamp)")
    ap.add_argument("--ml-runs", type=int, default=1000, help="runs per MovieLens point")
    ap.add_argument("--ml-sizes", default="14,15,16,17,18", help="log2 N of the MovieLens subsamples")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    top = 14 if args.quick else 20
    ns = [1 << k for k in range(10, top + 1)]
    started = time.monotonic()

    def show(r):
        what = r.get("task", r.get("schedule")) + (f" {r['direction']}" if "direction" in r else "")
        print(f"  [{time.monotonic() - started:6.1f}s] {r.get('setting', 'movielens')} {what} ε={r['epsilon']:g} "
              f"N=2^{int(math.log2(r['n']))}: {r['error']:.4g} [{r['q05']:.3g}, {r['q95']:.3g}]", flush=True)

    print(f"simulation: the engine's protocol driven in numpy, exact aggregate (spec §2.7); {args.runs} runs")
    settings = ("fixed",) if args.no_iid else ("fixed", "iid")
    rows_n = sweep_n(ns, (1.0, 4.0), args.runs, settings, seed=args.seed, progress=show)
    eps_ns = [1 << 12, 1 << 14] if args.quick else [1 << 15, 1 << 20]
    rows_eps = sweep_eps(eps_ns, [2.0 ** k for k in range(-3, 7)], args.runs, seed=args.seed + 1, progress=show)
    lap_ns = [1 << k for k in (10, 12, 14)] if args.quick else [1 << k for k in (10, 12, 14, 15, 16, 18, 20)]
    rows_lap = laplace_baseline(lap_ns, (1.0, 4.0), args.laplace_runs, seed=args.seed + 2, progress=show)
    write_csv(out / "min_vs_n.csv", rows_n)
    write_csv(out / "min_vs_eps.csv", rows_eps)
    write_csv(out / "min_laplace.csv", rows_lap)
    text, cells = compare_table(rows_n, rows_eps, rows_lap)
    write_csv(out / "min_reference.csv", cells)
    print(text)
    rows_ml, fits = [], []
    if args.movielens:
        ml = load_movielens(args.movielens)
        print(f"MovieLens: {ml['users']:,} users, {ml['movies']:,} rated movies (count domain [0, {ml['movies'] / 2:g}])")
        ml_ns = [1 << int(k) for k in args.ml_sizes.split(",")]
        rows_ml = movielens(ml, ml_ns, (1.0, 4.0), args.ml_runs, seed=args.seed + 3, progress=show)
        write_csv(out / "min_movielens.csv", rows_ml)
        for (t, d), ref in REFERENCE_MOVIELENS_ALPHA.items():
            got = {e: [r["error"] for r in sorted(rows_ml, key=lambda r: r["n"]) if r["task"] == t and
                       r["direction"] == d and r["epsilon"] == e] for e in (1.0, 4.0)}
            used = sorted({r["n"] for r in rows_ml})
            if len(used) >= 3:
                f = fit_rate(used, got)
                fits.append({"task": t, "direction": d, **f, "paper_alpha": ref})
                print(f"  {t} {d}: α = {f['alpha']:.3g} (B = 6A: {f['alpha_b6a']:.3g}); paper {ref:g}")
        write_csv(out / "min_movielens_fit.csv", fits)
    pngs = [] if args.no_plot else plot(out, rows_n, rows_eps, rows_lap, rows_ml)
    print(f"wrote {', '.join(sorted(os.listdir(out)))} to {out} in {time.monotonic() - started:.0f} s"
          + (f" ({len(pngs)} PNG)" if pngs else ""))
    return {"n": rows_n, "epsilon": rows_eps, "laplace": rows_lap, "movielens": rows_ml, "fits": fits,
            "reference": cells}


if __name__ == "__main__":
    main()
