"""Held-out check of the envelopes (session 15): random data sets never used to design them (2-5 atoms at random
positions and weights, some at a bound; 30% beta shapes binned to 0.05), 60 per (ε, n, mechanism), wherever
λ = n·P_far <= rare.FEW. Prints each cell's worst coverage at 90% and 95% under the exact law, with its data set.

    PYTHONPATH=. python examples/pm15/heldout.py > examples/pm15/heldout.txt
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import coverage  # noqa: E402

from ldpql.mechanisms import rare  # noqa: E402
from ldpql.mechanisms.hybrid import Hybrid  # noqa: E402
from ldpql.mechanisms.piecewise import Piecewise  # noqa: E402

CELLS = [(0.5, 10), (1, 30), (2, 60), (4, 120), (8, 300), (10, 1000), (12, 1000), (16, 100), (16, 1000),
         (16, 5000), (20, 1000)]
rng = np.random.default_rng(11)


def random_data(n: int) -> dict[float, int]:
    if rng.random() < 0.3:
        v = np.round((rng.beta(rng.uniform(.2, 3), rng.uniform(.2, 3), n) * 2 - 1) * 20) / 20
    else:
        k = rng.integers(2, 6)
        pos = rng.uniform(-1, 1, k)
        pos[rng.random(k) < .3] = rng.choice([-1, 1])
        v = rng.choice(pos, n, p=rng.dirichlet(np.ones(k) * .7))
    u, c = np.unique(v, return_counts=True)
    return dict(zip(u.tolist(), c.tolist()))


def main(per_cell: int = 60) -> None:
    for eps, n in CELLS:
        for make in (Hybrid, Piecewise):
            r = make(float(eps))
            if n * r.far_share > rare.FEW:
                print(f"{eps:g} {n} {r.name}: λ = {n * r.far_share:.1f} > {rare.FEW:g}, not applied")
                continue
            worst = [1.0, 1.0, None]
            for _ in range(per_cell):
                d = random_data(n)
                q = sum(v * v * c for v, c in d.items()) / n
                got = [coverage(r, d, rare.halfwidth(r, n, q, c)) for c in (0.9, 0.95)]
                if got[0] < worst[0] or got[1] < worst[1]:
                    worst = [min(worst[0], got[0]), min(worst[1], got[1]), dict(list(d.items())[:5])]
            print(f"{eps:g} {n} {r.name}: worst 90% {worst[0]:.3f}, 95% {worst[1]:.3f}; e.g. {worst[2]}", flush=True)


if __name__ == "__main__":
    main()
