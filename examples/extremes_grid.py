"""LDP_MIN / LDP_MAX over a grid of n, ε and data shapes: the planner's choice against every candidate forced.

For each cell (shape, MIN or MAX, n, ε) the script builds the planner's candidates for an INTEGER 0..20000
column (``ldpql.planner.minimum.extreme_candidates``: the one-round bucket search through OUE and through
GRR, the bisection of Fukuchi et al. 2019), lets the planner's rule choose (smallest predicted error among
those its checks allow), then runs every candidate R times on the same fixed data with the engine's own
protocols, driven in numpy by each round's exact aggregate (``ldpql.simulation.drive``). Degenerate
bisections (γ ≥ 1, refused by the planner) are run as with force = true. The Laplace baseline is left out (its
error is the domain's width many times over, spec §2.6).

What is measured (the quantity LDP_MIN estimates, docs/extremes.md): the γ-minimum m_γ, the smallest value
with at least γ·n users at or below it (LDP_MAX: the largest with γ·n at or above it), where γ is the share the
chosen bucket search detects at 95% (EXPLAIN's "estimates" line); the same γ for every candidate of the cell.
Columns: mean |answer - m_γ| per candidate, the regret (chosen over the best candidate, on that error), the
error against the true extreme, the mean share of users strictly beyond the answer, and the coverage of m_γ
by the chosen candidate's interval at confidence 95% and 90%.

    nice python examples/extremes_grid.py                 # the published grid (a few minutes)
    python examples/extremes_grid.py --runs 20 --quick    # seconds

Writes examples/min_results/extremes_grid.csv and extremes_grid.png (with matplotlib).
"""

from __future__ import annotations

import argparse
import csv
import time
import zlib
from pathlib import Path
from statistics import NormalDist

import numpy as np

from ldpql.catalog import Column, NumericDomain
from ldpql.mechanisms.base import Encoding
from ldpql.simulation import drive
from ldpql.planner import minimum as pm

LOW, HIGH = 0, 20000
NS = (1_000, 10_000, 100_000, 1_000_000)
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
CANDIDATES = ("buckets_oue", "buckets_grr", "bisect")


def shapes(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fixed data of each shape on the INTEGER 0..20000 domain."""
    lognormal = np.clip(np.round(np.exp(rng.normal(7.8, 1.0, n))), 326, 18823)   # diamonds-like prices
    lognormal[:2] = (326, 18823)
    gaps = rng.choice([1000, 5000, 5200, 12000, 19000], n, p=[0.05, 0.4, 0.3, 0.2, 0.05])
    half = rng.random(n) < 0.5
    bimodal = np.clip(np.round(np.where(half, rng.normal(4000, 500, n), rng.normal(15000, 800, n))), LOW, HIGH)
    return {"uniform": rng.integers(LOW, HIGH + 1, n), "lognormal": lognormal, "gaps": gaps, "bimodal": bimodal,
            "far": rng.integers(9000, 11001, n)}


def target(kind: str, confidence: float, force: bool = True) -> pm.ExtremeTarget:
    dom = NumericDomain(LOW, HIGH, integer=True)
    col = Column("x", "INTEGER", domain=dom)
    half, mid = (HIGH - LOW) / 2, (HIGH + LOW) / 2
    return pm.ExtremeTarget("x", Encoding("x", None, "x"), dom.describe(), None, "x", affine=(half, mid), kind=kind,
                            column_def=col, domain=dom, force=force, confidence=confidence)


def choose(cands, eps: float, n: int):
    """The planner's rule (choose_mechanisms): the smallest prediction among the candidates its checks allow,
    the first listed on a tie; and whether the planner refuses the statement (every check fails: the cell is
    then run as with force = true)."""
    allowed = []
    for c in cands:
        if c.mechanism.startswith("laplace"):
            continue
        strict = c.check(eps, n) if c.check is not None else None
        allowed.append((c.predict(eps, n), strict is not None, c))
    ok = [a for a in allowed if not a[1]]
    return min(ok or allowed, key=lambda a: a[0])[2], not ok


class Counts:
    """The users' true histogram for any round's encoding: a bisection grid (by binary search on sorted lattice
    indices, negated values for the maximum) or the buckets of a bucket search (counted from the top for MAX)."""

    def __init__(self, x: np.ndarray, kind: str):
        self.x, self.kind = np.sort(x.astype(float)), kind
        self.memo: dict = {}

    def __call__(self, enc: Encoding) -> np.ndarray:
        grid = getattr(enc, "grid", None)
        if grid is not None:
            key = ("grid", grid)
            if key not in self.memo:
                v = np.sort(-self.x) if self.kind == "max" else self.x
                self.memo[key] = grid.histogram(grid.lattice.index(v))
            return self.memo[key]
        key = ("buckets", enc.size)
        if key not in self.memo:
            b = pm.Buckets(LOW, HIGH, enc.size, True)
            k = b.index(self.x)
            self.memo[key] = np.bincount(enc.size - 1 - k if self.kind == "max" else k, minlength=enc.size)
        return self.memo[key]


def gamma_point(x: np.ndarray, kind: str, gamma: float) -> float:
    """m_γ: the smallest value with at least ⌈γn⌉ users at or below it (MAX: the largest with that many at or
    above it); the extreme itself when γn ≤ 1."""
    s = np.sort(x)
    k = max(int(np.ceil(gamma * len(s))), 1) - 1
    return float(s[k] if kind == "min" else s[len(s) - 1 - k])


def run_cell(x: np.ndarray, kind: str, n: int, eps: float, runs: int, rng: np.random.Generator) -> dict:
    counts = Counts(x, kind)
    cands = {c.mechanism.replace(f"_{kind}", ""): c for c in pm.extreme_candidates(target(kind, 0.95))}
    chosen, refused = choose(pm.extreme_candidates(target(kind, 0.95, force=False)), eps, n)
    name = chosen.mechanism.replace(f"_{kind}", "")
    bp = pm._bucket_plan(name.split("_")[1], eps, n, HIGH - LOW + 1) if name.startswith("buckets") else None
    if bp is None:   # the statement's γ is the best bucket search's, whichever candidate runs
        bp = pm._bucket_plan("oue", eps, n, HIGH - LOW + 1)
    make = (lambda d: pm.BUCKET_ORACLES[name.split("_")[1]](eps, d)) if name.startswith("buckets") else \
        (lambda d: pm.OUE(eps, d))
    gamma = bp.gamma(make, n, 0.95)
    m_gamma, extreme = gamma_point(x, kind, gamma), float(x.min() if kind == "min" else x.max())
    row = {"kind": kind, "n": n, "epsilon": eps, "gamma": gamma, "m_gamma": m_gamma, "extreme": extreme,
           "chosen": name, "refused": refused, "buckets": bp.size, "threshold": bp.threshold,
           "bound_chosen": chosen.predict(eps, n), "bound_bisect": cands["bisect"].predict(eps, n)}
    sx = np.sort(x)
    for cname, c in cands.items():
        if cname.startswith("laplace"):
            continue
        answers = np.array([float(drive(c.protocol(eps)(n), counts, rng).values[0]) for _ in range(runs)])
        beyond = (np.searchsorted(sx, answers, side="left") if kind == "min" else
                  n - np.searchsorted(sx, answers, side="right")) / n
        row[f"err_{cname}"] = float(np.mean(np.abs(answers - m_gamma)))
        row[f"errx_{cname}"] = float(np.mean(np.abs(answers - extreme)))
        row[f"beyond_{cname}"] = float(np.mean(beyond))
    for conf in (0.95, 0.9):
        c = {k: v for k, v in ((c.mechanism.replace(f"_{kind}", ""), c)
                               for c in pm.extreme_candidates(target(kind, conf)))}[name]
        est = [drive(c.protocol(eps)(n), counts, rng) for _ in range(runs)]
        row[f"coverage_{int(conf * 100)}"] = float(np.mean([e.interval[0][0] <= m_gamma <= e.interval[1][0]
                                                            for e in est]))
        if name.startswith("buckets"):   # the note's interval for the share of users beyond the answer
            z = NormalDist().inv_cdf((1 + conf) / 2)
            values = np.array([e.values[0] for e in est])
            true = (np.searchsorted(sx, values, side="left") if kind == "min" else
                    n - np.searchsorted(sx, values, side="right")) / n
            share = np.array([e.extra["share_beyond"] for e in est])
            sd = np.array([e.extra["share_beyond_sd"] for e in est])
            row[f"share_coverage_{int(conf * 100)}"] = float(np.mean(np.abs(share - true) <= z * sd + 1e-12))
    best = min(row[f"err_{c}"] for c in CANDIDATES)
    bestx = min(row[f"errx_{c}"] for c in CANDIDATES)
    row["regret"] = row[f"err_{name}"] / best if best > 0 else (1.0 if row[f"err_{name}"] == 0 else np.inf)
    row["regret_extreme"] = row[f"errx_{name}"] / bestx if bestx > 0 else (1.0 if row[f"errx_{name}"] == 0 else np.inf)
    return row


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, key, title in ((axes[0], "regret", "regret (chosen / best), error vs m_γ"),
                           (axes[1], "bisect_over_chosen", "bisection error / chosen error (vs m_γ)"),
                           (axes[2], "coverage_95", "coverage of m_γ (95% and 90%)")):
        for shape in sorted({r["shape"] for r in rows}):
            sub = [r for r in rows if r["shape"] == shape]
            xs = np.arange(len(sub))
            line, = ax.plot(xs, [r[key] for r in sub], ".", label=shape)
            if key == "coverage_95":
                ax.plot(xs, [r["coverage_90"] for r in sub], "x", alpha=0.5, color=line.get_color())
        ax.set_title(title)
        ax.set_xlabel("cell (shape, kind, n, ε)")
    axes[0].axhline(1.25, color="k", lw=0.5)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    axes[2].axhline(0.95, color="k", lw=0.5)
    axes[2].axhline(0.90, color="k", lw=0.5, ls=":")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="n up to 10^5, ε in {0.5, 2, 8}")
    ap.add_argument("--out", default=str(Path(__file__).parent / "min_results"))
    ap.add_argument("--replot", action="store_true", help="only redraw the PNG from the CSV in --out")
    args = ap.parse_args(argv)
    if args.replot:
        with open(Path(args.out) / "extremes_grid.csv") as fh:
            rows = [{k: (v if k in ("shape", "kind", "chosen") else v == "True" if v in ("True", "False") else float(v))
                     for k, v in r.items()} for r in csv.DictReader(fh)]
        plot(rows, Path(args.out) / "extremes_grid.png")
        return rows
    ns, epsilons = (NS[:3], (0.5, 2.0, 8.0)) if args.quick else (NS, EPSILONS)
    rows, start = [], time.time()
    for n in ns:
        data = shapes(n, np.random.default_rng(n))
        for shape, x in data.items():
            for kind in ("min", "max"):
                for eps in epsilons:
                    row = {"shape": shape, **run_cell(x, kind, n, eps, args.runs, np.random.default_rng(zlib.crc32(f"{shape}{kind}{n}{eps}".encode())))}
                    row["bisect_over_chosen"] = row["err_bisect"] / max(row[f"err_{row['chosen']}"], 1e-9)
                    rows.append(row)
                    print(f"{shape:9} {kind} n={n:>8,} ε={eps:<5g} γ={row['gamma']:.3g} chosen={row['chosen']:<11} "
                          f"B={row['buckets']:<5} regret={row['regret']:.2f} "
                          f"err: oue {row['err_buckets_oue']:.0f} grr {row['err_buckets_grr']:.0f} "
                          f"bisect {row['err_bisect']:.0f}  beyond {row['beyond_' + row['chosen']]:.3f} "
                          f"(bisect {row['beyond_bisect']:.3f})  cov95 {row['coverage_95']:.2f} "
                          f"cov90 {row['coverage_90']:.2f}  [{time.time() - start:.0f}s]", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "extremes_grid.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    try:
        plot(rows, out / "extremes_grid.png")
    except ImportError:
        print("matplotlib not installed: no PNG")
    return rows


if __name__ == "__main__":
    main()
