"""The engine issue's accuracy figure: each mechanism's empirical variance against its closed form at n = 10^5.

    python examples/variance_check.py [--runs 1000]

Finite-output mechanisms are run on both paths (exact aggregate and per user); continuous ones per user.
Prints, per mechanism and path, the ratio empirical / closed-form variance, averaged over the output cells
(the worst cell beside it), and its sampling uncertainty: with R runs one cell's ratio has relative sd
sqrt(2/(R-1)); the mean over d cells has about sqrt(2/(R-1)/d).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.rr import RandomizedResponse

N = 100_000


def _finite(r, runs: int, path: str, rng) -> tuple[float, float]:
    x = rng.choice(r.input_size, N, p=np.arange(1, r.input_size + 1) / np.arange(1, r.input_size + 1).sum())
    counts = np.bincount(x, minlength=r.input_size)
    truth = counts / N if r.estimates == "histogram" else np.array([x.mean()])
    est = np.array([r.estimate(r.sample_aggregate(counts, rng) if path == "exact" else
                               r.aggregate(r.randomize(x, rng)), N) for _ in range(runs)])
    ratio = est.var(axis=0, ddof=1) / r.variance(truth, N)
    return float(ratio.mean()), float(ratio[np.argmax(np.abs(ratio - 1))])


def _continuous(r, runs: int, rng) -> tuple[float, float]:
    x = rng.uniform(-0.9, 0.7, N)
    est = np.array([r.estimate(r.aggregate(r.randomize(x, rng)), N)[0] for _ in range(runs)])
    ratio = float(est.var(ddof=1) / r.variance(np.array([x.mean()]), N, second_moment=float(np.mean(x ** 2)))[0])
    return ratio, ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    args = ap.parse_args()
    rng = np.random.default_rng(2024)
    sd = math.sqrt(2 / (args.runs - 1))
    print(f"n = {N:,}, {args.runs} runs; a ratio's sampling sd is {sd:.3f}")
    print(f"{'mechanism':<22}{'path':<10}{'runs':>6}{'mean ratio':>12}{'worst cell':>12}")
    rows = []
    for r in (RandomizedResponse(1.0), GRR(1.0, 10), GRR(4.0, 100), OUE(1.0, 10), OUE(1.0, 100)):
        for path in ("exact", "per_user"):
            runs = args.runs if path == "exact" or r.input_size <= 10 else max(50, args.runs // 10)
            rows.append((repr(r), path, runs, *_finite(r, runs, path, rng)))
    for r in (Duchi(1.0), Duchi(0.25), Piecewise(1.0), Piecewise(4.0)):
        rows.append((repr(r), "per_user", args.runs, *_continuous(r, args.runs, rng)))
    for name, path, runs, mean, worst in rows:
        flag = "" if abs(mean - 1) <= 0.10 else "  (mean outside 10%)"
        print(f"{name:<22}{path:<10}{runs:>6}{mean:>12.3f}{worst:>12.3f}{flag}")


if __name__ == "__main__":
    main()
