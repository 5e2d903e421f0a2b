"""Collect search releases (the asked questions) on a grid, for measuring rank-error rules offline.

Each run stores the answer's coin, its true rank error, the candidate's σ and every question it asked (coin,
F̂, variance), so a rule for the shown rank error can be scored on the same releases without re-running them.

    nice python examples/qrank3/collect.py GRID [reps] [part/parts]   -> GRID[_part].pkl

GRID: ``own`` (the cells rules are chosen on: examples/qrank2's shapes, seeds [31, ...]) or ``heldout`` (audit 9's
shapes and n, read only to check a rule chosen on ``own``).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "qrank2"))
sys.path.insert(0, str(HERE.parent / "audit9"))

from ldpql.mechanisms import Encoding  # noqa: E402
from ldpql.mechanisms.quantile import CoinSpace  # noqa: E402
from ldpql.planner import quantile as planner  # noqa: E402
from ldpql.simulation import simulate  # noqa: E402

GRIDS = {  # name -> (shapes module, n's, ε's, τ's, seed head)
    "own": ("one_round_share", (1_000, 2_000, 5_000, 20_000), (0.5, 1.0, 2.0, 4.0), (0.1, 0.5, 0.9), 31),
    "heldout": ("quantile_heldout", (2_000, 20_000), (0.5, 1.0, 4.0), (0.1, 0.25, 0.5, 0.75, 0.9), 77),
}
MECHANISMS = ("bayess", "naive_nbs", "shuffle_nbs")


def candidates(coins: int, tau: float) -> dict:
    target = planner.QuantileTarget("x", Encoding("x", coins, "x"), "", None, planner.UNIT, tau=tau,
                                    space=CoinSpace(coins), taus=(tau,))
    out = {c.mechanism: c for c in planner.quantile_candidates(target)}
    out["shuffle_nbs"].delta = 1e-8
    return out


def cell(c, hist: np.ndarray, tau: float, eps: float, reps: int, head: int) -> dict:
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    runs = []
    for t in range(reps):
        a = simulate(c.protocol(eps)(n), np.random.default_rng([head, t]), hist=hist).extra["answers"][tau]
        v = int(a.extra["coin"])
        err = max(0.0, (cdf[v - 1] if v > 0 else 0.0) - tau, tau - cdf[v])
        qs = np.array([(q.coin, q.estimate, q.variance) for q in a.extra["questions"]])
        runs.append((v, err, qs, a.extra.get("epsilon_local")))
    return {"sigma": c.predict(eps, n), "runs": runs, "cdf": cdf}


def main(grid: str, reps: int = 100, part: str = "1/1") -> None:
    module, ns, epsilons, taus, head = GRIDS[grid]
    shapes = __import__(module).shapes
    k, parts = (int(s) for s in part.split("/"))
    out, i = [], 0
    for n in ns:
        for shape, (coins, x) in shapes(n).items():
            hist = np.bincount(x, minlength=coins)
            for tau in taus:
                for eps in epsilons:
                    cands = candidates(coins, tau)
                    for mech in MECHANISMS:
                        i += 1
                        if i % parts != k - 1:
                            continue
                        c = cands[mech]
                        if c.check is not None and c.check(eps, n):
                            continue
                        row = {"shape": shape, "B": coins, "n": n, "eps": eps, "tau": tau, "mechanism": mech,
                               "max_share": float(hist.max() / n), **cell(c, hist, tau, eps, reps, head)}
                        out.append(row)
        print(grid, n, "done", len(out), flush=True)
    name = grid if parts == 1 else f"{grid}_{k}"
    with open(HERE / f"{name}.pkl", "wb") as fh:
        pickle.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100, sys.argv[3] if len(sys.argv) > 3 else "1/1")
