"""How a one-round release (the hierarchical tree, the histogram) reads τ off its noisy estimated CDF.

Before (session 11 and earlier): the middle of every unit whose [F̂(j-1), F̂(j)] holds τ. After: the split of the
units with the fewest on the wrong side of τ (``ldpql.mechanisms.quantile.crossing``). Both read the same simulated
releases (seeds [5, t]); per cell: the mean rank error of the answer, the share of runs at the largest rank error
min(τ, 1 - τ) that an empty tail gives (F = 0 or 1 there), and the coverage of the rank error a result shows at
95% (``planner.shown_rank_error`` with the candidate's calibrated σ; for the tree also without its new floor, z
times the consistent fit's exact standard error at the answer's coin). Shapes on DOUBLE 0..1 bucketed into
K coins: Beta(20, 60) (long empty tails), LogNormal(0, 1)/20, uniform, two normal modes with a gap at F = 0.5, and
Zipf(1.5) on a 0.001 grid.

    nice python examples/qrank5/readout.py [reps]   -> readout.csv, readout.txt
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd

from ldpql.mechanisms import hierarchical, quantile_histogram
from ldpql.mechanisms.quantile import CoinSpace, crossing
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

HERE = Path(__file__).parent
CELLS = [(20_000, 1.0, 65536), (2_000, 4.0, 65536), (1_700, 2.0, 64), (100_000, 8.0, 1024)]
TAUS = (0.1, 0.5, 0.9)
Z = NormalDist().inv_cdf(0.975)


def before(cdf: np.ndarray, tau: float) -> int:
    """The read-out before: the middle of the units whose [F̂(j-1), F̂(j)] is closest to holding τ."""
    below = np.concatenate([[0.0], cdf[:-1]])
    err = np.maximum(np.maximum(below - tau, tau - cdf), 0.0)
    best = np.flatnonzero(err <= err.min())
    return int(best[len(best) // 2])


def shape(name: str, n: int, size: int) -> np.ndarray:
    r = np.random.default_rng([5, n])
    x = {"beta": lambda: r.beta(20, 60, n), "lognormal": lambda: r.lognormal(0, 1, n) / 20,
         "uniform": lambda: r.random(n), "zipf": lambda: (r.zipf(1.5, n) - 1) / 1000,
         "bimodal": lambda: np.where(r.random(n) < 0.5, r.normal(0.2, 0.03, n), r.normal(0.7, 0.05, n))}[name]()
    return np.bincount(np.clip((np.clip(x, 0, 1) * size).astype(np.int64), 0, size - 1), minlength=size)


def run(mechanism: str, hist: np.ndarray, n: int, eps: float, tau: float, reps: int, read) -> dict:
    size = len(hist)
    cdf = np.cumsum(hist) / n
    if mechanism == "hierarchical":
        hierarchical.crossing = read
        make, sigma = (hierarchical.hierarchical_protocol(CoinSpace(size), eps, [tau], consistent=True),
                       planner.sigma_hierarchical(eps, n, size, planner.A_HIER, tau))
    else:
        quantile_histogram.crossing = read
        bins = planner.histogram_bins(eps, n, size, (tau,))
        make, sigma = (quantile_histogram.histogram_protocol(CoinSpace(size), eps, [tau], bins),
                       planner.sigma_histogram(eps, n, size, (tau,)))
    errors, held, unfloored, widths, unfloored_widths = [], 0, 0, [], []
    for t in range(reps):
        answer = simulate(make(n), np.random.default_rng([5, t]), hist=hist, exact_positions=False)
        answer = answer.extra["answers"][tau]
        coin = int(answer.extra["coin"])
        error = max((cdf[coin - 1] if coin else 0.0) - tau, tau - cdf[coin], 0.0)
        errors.append(error)
        shown = planner.shown_rank_error(answer, tau, sigma, Z)
        held += error <= shown + 1e-12
        widths.append(shown / (Z * sigma))
        if mechanism == "hierarchical":   # the tree before its floor (z times its exact se at the answer's coin)
            answer.extra["coin_var"] = 0.0
            before = planner.shown_rank_error(answer, tau, sigma, Z)
            unfloored += error <= before + 1e-12
            unfloored_widths.append(before / (Z * sigma))
    errors = np.array(errors)
    return {"mean_error": errors.mean(), "at_largest": np.mean(errors >= min(tau, 1 - tau) - 1e-9),
            "cov95": held / reps, "cov95_unfloored": unfloored / reps if mechanism == "hierarchical" else np.nan,
            "width95": np.median(widths),
            "width95_unfloored": np.median(unfloored_widths) if unfloored_widths else np.nan}


def main(reps: int) -> None:
    rows = []
    for mechanism in ("hierarchical", "histogram"):
        for name in ("beta", "lognormal", "uniform", "bimodal", "zipf"):
            for n, eps, size in CELLS:
                hist = shape(name, n, size)
                for tau in TAUS:
                    cell = {"mechanism": mechanism, "shape": name, "n": n, "eps": eps, "K": size, "tau": tau}
                    for label, read in (("before", before), ("after", crossing)):
                        cell |= {f"{k}_{label}": round(float(v), 4) for k, v in
                                 run(mechanism, hist, n, eps, tau, reps, read).items()}
                    rows.append(cell)
                    print(cell, flush=True)
    hierarchical.crossing = quantile_histogram.crossing = crossing
    df = pd.DataFrame(rows)
    df.to_csv(HERE / "readout.csv", index=False)
    lines = []
    tree = df[df["mechanism"] == "hierarchical"]
    lines.append(f"hierarchical, shown rank error at 95%: cells under 0.93 / lowest (widths in z·σ): "
                 f"before (old read-out, no floor) {(tree['cov95_unfloored_before'] < 0.93).sum()} / "
                 f"{tree['cov95_unfloored_before'].min():.2f}; new read-out, no floor "
                 f"{(tree['cov95_unfloored_after'] < 0.93).sum()} / {tree['cov95_unfloored_after'].min():.2f}; "
                 f"new read-out and floor {(tree['cov95_after'] < 0.93).sum()} / {tree['cov95_after'].min():.2f}; "
                 f"median width {tree['width95_unfloored_before'].median():.2f} before, "
                 f"{tree['width95_after'].median():.2f} after")
    for mechanism, part in df.groupby("mechanism"):
        ratio = (part["mean_error_after"] + 1e-3) / (part["mean_error_before"] + 1e-3)
        lines.append(f"{mechanism}: {len(part)} cells, mean rank error {part['mean_error_before'].mean():.4f} -> "
                     f"{part['mean_error_after'].mean():.4f}; after/before geometric mean "
                     f"{np.exp(np.log(ratio).mean()):.3f}, worse by > 1.2x in {(ratio > 1.2).sum()}, better in "
                     f"{(ratio < 1 / 1.2).sum()}; cells whose shown rank error covers under 0.93 at 95%: "
                     f"{(part['cov95_before'] < 0.93).sum()} -> {(part['cov95_after'] < 0.93).sum()} (lowest "
                     f"{part['cov95_before'].min():.2f} -> {part['cov95_after'].min():.2f}); runs at the largest "
                     f"rank error, worst cell: {part['at_largest_before'].max():.2f} -> "
                     f"{part['at_largest_after'].max():.2f}")
    (HERE / "readout.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
