"""Session 14 prototype (not in the engine): an interval for the Piecewise family's mean where few reports leave
their band (the Done-when grid's 3 rows that stay low, and audit 2's finding 3).

A PM report leaves its band with a probability P_out that does not depend on x (Hybrid: β·P_out + 1 − β, Duchi's
reports counting as far), and a far report moves the mean by at most (max|y| + 1)/n. With λ = n·P_far small the
mean is a Poisson-small mixture and est ± z·se misses when one far report lands. Tried here: the half-width
max(z·se, w), w the largest over point masses x in POINTS of the (1 − α) quantile of |est − x| (every user at x,
simulated with the engine's own randomizer; data-independent: it depends on n, ε, α only). Per cell: the coverage
and mean width of the normal interval and of the widened one over R runs, the width ratio, and n·w at each point
(the bound x = 1 is not the worst case: at x = 1 the plug-in se is largest too).

    python examples/pm14/mixture.py [R]   -> mixture.txt
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise

HERE = Path(__file__).parent
POINTS = (0.0, 0.25, 0.5, 0.75, 1.0)   # point-mass data sets whose |est − x| quantile w is taken; the max is used


def runs(r, x: np.ndarray, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(estimate − true mean, plug-in se) over ``reps`` releases of the users' values x (in [-1, 1])."""
    rng = np.random.default_rng(seed)
    err, se = np.empty(reps), np.empty(reps)
    for t in range(reps):
        summary = r.aggregate(r.randomize(x, rng))
        est = float(r.estimate(summary, len(x))[0])
        m2 = r.second_moment(summary, len(x))
        err[t], se[t] = est - x.mean(), float(np.sqrt(r.variance(np.array([est]), len(x), m2)[0]))
    return err, se


def bound_quantile(r, n: int, level: float, reps: int, at: float = 1.0) -> float:
    """The ``level`` quantile of |est − x| with every user at x = ``at``."""
    err, _ = runs(r, np.full(n, at), reps, 99)
    return float(np.quantile(np.abs(err), level))


def main(reps: int) -> None:
    rng = np.random.default_rng(14)
    cells = [  # (label, mechanism, ε, data in [-1, 1])
        ("mean_m-like bimodal, n=1000", Hybrid, 16.0, np.clip(np.where(rng.random(1000) < 0.6, rng.normal(-0.5, 0.12, 1000),
                                                                       rng.normal(0.5, 0.16, 1000)), -1, 1)),
        ("sum_u-like uniform, n=1000", Hybrid, 16.0, rng.uniform(-1, 1, 1000)),
        ("uniform, n=100 (a group)", Piecewise, 16.0, rng.uniform(-1, 1, 100)),
        ("audit 2: both bounds, n=30", Hybrid, 8.0, np.where(np.arange(30) % 2 == 0, -1.0, 1.0)),
        ("audit 2: x=0, n=100", Hybrid, 20.0, np.zeros(100)),
        ("uniform, n=10000", Hybrid, 16.0, rng.uniform(-1, 1, 10_000)),
        ("uniform, n=1000, eps 8", Hybrid, 8.0, rng.uniform(-1, 1, 1000)),
    ]
    lines = []
    for label, make, eps, x in cells:
        r = make(eps)
        far = r.pm.outside * r.beta + (1 - r.beta) if isinstance(r, Hybrid) else r.outside
        err, se = runs(r, x, reps, 7)
        for conf in (0.90, 0.95):
            z = NormalDist().inv_cdf(0.5 + conf / 2)
            w = {at: bound_quantile(r, len(x), conf, 4 * reps, at) for at in POINTS}
            half = np.maximum(z * se, max(w.values()))
            lines.append(f"{label}, {make.name} eps={eps:g} conf={conf}: lambda={len(x) * far:.2f}; normal covers "
                         f"{np.mean(np.abs(err) <= z * se):.3f}; widened covers {np.mean(np.abs(err) <= half):.3f}, "
                         f"width x{np.mean(half) / np.mean(z * se):.2f}; n·w at x = "
                         + ", ".join(f"{at:g}: {len(x) * v:.3g}" for at, v in w.items())
                         + f"; n·z·se mean {len(x) * np.mean(z * se):.3g}")
            print(lines[-1], flush=True)
    (HERE / "mixture.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
