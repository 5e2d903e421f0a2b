"""The grid the envelopes were designed on (session 15): 8 data shapes x ε in {8, 10, 12, 16, 20} x n in {30 .. 10^4},
PM and HM, wherever λ = n·P_far <= rare.FEW. Per row: the coverage of est ± z·se (before) and of rare.halfwidth
(now) at 90% and 95%, under the exact law (no simulation noise).

    PYTHONPATH=. python examples/pm15/design.py > examples/pm15/design.txt
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import coverage, normal_halfwidth  # noqa: E402

from ldpql.mechanisms import rare  # noqa: E402
from ldpql.mechanisms.hybrid import Hybrid  # noqa: E402
from ldpql.mechanisms.piecewise import Piecewise  # noqa: E402


def binned(x: np.ndarray, bins: int = 41) -> dict[float, int]:
    v = np.round((np.clip(x, -1, 1) + 1) / 2 * (bins - 1)) / (bins - 1) * 2 - 1
    u, c = np.unique(v, return_counts=True)
    return dict(zip(u.tolist(), c.tolist()))


def shapes(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {"uniform": rng.uniform(-1, 1, n),
            "bimodal": np.r_[rng.normal(-.5, .15, n // 2), rng.normal(.6, .1, n - n // 2)],
            "heavy": np.clip(rng.lognormal(0, 1, n) / 10 - 1, -1, 1),
            "three points": rng.choice([-1, 0, 1], n), "0/1": rng.choice([0, 1], n),
            "-1/1 70/30": rng.choice([-1, 1], n, p=[.7, .3]), "point 0.8": np.full(n, 0.8),
            "-1/0.5": rng.choice([-1, .5], n)}


def main() -> None:
    print("eps n mechanism shape q | 90%: before now | 95%: before now")
    for eps in (8.0, 10.0, 12.0, 16.0, 20.0):
        for n in (30, 100, 300, 1000, 3000, 10000):
            for make in (Hybrid, Piecewise):
                r = make(eps)
                if n * r.far_share > rare.FEW:
                    continue
                for name, x in shapes(n).items():
                    d = binned(x)
                    q = sum(v * v * c for v, c in d.items()) / n
                    row = [f"{coverage(r, d, normal_halfwidth(r, n, q, z)):.3f} "
                           f"{coverage(r, d, rare.halfwidth(r, n, q, c)):.3f}" for c, z in ((0.9, 1.6449), (0.95, 1.96))]
                    print(f"{eps:g} {n} {r.name} {name!r} {q:.2f} | {row[0]} | {row[1]}", flush=True)


if __name__ == "__main__":
    main()
