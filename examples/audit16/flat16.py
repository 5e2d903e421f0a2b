"""Audit 16: the new read-out where F is flat EXACTLY at q (every value of a gap answers q with rank error 0).

The split with the fewest units on the wrong side is the argmin of a ±1 walk over the gap (F̂ is above or below q
about equally often there); the argmin of a random walk falls near its ends (arcsine law), and past an end the walk
enters the data, where the rank error is no longer 0. Same releases for both read-outs (the consistent tree, the
planner's candidate); 400 runs per cell. Reported: share of runs answering inside the flat (rank error 0), mean
error, where in the flat the new answer lies (fifths of the gap), old vs new.

    nice python flat16.py [reps]  -> flat16.txt
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import crossing
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

from common16 import Shape, old_crossing, rng

HERE = Path(__file__).parent
lines = []


def say(s):
    print(s, flush=True)
    lines.append(s)


def main(reps):
    cells = []
    for n in (2000, 20000):
        k = n // 2
        r = rng(5000, n)
        gap = Shape("gap_at", np.concatenate([r.integers(0, 100, k), r.integers(900, 1024, n - k)]), 0, 1023, True)
        cells.append((gap, 0.5, (100, 899)))
        k = n // 5   # 20% at the top value of INTEGER 0..1000, the rest N(500, 100): F = 0.8 exactly on ~[850, 999]
        top = Shape("atom_high", np.concatenate([np.full(k, 1000.0), rng(5001, n).normal(500, 100, n - k)]), 0, 1000, True)
        lo = int(np.searchsorted(top.cdf, 0.8 - 1e-12))
        cells.append((top, 0.8, (lo, 999)))
    for ci, (shape, tau, (a, b)) in enumerate(cells):
        for eps in (1.0, 2.0, 4.0):
            target = planner.QuantileTarget("x", Encoding("x", shape.size, "x"), "", None, planner.UNIT, tau=tau,
                                            space=shape.space(), taus=(tau,))
            cand = next(c for c in planner.quantile_candidates(target) if c.mechanism == "hierarchical")
            make = cand.protocol(eps)
            res = {"old": [], "new": []}
            pos = []
            for t in range(reps):
                rel = simulate(make(shape.n), rng(5100 + ci, int(eps), t), hist=shape.hist, exact_positions=False)
                cdf = rel.extra["cdf"]
                for name, rule in (("old", old_crossing), ("new", crossing)):
                    c = rule(cdf, tau)
                    res[name].append((c, shape.coin_error(c, tau)))
                c = res["new"][-1][0]
                pos.append(min(max((c - a) / (b - a + 1), -0.001), 1.0))
            out = []
            for name in ("old", "new"):
                e = np.array([x[1] for x in res[name]])
                out.append(f"{name}: rank error 0 in {np.mean(e == 0):.3f}, mean error {e.mean():.4f}, p95 "
                           f"{np.quantile(e, 0.95):.4f}")
            pos = np.array(pos)
            fifths = [round(float(np.mean((pos >= i / 5) & (pos < (i + 1) / 5))), 3) for i in range(5)]
            outside = np.mean(pos < 0) + np.mean(pos >= 1)
            say(f"{shape.name} n={shape.n} ε={eps:g} q={tau} (flat on values {a}..{b}): " + "; ".join(out)
                + f"; new answer by fifth of the flat {fifths}, outside it {outside:.3f}")
    (HERE / "flat16.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
