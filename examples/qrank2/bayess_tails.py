"""BayeSS's ±z·σ in the tails at small and larger n, on smooth shapes of our own (measurement for item 4; no change):
coverage of ±z·σ alone and of the shown rank error at 95% per (shape, n, τ), ε = 1, 100 runs.

    nice python examples/qrank2/bayess_tails.py   -> bayess_tails.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "audit9"))
sys.path.insert(0, str(HERE))

import quantile_heldout as h
from one_round_share import shapes

from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

Z = planner.Z95


def main(reps: int = 100) -> None:
    print("shape                      n       τ=0.1      τ=0.25     τ=0.75     τ=0.9  "
          "(coverage at 95% of ±z·σ alone / of the shown rank error, BayeSS, ε = 1)")
    for n in (2_000, 20_000):
        for shape in ("normal(300,40) 0..600", "lognormal(3,1) 0..1000", "uniform 0..199"):
            coins, x = shapes(n)[shape]
            hist = np.bincount(x, minlength=coins)
            cdf = np.cumsum(hist) / n
            out = []
            for tau in (0.1, 0.25, 0.75, 0.9):
                c = h.candidates(coins, tau)["bayess"]
                sigma = c.predict(1.0, n)
                e, s = [], []
                for t in range(reps):
                    a = simulate(c.protocol(1.0)(n), np.random.default_rng([6, t]), hist=hist).extra["answers"][tau]
                    v = int(a.extra["coin"])
                    e.append(max(0.0, (cdf[v - 1] if v else 0.0) - tau, tau - cdf[v]))
                    s.append(planner.shown_rank_error(a, tau, sigma, Z))
                out.append(f"{np.mean(np.array(e) <= Z * sigma):.2f}/{np.mean(np.array(e) <= np.array(s)):.2f}")
            print(f"{shape:26s} {n:6d}  " + "  ".join(out), flush=True)


if __name__ == "__main__":
    main()
