"""LDP_TOPK's rank intervals over a grid, before and after inference on winners (issue 11).

Before: Bonferroni over the values that could hold rank j, an interval for the j-th largest true frequency.
After: the hybrid intervals of Andrews, Kitagawa and McCloskey, "Inference on Winners" (2024)
(:func:`ldpql.planner.winners.winners_interval`), an interval for the true frequency of the value found at rank j
that accounts for its selection. Each is checked against what it claims to cover (and, for the record, against
the other's target too).

The grid was not tuned on: n ∈ {1,000, 10,000, 100,000}, ε ∈ {0.5, 1, 4, 16}, four shapes (leading
frequencies tied, close, well separated, Zipf over 30 values), ranks 1..5 (the interval of rank j does not
depend on k, so LDP_TOPK(c, k) for k = 1, 3, 5 is ranks ≤ k), confidence 0.95 and 0.90, ``--reps`` releases per
cell (default 400). Fast path: each release is drawn through the oracle the planner picks at (d, ε, n) (its
exact-aggregate sampler where it has one, else every user's randomizer) and its estimator, exactly as the
engine's one-round protocol computes the raw estimate, standard error and lattice step. ``--sql`` also runs a few
cells end to end through ``EVALUATE SELECT LDP_TOPK(...)``.

At ε = 16 a k-ary randomized response (GRR) leaves a bin's estimate exactly at its truth with probability at
least (1 − (d − 1)q)^{n_j} (1 − q)^{n − n_j}, q = 1/(e^ε + d − 1) (``examples/coverage_overcoverage.py``'s atom
floor): where that floor is above nominal + 2 points no interval containing its estimate can be within the band;
those rows are marked ``atom``.

    nice python examples/topk_selection_coverage.py [--reps 400] [--sql]    # ~3 minutes of one core, SQL more
    (or in parts: --shapes tied,close and --shapes separated,zipf, then --merge)

Writes examples/histogram_results/topk_selection_coverage.csv (one row per cell, rank and confidence),
topk_selection_coverage.png and, with --sql, topk_selection_sql.csv.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.planner.histogram import ORACLES, project_simplex
from ldpql.planner.winners import correlations, rank, winners_interval

OUT = Path(__file__).parent / "histogram_results"
SEED = 20261125
NS = (1_000, 10_000, 100_000)
EPSILONS = (0.5, 1.0, 4.0, 16.0)
CONFIDENCES = (0.95, 0.90)
RANKS = 5
ZIPF = 1 / np.arange(1, 31) ** 1.1
SHAPES = {   # declared values' frequencies (OTHER, the last bin, is empty)
    "tied": [0.20, 0.20, 0.20, 0.20, 0.08, 0.06, 0.04, 0.02],
    "close": [0.25, 0.24, 0.23, 0.10, 0.08, 0.05, 0.03, 0.02],
    "separated": [0.45, 0.25, 0.12, 0.08, 0.05, 0.03, 0.01, 0.01],
    "zipf": list(ZIPF / ZIPF.sum()),
}


def counts_of(freq, n: int) -> np.ndarray:
    """Users per declared value (largest remainders, so tied frequencies get equal counts), OTHER empty."""
    f = np.asarray(freq) / np.sum(freq)
    c = np.floor(f * n).astype(np.int64)
    short = n - c.sum()
    c[np.lexsort((np.arange(len(f)), -(f * n - c)))[:short]] += 1
    return np.append(c, 0)


def chosen_oracle(labels: list[str], n: int, eps: float):
    """The oracle the planner picks for this column at (d, ε, n), read from EXPLAIN."""
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"c": np.resize(np.array(labels), n)}), private={"c": labels}, budget=1e12)
    name = con.sql(f"EXPLAIN SELECT LDP_TOPK(c, 1) FROM t EPSILON {eps}").plan.aggregates[0].chosen.mechanism
    return next(o for o in ORACLES if o.name == name).make(eps, len(labels) + 1)


def release(r, counts: np.ndarray, rng: np.random.Generator):
    """One release: the raw estimate, its standard errors (closed form at the clipped estimate), step and the
    estimates' correlations (one report per user), as the engine's one-round protocol and LDP_TOPK compute them."""
    n = int(counts.sum())
    if r.exact:
        summary = r.sample_aggregate(counts, rng)
    else:
        summary = r.aggregate(r.randomize(np.repeat(np.arange(len(counts)), counts), rng))
    raw = r.estimate(summary, n)
    pairs = r.pair_hits() if hasattr(r, "pair_hits") else None   # as one_round puts it in the release
    rho = correlations(raw, (r.p, r.q, *pairs, n, 0.0)) if pairs else None
    return raw, np.sqrt(r.variance(np.clip(raw, 0.0, 1.0), n)), r.step(n), rho


def bonferroni_interval(raw, se, k, confidence, step=0.0):
    """The intervals before: for the j-th largest true frequency, Bonferroni over the values that could hold
    rank j (the engine's LDP_TOPK intervals until this change)."""
    alpha, slack = 1 - confidence, step / 2
    z = NormalDist().inv_cdf(1 - alpha / 2)
    low_j = -np.sort(-(raw - z * se - slack))
    lows, highs = np.full(k, np.nan), np.full(k, np.nan)
    for j in range(1, k + 1):
        contenders = int(np.count_nonzero(raw + z * se + slack >= low_j[j - 1]))
        z_low = NormalDist().inv_cdf(1 - alpha / 2 / max(contenders - j + 1, 1))
        z_high = NormalDist().inv_cdf(1 - alpha / 2 / j)
        lows[j - 1] = -np.sort(-(raw - z_low * se - slack))[j - 1]
        highs[j - 1] = -np.sort(-(raw + z_high * se + slack))[j - 1]
    return np.clip(lows, 0.0, 1.0), np.clip(highs, 0.0, 1.0)


def atom_floor(r, counts: np.ndarray, eps: float, j: int) -> float:
    """P(the j-th largest bin's estimate is exact) under GRR (coverage_overcoverage.py's floor); 0 otherwise."""
    if r.name != "grr":
        return 0.0
    d, n = len(counts), int(counts.sum())
    q = 1.0 / (math.exp(eps) + d - 1)
    nj = float(-np.sort(-counts)[j])
    return math.exp(nj * math.log1p(-(d - 1) * q) + (n - nj) * math.log1p(-q))


def run_cell(shape: str, n: int, eps: float, reps: int) -> list[dict]:
    labels = [f"v{i:02d}" for i in range(len(SHAPES[shape]))]
    counts = counts_of(SHAPES[shape], n)
    truth = counts / n
    ranked_truth = -np.sort(-truth)[:RANKS]
    r = chosen_oracle(labels, n, eps)
    rng = np.random.default_rng([SEED, n, int(eps * 10), len(shape)])
    hits = {(m, t, c): np.zeros(RANKS) for m in ("before", "after", "shown") for t in ("rank", "value")
            for c in CONFIDENCES}
    width = {(m, c): np.zeros(RANKS) for m in ("before", "after") for c in CONFIDENCES}
    t0 = time.process_time()
    for _ in range(reps):
        raw, se, step, rho = release(r, counts, rng)
        top = rank(raw, step)[:RANKS]   # the engine's ranking (exact ties by the release-seeded jitter)
        shown = project_simplex(raw)[top]   # the answer LDP_TOPK shows
        targets = {"rank": ranked_truth, "value": truth[top]}
        for c in CONFIDENCES:
            for m in ("before", "after"):
                lo, hi = (bonferroni_interval(raw, se, RANKS, c, step) if m == "before"
                          else winners_interval(raw, se, RANKS, c, step, rho))
                if m == "after":   # as the result table shows it: widened to hold the (post-processed) answer
                    held = (np.minimum(lo, shown) <= targets["value"]) & (targets["value"] <= np.maximum(hi, shown))
                    hits["shown", "value", c] += held
                width[m, c] += hi - lo
                for t, target in targets.items():
                    hits[m, t, c] += (lo <= target) & (target <= hi)
    seconds = time.process_time() - t0
    rows = []
    for c in CONFIDENCES:
        for j in range(RANKS):
            floor = atom_floor(r, counts, eps, j)
            rows.append({"shape": shape, "n": n, "epsilon": eps, "oracle": r.name, "confidence": c, "rank": j + 1, "reps": reps,
                             "truth": float(ranked_truth[j]),
                             "before": hits["before", "rank", c][j] / reps, "after": hits["after", "value", c][j] / reps,
                             "before_on_value": hits["before", "value", c][j] / reps,
                             "after_on_rank": hits["after", "rank", c][j] / reps,
                             "after_shown": hits["shown", "value", c][j] / reps,
                             "width_before": width["before", c][j] / reps, "width_after": width["after", c][j] / reps,
                             "atom_floor": floor, "atom": floor > c + 0.02, "cpu_seconds": seconds})
    return rows


def sql_cells(reps: int) -> list[dict]:
    """A few cells end to end at 95%: EVALUATE SELECT LDP_TOPK(c, 3) (coverage of the true frequency of the value
    each run found at each rank)."""
    rows = []
    for shape, n, eps in (("tied", 10_000, 1.0), ("close", 1_000, 4.0), ("zipf", 1_000, 0.5)):
        labels = [f"v{i:02d}" for i in range(len(SHAPES[shape]))]
        data = np.repeat(np.array(labels + ["other"]), counts_of(SHAPES[shape], n))
        con = ldpql.connect(seed=SEED, evaluation=True)
        con.register("t", pa.table({"c": data}), private={"c": labels}, budget=1e12)
        for c in CONFIDENCES[:1]:
            res = con.sql(f"EVALUATE SELECT LDP_TOPK(c, 3) FROM t EPSILON {eps} OPTIONS (confidence = {c}) "
                          f"REPEAT {reps}")
            for j, row in enumerate(res.fetchall()):
                rows.append({"shape": shape, "n": n, "epsilon": eps, "oracle": res.plan.aggregates[0].chosen.mechanism,
                                 "confidence": c, "rank": j + 1, "reps": reps, "coverage": row[-1]})
                print(rows[-1], flush=True)
    return rows


def write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, c in zip(axes, CONFIDENCES):
        sub = [r for r in rows if r["confidence"] == c]
        x = np.arange(len(sub))
        ax.axhspan(c - 0.02, c + 0.02, color="0.9")
        ax.axhline(c, color="0.5", lw=0.8)
        for key, mark, label in (("before", "x", "before (Bonferroni, j-th largest)"),
                                 ("after", "o", "after (hybrid, value at rank j)")):
            ax.scatter(x, [r[key] for r in sub], marker=mark, s=12, label=label,
                       c=["tab:red" if r["atom"] else ("tab:gray" if key == "before" else "tab:blue") for r in sub])
        ax.set_title(f"LDP_TOPK rank intervals at {c:.0%} (red: GRR atom cells, ε = 16)")
        ax.set_xlabel("cell × rank (shape, n, ε, rank 1-5)")
        ax.set_ylim(0.8, 1.005)
    axes[0].set_ylabel("coverage")
    axes[0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--sql", action="store_true", help="also run a few cells end to end through EVALUATE")
    ap.add_argument("--sql-reps", type=int, default=300)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="a comma-separated subset (writes a part file)")
    ap.add_argument("--merge", action="store_true", help="join the part files into the CSV and PNG")
    ap.add_argument("--no-grid", action="store_true", help="skip the fast grid (e.g. with --sql)")
    ap.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS), help="a comma-separated subset")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.merge:
        parts = sorted(OUT.glob("topk_selection_part_*.csv"), key=lambda p: p.stat().st_mtime)
        latest = {}   # a later part replaces a cell's rows (a rerun of some ε)
        for p in parts:
            for r in csv.DictReader(p.read_text().splitlines()):
                latest[r["shape"], r["n"], r["epsilon"], r["confidence"], r["rank"]] = dict(r)
        order = {shape: i for i, shape in enumerate(SHAPES)}
        rows = sorted(latest.values(), key=lambda r: (order[r["shape"]], int(r["n"]), float(r["epsilon"]),
                                                      -float(r["confidence"]), int(r["rank"])))
        for r in rows:
            r.update({k: float(r[k]) for k in ("confidence", "before", "after", "after_shown")}, atom=r["atom"] == "True")
        write(OUT / "topk_selection_coverage.csv", rows)
        plot(rows, OUT / "topk_selection_coverage.png")
        for p in parts:
            p.unlink()
    if args.sql:
        write(OUT / "topk_selection_sql.csv", sql_cells(args.sql_reps))
    if args.merge or args.no_grid:
        return
    shapes, epsilons = args.shapes.split(","), [float(e) for e in args.epsilons.split(",")]
    rows = []
    for shape in shapes:
        for n in NS:
            for eps in epsilons:
                rows += run_cell(shape, n, eps, args.reps)
                top = [r for r in rows[-2 * RANKS:] if r["confidence"] == 0.95]
                print(f"{shape:<10} n={n:>7,} ε={eps:<4g} {top[0]['oracle']:<11} at 95% before "
                      + " ".join(f"{r['before']:.3f}" for r in top) + " after "
                      + " ".join(f"{r['after']:.3f}" for r in top) + f"  {top[0]['cpu_seconds']:.1f}s", flush=True)
    if shapes == list(SHAPES) and epsilons == list(EPSILONS):
        write(OUT / "topk_selection_coverage.csv", rows)
        plot(rows, OUT / "topk_selection_coverage.png")
    else:
        write(OUT / f"topk_selection_part_{'_'.join(shapes)}_{args.epsilons.replace(',', '_')}.csv", rows)


if __name__ == "__main__":
    main()
