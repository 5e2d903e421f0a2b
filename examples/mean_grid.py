"""LDP_MEAN over a grid: interval coverage, interval width and planner regret, before and after issue 11.

For every cell (n users, ε, data shape) the same fixed data set is randomized ``reps`` times by each candidate
mechanism (Duchi et al. 2013/2018; the Piecewise and Hybrid Mechanisms of Wang et al., ICDE 2019), and each
release goes through the engine's own one-round protocol (:func:`ldpql.mechanisms.one_round`), which gives the
estimate and the standard error the result shows. Measured per cell and mechanism: RMSE, coverage of the 90% and
95% intervals, and the interval's half-width over z·RMSE ("width", 1 = exactly as wide as it needs to be).
"Before" is the engine before issue 11: the choice between Duchi and PM only, by Duchi's worst case against PM's,
and PM's interval at its worst case E[x²] = 1. Regret is the chosen mechanism's RMSE over the best forced one's.

Data shapes on the encoded scale [-1, 1] (the column's declared domain mapped to it): uniform; heavy-tailed
(lognormal σ = 1.5 on a domain [0, 50], most users near the lower bound); bimodal (±0.8, sd 0.1); constant at 0;
constant at the upper bound.

    nice python examples/mean_grid.py --part small   # n = 10^3..10^5 (about 10 min of CPU)
    nice python examples/mean_grid.py --part big     # n = 10^6 at ε = 0.25, 1, 8 (about 10 min of CPU)
    python examples/mean_grid.py --quick             # a small grid in seconds

Writes examples/mean_results/mean_grid[_1e6].csv (one row per cell and mechanism), mean_cells[_1e6].csv (one
row per cell: the choice, regret and coverage before and after) and mean_grid.png (from both).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

import ldpql
from ldpql.mechanisms import Encoding, Reply, one_round
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.planner.aggregates import worst_case_variance

OUT = Path(__file__).parent / "mean_results"
MECHANISMS = {"duchi": Duchi, "piecewise": Piecewise, "hybrid": Hybrid}   # the planner's order (ties: first)
Z = {0.90: NormalDist().inv_cdf(0.95), 0.95: NormalDist().inv_cdf(0.975)}


def shape(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """One data set of n users on [-1, 1]."""
    if name == "uniform":
        return rng.uniform(-1, 1, n)
    if name == "heavy_tailed":
        return np.minimum(rng.lognormal(0.0, 1.5, n), 50.0) / 25.0 - 1.0
    if name == "bimodal":
        return np.clip(rng.choice([-0.8, 0.8], n) + rng.normal(0, 0.1, n), -1, 1)
    if name == "constant_0":
        return np.zeros(n)
    if name == "constant_bound":
        return np.ones(n)
    raise ValueError(name)


def release(r, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """One run of the engine's one-round protocol: (estimate, standard error) as the result shows them."""
    protocol = one_round(r, Encoding("x", None, "x"))
    next(protocol)
    try:
        protocol.send(Reply(r.aggregate(r.randomize(x, rng)), len(x)))
    except StopIteration as done:
        est = done.value
        return float(est.values[0]), float(est.stderr[0])
    raise RuntimeError("one_round did not finish")


def chosen(eps: float, n: int, names=tuple(MECHANISMS)) -> str:
    """The planner's rule: the smallest worst case over the domain, the first listed on a tie."""
    return min(names, key=lambda m: worst_case_variance(MECHANISMS[m](eps), n))


def chosen_before(eps: float) -> str:
    """The rule before issue 11: Duchi's variance at x = 0 against PM's at |x| = 1."""
    return "duchi" if Duchi(eps).C ** 2 <= Piecewise(eps).variance(np.zeros(1), 1)[0] else "piecewise"


def chosen_midpoint(eps: float) -> str:
    """An alternative data-independent rule, for comparison only: Duchi or PM by their variance at E[x²] = 1/2
    (the average over every E[x²] in [0, 1], as the variances are linear in it). Never Hybrid, whose variance is a
    mixture of the other two's and so is never the smallest for a given data set."""
    at = {m: float(MECHANISMS[m](eps).variance(np.zeros(1), 1, second_moment=0.5)[0]) for m in ("duchi", "piecewise")}
    return min(at, key=at.get)


def run_cell(x: np.ndarray, eps: float, reps: int, rng: np.random.Generator) -> list[dict]:
    truth, m2, n = float(x.mean()), float(np.mean(x ** 2)), len(x)
    rows = []
    for name, make in MECHANISMS.items():
        r = make(eps)
        runs = np.array([release(r, x, rng) for _ in range(reps)])
        err, se = runs[:, 0] - truth, runs[:, 1]
        rmse = float(np.sqrt(np.mean(err ** 2)))
        theory = math.sqrt(float(r.variance(np.array([truth]), n, second_moment=m2)[0]))
        # before issue 11: PM's interval at the worst case E[x²] = 1 (Duchi's was the (E x)² plug-in, unchanged)
        se_before = np.full(reps, math.sqrt(float(r.variance(np.zeros(1), n)[0]))) if name == "piecewise" else se
        row = dict(mechanism=name, rmse=rmse, theory_sd=theory, bias=float(np.mean(err)))
        for conf, z in Z.items():
            row[f"cover{int(conf * 100)}"] = float(np.mean(np.abs(err) <= z * se))
            row[f"cover{int(conf * 100)}_before"] = float(np.mean(np.abs(err) <= z * se_before))
        row["width"] = float(np.mean(se) / rmse) if rmse > 0 else math.nan
        row["width_before"] = float(np.mean(se_before) / rmse) if rmse > 0 else math.nan
        rows.append(row)
    return rows


def summarise(n: int, eps: float, name: str, rows: list[dict], reps: int) -> dict:
    by = {r["mechanism"]: r for r in rows}
    now, before = chosen(eps, n), chosen_before(eps)
    best = min(by, key=lambda m: by[m]["rmse"])
    best_theory = min(by, key=lambda m: by[m]["theory_sd"])
    best_before = min(("duchi", "piecewise"), key=lambda m: by[m]["rmse"])
    out = dict(n=n, epsilon=eps, shape=name, reps=reps, chosen=now, chosen_before=before, best=best,
               regret=by[now]["rmse"] / by[best]["rmse"],
               regret_theory=by[now]["theory_sd"] / by[best_theory]["theory_sd"],
               regret_before=by[before]["rmse"] / by[best_before]["rmse"],
               regret_midpoint=by[chosen_midpoint(eps)]["rmse"] / by[best]["rmse"])
    for k in ("cover90", "cover95", "width"):
        out[k] = by[now][k]
        out[f"{k}_before"] = by[before][f"{k}_before"]
    return out


def check_rule_matches_planner(eps_grid) -> None:
    """The rule this script applies is the one the engine's planner applies (through EXPLAIN)."""
    con = ldpql.connect(seed=0, evaluation=True)
    import pyarrow as pa
    con.register("t", pa.table({"x": np.linspace(0, 1, 1000)}), private={"x": {"between": (0, 1), "not_null": True}}, budget=1000)
    for eps in eps_grid:
        plan = con.explain(f"SELECT LDP_MEAN(x) FROM t EPSILON {eps}")
        assert f"mechanism * {chosen(eps, 1000)}:" in str(plan), (eps, str(plan))


def plot(cells: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    shapes = list(dict.fromkeys(c["shape"] for c in cells))
    markers = dict(zip(shapes, "osD^v"))
    for c in cells:
        x = math.log10(c["n"]) + 0.12 * (math.log2(c["epsilon"]) / 5)
        m = markers[c["shape"]]
        axes[0].scatter(x, c["cover95_before"], marker=m, color="tab:gray", alpha=0.5, s=18)
        axes[0].scatter(x, c["cover95"], marker=m, color="tab:blue", s=18)
        axes[1].scatter(c["epsilon"], c["regret_before"], marker=m, color="tab:gray", alpha=0.5, s=18)
        axes[1].scatter(c["epsilon"], c["regret"], marker=m, color="tab:red", s=18)
        axes[2].scatter(x, c["width_before"], marker=m, color="tab:gray", alpha=0.5, s=18)
        axes[2].scatter(x, c["width"], marker=m, color="tab:green", s=18)
    axes[0].axhspan(0.93, 0.97, color="tab:blue", alpha=0.08)
    axes[0].set(title="coverage of the 95% interval (chosen mechanism)", xlabel="log10 n (ε spread within)",
                ylabel="coverage", ylim=(0.85, 1.005))
    axes[1].axhline(1.25, color="k", ls=":")
    axes[1].set(xscale="log", yscale="log", title="regret: chosen RMSE / best forced RMSE", xlabel="ε")
    eps_ticks = sorted({c["epsilon"] for c in cells})
    axes[1].set_xticks(eps_ticks, [f"{e:g}" for e in eps_ticks], minor=False)
    axes[1].set_xticks([], minor=True)
    axes[1].set_yticks([1, 1.25, 1.5, 2, 3, 4], ["1", "1.25", "1.5", "2", "3", "4"], minor=False)
    axes[1].set_yticks([], minor=True)
    axes[2].axhline(1.0, color="k", ls=":")
    axes[2].set(title="interval half-width / (z·RMSE), chosen", xlabel="log10 n", ylim=(0.8, 2.5))
    handles = [plt.Line2D([], [], marker=markers[s], ls="", color="k", label=s) for s in shapes]
    handles += [plt.Line2D([], [], marker="o", ls="", color="tab:gray", label="before issue 11")]
    axes[1].legend(handles=handles, fontsize=8)
    fig.suptitle("LDP_MEAN: Duchi et al. / Piecewise / Hybrid (Wang et al., ICDE 2019), gray = before")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small grid (n up to 10^4, 200 runs)")
    ap.add_argument("--part", choices=("small", "big", "all"), default="all",
                    help="small: n up to 10^5; big: n = 10^6 (written to *_1e6.csv); all: both")
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the CSV files")
    args = ap.parse_args()
    eps_grid = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    small = [(1_000, eps_grid, 1000), (10_000, eps_grid, 1000), (100_000, eps_grid, 300)]
    big = [(1_000_000, (0.25, 1.0, 8.0), 300)]   # ~0.2 s per run of the three mechanisms: a coarser ε grid
    if not args.plot_only:
        check_rule_matches_planner(eps_grid)
        if args.quick:
            _run([(1_000, eps_grid, 200), (10_000, (1.0, 8.0), 200)], "_quick")
        if args.part in ("small", "all") and not args.quick:
            _run(small, "")
        if args.part in ("big", "all") and not args.quick:
            _run(big, "_1e6")
    cells = [r for tag in ("", "_1e6") if (OUT / f"mean_cells{tag}.csv").exists()
             for r in _read(OUT / f"mean_cells{tag}.csv")]
    plot(cells, OUT / "mean_grid.png")


def _run(plan, tag: str) -> None:
    OUT.mkdir(exist_ok=True)
    rows, cells = [], []
    shapes = ("uniform", "heavy_tailed", "bimodal", "constant_0", "constant_bound")
    start = time.time()
    for n, eps_list, reps in plan:
        for s_i, name in enumerate(shapes):
            x = shape(name, n, np.random.default_rng(1000 + s_i))
            for eps in eps_list:
                rng = np.random.default_rng([n, int(eps * 100), s_i])
                cell_rows = run_cell(x, eps, reps, rng)
                rows += [dict(n=n, epsilon=eps, shape=name, reps=reps, **r) for r in cell_rows]
                cells.append(summarise(n, eps, name, cell_rows, reps))
                c = cells[-1]
                print(f"n={n:>9,} ε={eps:<5g} {name:<15} chosen {c['chosen']:<9} cover95 {c['cover95']:.3f} "
                      f"(before {c['cover95_before']:.3f}) regret {c['regret']:.2f} (before {c['regret_before']:.2f}) "
                      f"width {c['width']:.2f} (before {c['width_before']:.2f})  [{time.time() - start:.0f} s]", flush=True)
            _write(OUT / f"mean_grid{tag}.csv", rows)
            _write(OUT / f"mean_cells{tag}.csv", cells)


def _read(path: Path) -> list[dict]:
    with open(path) as f:
        return [{k: (v if k in ("shape", "chosen", "chosen_before", "best") else float(v)) for k, v in r.items()}
                for r in csv.DictReader(f)]


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


if __name__ == "__main__":
    main()
