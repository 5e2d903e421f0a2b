"""Audit 14: why a grid cell misses. Re-runs one cell of quantile_grid14.py with its seeds and prints, for each run
whose rank error exceeds the shown one, the answer, its true rank interval, the bracketing coins the bound read (their
pooled F̂, standard error, true F) and the Bonferroni count.

    nice python examples/audit14/dig.py SHAPE N EPS TAU MECHANISM [confidence] [reps]
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import quantile_grid14 as grid

from ldpql.mechanisms.quantile import pooled
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate


def main(name: str, n: int, eps: float, tau: float, mech: str, conf: float = 0.95, reps: int = 200) -> None:
    shape = grid.shapes(n)[name]
    c = grid.candidates(shape, tau, conf)[mech]
    sigma, z = c.predict(eps, n), NormalDist().inv_cdf(0.5 + conf / 2)
    rule = getattr(planner, "BRACKET", None)
    rule = rule.get(mech) if rule else planner.BRACKET_WINDOW.get(mech)
    print(f"{name} n={n} eps={eps} tau={tau} {mech}: z·σ = {z * sigma:.4f}, rule {rule}")
    misses = 0
    for t in range(reps):
        a = simulate(c.protocol(eps)(n), np.random.default_rng([grid.SEED, t]), hist=shape.hist).extra["answers"][tau]
        v = int(a.extra["coin"])
        err, shown = shape.coin_error(v, tau), planner.shown_rank_error(a, tau, sigma, z)
        if err <= shown + 1e-12:
            continue
        misses += 1
        stats = pooled(a.extra.get("questions", []))
        coins = np.array(sorted(stats))
        f = np.array([stats[k][0] for k in coins])
        se = np.sqrt([stats[k][1] for k in coins])
        up = coins[coins >= v - 1][:2]
        down = coins[coins <= v][-2:]
        plaus = int(np.sum(np.abs(f - tau) < z * se)) if len(coins) else 0
        near = [(int(k), round(float(stats[k][0]), 4), round(float(np.sqrt(stats[k][1])), 4),
                 round(float(shape.cdf[k]), 4)) for k in list(up) + list(down)]
        print(f"run {t}: v={v} F(v-1)={shape.cdf[v - 1] if v else 0:.4f} F(v)={shape.cdf[v]:.4f} err={err:.4f} "
              f"shown={shown:.4f} search={a.extra.get('search', mech)} asked={len(coins)} plausible={plaus} "
              f"bracket (coin, F̂, se, F)={near}")
    print(f"misses {misses}/{reps}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), float(a[2]), float(a[3]), a[4], float(a[5]) if len(a) > 5 else 0.95,
         int(a[6]) if len(a) > 6 else 200)
