"""qrank7: the histogram candidate, forced, on the engine's two quantile grids; one engine version per run.
Copied unchanged from examples/qrank6/hist_grid.py but for this docstring.

The engine measured is the ldpql that Python imports: PYTHONPATH=/tmp/qr7_head (git archive 24b4b7a, HEAD when
this ran; the same script at qrank6 ran 856d265 from /tmp/qr6_before and eb4b888 from /tmp/qr6_after). Run it
from a directory other than /work/main (the current directory would come before PYTHONPATH); the script prints
the imported path and records it with the runs.

  planner grid  examples/quantile_grid.py's 124 cells (shape(), candidates(), seeds [23, t], as that script runs them)
  audit14 grid  examples/audit14/quantile_grid14.py's 672 cells (shapes(), target(), seeds [1414, t])

Per run: the coin's rank error, whether the release zoomed (extra['zoomed'] non-empty; absent before = False), the
shown rank error at 95% (ldpql.planner.quantile.shown_rank_error with the candidate's σ at confidence 0.95, z = 1.96,
as quantile_grid14.py computes it). Per cell: the planner's choice (planner grid: quantile_grid.finish_cell's
σ × W rule over the runnable candidates; audit14 grid: EXPLAIN on the registered table, quantile_grid14.chosen).

    cd /tmp/qr7; PYTHONPATH=/tmp/qr7_head python /work/main/examples/qrank7/hist_grid.py planner REPS OUT.pkl [k/parts]
    cd /tmp/qr7; PYTHONPATH=/tmp/qr7_head python /work/main/examples/qrank7/hist_grid.py audit14 REPS OUT.pkl [k/parts]
"""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(EXAMPLES / "audit14"))

import ldpql
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

Z95 = NormalDist().inv_cdf(0.975)


def runs(c, eps: float, n: int, hist: np.ndarray, tau: float, sigma: float, seed_head: int, reps: int,
         error) -> dict:
    errs, zoomed, shown, bins = [], [], [], None
    for t in range(reps):
        est = simulate(c.protocol(eps)(n), np.random.default_rng([seed_head, t]), hist=hist)
        a = est.extra["answers"][tau]
        errs.append(error(int(a.extra["coin"])))
        zoomed.append(bool(est.extra.get("zoomed")))
        shown.append(planner.shown_rank_error(a, tau, sigma, Z95))
        bins = est.extra.get("bins", bins)
    return {"errors": np.array(errs), "zoomed": np.array(zoomed), "shown": np.array(shown), "sigma": sigma,
            "bins": bins}


def planner_cells():
    import quantile_grid as qg
    for s in qg.CALIBRATION + qg.HELD_OUT:
        cells = qg.HELD_OUT_CELLS[s] if s in qg.HELD_OUT else [(n, e, t) for n in qg.NS for e in qg.EPSILONS
                                                                for t in qg.TAUS]
        for n, eps, tau in cells:
            yield s, n, eps, tau


def planner_cell(s: str, n: int, eps: float, tau: float, reps: int) -> dict:
    import quantile_grid as qg
    hist, coins = qg.shape(s, n)
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    rows, hist_c = [], None
    for c in qg.candidates(coins, tau):
        if c.check is not None and c.check(eps, n):
            continue
        rows.append({"mechanism": c.mechanism, "sigma": c.predict(eps, n), "coins": coins, "n": n,
                     "mean_error": 0.0})
        if c.mechanism == "histogram":
            hist_c = c
    qg.finish_cell(rows)
    pick = next(r["mechanism"] for r in rows if r["chosen"])
    out = {"shape": s, "n": n, "eps": eps, "tau": tau, "coins": coins, "chosen": pick}
    if hist_c is None:
        return out | {"refused": True}
    sigma = hist_c.predict(eps, n)
    return out | runs(hist_c, eps, n, hist, tau, sigma, 23, reps, lambda v: qg.rank_error(cdf, v, tau))


def audit14_cells():
    import quantile_grid14 as g14
    yield from g14.configs()


SHAPES: dict = {}


def audit14_cell(n: int, name: str, tau: float, eps: float, reps: int) -> dict:
    import quantile_grid14 as g14
    shape = SHAPES.setdefault(n, g14.shapes(n))[name]
    pick = g14.chosen(shape, tau, eps)
    c = g14.candidates(shape, tau)["histogram"]
    out = {"shape": name, "n": n, "eps": eps, "tau": tau, "coins": shape.size, "chosen": pick,
           "max_share": float(shape.hist.max() / n)}
    why = c.check(eps, n) if c.check is not None else None
    if why:
        return out | {"refused": why}
    sigma = c.predict(eps, n)
    return out | runs(c, eps, n, shape.hist, tau, sigma, g14.SEED, reps, lambda v: shape.coin_error(v, tau))


def main() -> None:
    grid, reps, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    k, parts = (int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1/1").split("/"))
    print("ldpql from", ldpql.__file__, file=sys.stderr, flush=True)
    cells = list(planner_cells() if grid == "planner" else audit14_cells())
    fn = planner_cell if grid == "planner" else audit14_cell
    res, started = [], time.time()
    for i, cell in enumerate(cells):
        if i % parts != k - 1:
            continue
        res.append(fn(*cell, reps))
        print(i, cell, f"{time.time() - started:.0f}s", file=sys.stderr, flush=True)
        if len(res) % 20 == 0:
            out.write_bytes(pickle.dumps({"ldpql": ldpql.__file__, "reps": reps, "cells": res}))
    out.write_bytes(pickle.dumps({"ldpql": ldpql.__file__, "reps": reps, "cells": res}))


if __name__ == "__main__":
    main()
