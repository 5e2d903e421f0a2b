"""Audit 16: `crossing` answers the MIDDLE of its best split points (min + max) // 2 — not necessarily a best split itself
when the best splits are far apart. How often, and what it costs against the nearest best split to that middle.
Consistent tree, planner's candidate, 400 runs per cell.   PYTHONPATH=/tmp/ldpql_068a6e2 nice python ties16.py -> ties16.txt"""
from pathlib import Path

import numpy as np

from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import _best_splits, crossing
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

from common16 import rng, shapes

HERE = Path(__file__).parent
lines = []
for n in (300, 2000, 20000):
    S = shapes(n)
    for name, tau in (("gap_at", 0.5), ("gap_below", 0.5), ("two_atoms", 0.5), ("pois16", 0.5), ("uniform", 0.5),
                      ("atom_high", 0.8), ("pareto", 0.9)):
        shape = S[name]
        for eps in (1.0, 4.0):
            target = planner.QuantileTarget("x", Encoding("x", shape.size, "x"), "", None, planner.UNIT, tau=tau,
                                            space=shape.space(), taus=(tau,))
            cand = next(c for c in planner.quantile_candidates(target) if c.mechanism == "hierarchical")
            make = cand.protocol(eps)
            off, cost, errs = 0, [], []
            for t in range(400):
                cdf = simulate(make(n), rng(7000, n, int(eps), t), hist=shape.hist, exact_positions=False).extra["cdf"]
                c = crossing(cdf, tau)
                best = np.concatenate([_best_splits(cdf >= tau), _best_splits(cdf > tau)])
                best = np.minimum(best, len(cdf) - 1)
                if c not in set(best.tolist()):
                    off += 1
                    near = int(best[np.argmin(np.abs(best - c))])
                    cost.append(shape.coin_error(c, tau) - shape.coin_error(near, tau))
                errs.append(shape.coin_error(c, tau))
            cost = np.array(cost) if cost else np.zeros(1)
            lines.append(f"{name:9s} n={n:<6d} eps={eps:g} q={tau}: answer not a best split in {off}/400 runs; its rank "
                         f"error minus the nearest best split's: mean {cost.mean():+.4f}, max {cost.max():+.4f}; "
                         f"mean error {np.mean(errs):.4f}")
            print(lines[-1], flush=True)
(HERE / "ties16.txt").write_text("\n".join(lines) + "\n")
