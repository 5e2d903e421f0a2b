"""qrank7: why HEAD (24b4b7a) zooms or not, and which answer it keeps, in chosen cells of the two grids.

    cd /tmp/qr7; PYTHONPATH=/tmp/qr7_head python /work/main/examples/qrank7/repro_head.py RUNS [residual0]

Per cell, the histogram candidate forced, with hist_grid.py's data and seeds, the first RUNS runs. It wraps (does not
change) three functions of ldpql.mechanisms.quantile_histogram to record, per run:
  - zoom_plan's decision at the bin answering τ in the first half's release: whether that bin passes the
    "heavier than its lighter neighbour by ZOOM_Z se" test, `stay` (the predicted squared error of not splitting:
    the prefix variance + (excess/2)^2) and the smallest `zoom_error` over the cell counts tried, with the
    ZOOM_RESIDUAL term of that best split;
  - in zoomed runs, the cells' answer and the bins' interpolated answer (read_out's two calls in _release) and
    whether `contradicts` let the cells' answer stand.
Printed per cell: zoom rate; the share of runs whose bin passed the heaviness test; median stay and best zoom_error
(and its residual) over those runs; in zoomed runs the share where the cells' answer was kept, and the mean rank
error of the kept answer, the cells' answer and the interpolated answer.

With `residual0` (an experiment, not a proposed patch; ldpql itself is not edited): zoom_error is wrapped to drop its
ZOOM_RESIDUAL term when the split's cells are one coin wide (cells >= the bin's width), where no read-out inside a
cell is left to price. Only the RESIDUAL0_CELLS are run then.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "qrank6"))   # (its hist_grid.py ran every version)
import hist_grid  # noqa: F401  (puts examples/ and examples/audit14 on sys.path)

import ldpql
import ldpql.mechanisms.quantile_histogram as qh
from ldpql.simulation import simulate

LOG: dict = {}
RESIDUAL0 = len(sys.argv) > 2 and sys.argv[2] == "residual0"
_plan, _read, _contra, _zerr = qh.zoom_plan, qh.read_out, qh.contradicts, qh.zoom_error
WIDTHS: dict = {}


def zerr(eps, f1, n, j, cells, tau, *width):   # (after 24b4b7a zoom_error takes the bin's width and drops the
    e = _zerr(eps, f1, n, j, cells, tau, *width)  # residual for one-coin cells itself: residual0 is then a no-op)
    if RESIDUAL0 and not width and cells >= WIDTHS["w"][j]:
        e -= (qh.ZOOM_RESIDUAL * max(float(f1[j]), 0.0) / cells) ** 2
    return e


def plan(eps, f1, unit_var1, n, taus, widths, bins):
    WIDTHS["w"] = widths
    out = _plan(eps, f1, unit_var1, n, taus, widths, bins)
    tau = taus[0]
    cdf1 = np.cumsum(f1)
    j = qh.crossing(cdf1, tau)
    near = [k for k in (j - 1, j + 1) if 0 <= k < len(f1)]
    k = min(near, key=lambda i: f1[i]) if near else None
    low = f1[j] - (f1[k] if k is not None else 0.0) - qh.ZOOM_Z * np.sqrt(
        max(float(unit_var1[j]) + (float(unit_var1[k]) if k is not None else 0.0), 0.0))
    rec = {"heavy": bool(widths[j] > 1 and low > 0), "plan": out}
    if rec["heavy"]:
        rec["stay"] = float(qh.prefix_variance(qh.oracle(eps, len(f1)), cdf1[j], j + 1, n)) + (low / 2) ** 2
        cands = [(qh.zoom_error(eps, f1, n, j, c, tau), c) for c in qh._cell_counts(int(widths[j]), bins)]
        best, cells = min(cands)
        rec["best"], rec["cells"] = best, cells
        rec["residual"] = 0.0 if RESIDUAL0 and cells >= widths[j] else \
            (qh.ZOOM_RESIDUAL * max(float(f1[j]), 0.0) / cells) ** 2
        rec["cell_width"] = qh.bin_width(int(widths[j]), cells)
    LOG["plan"] = rec
    return out


def read(cdf, freq, tau, ends):
    c = _read(cdf, freq, tau, ends)
    LOG.setdefault("reads", []).append(int(c))
    return c


def contra(cdf, var, ends, coin, tau):
    r = _contra(cdf, var, ends, coin, tau)
    LOG["contradicts"] = r
    return r


qh.zoom_plan, qh.read_out, qh.contradicts, qh.zoom_error = plan, read, contra, zerr

CELLS = [  # (grid, cell): chosen cells where eb4b888 gained and cells where the versions differ
    ("planner", ("discrete", 10_000, 8.0, 0.5)),
    ("planner", ("discrete", 100_000, 2.0, 0.1)),
    ("planner", ("discrete", 10_000, 2.0, 0.1)),
    ("planner", ("discrete", 1_000_000, 0.5, 0.5)),
    ("planner", ("heavy", 100_000, 0.5, 0.5)),
    ("planner", ("pareto", 50_000, 4.0, 0.1)),
    ("audit14", (2_000, "zipf", 0.05, 8.0)),
    ("audit14", (500, "bounds", 0.3, 8.0)),
    ("audit14", (500, "zipf", 0.3, 8.0)),
    ("audit14", (100_000, "bounds", 0.95, 1.0)),
    ("audit14", (100_000, "zipf", 0.5, 1.0)),
    ("audit14", (100_000, "zipf", 0.02, 0.25)),
    ("audit14", (100_000, "narrow1k", 0.3, 1.0)),
]
RESIDUAL0_CELLS = [
    ("planner", ("discrete", 10_000, 8.0, 0.5)),
    ("planner", ("discrete", 100_000, 2.0, 0.1)),
    ("planner", ("discrete", 1_000_000, 2.0, 0.5)),
    ("audit14", (500, "bounds", 0.3, 8.0)),
    ("audit14", (2_000, "bounds", 0.3, 8.0)),
]


def one(grid, cell, reps):
    import quantile_grid as qg
    import quantile_grid14 as g14
    if grid == "planner":
        s, n, eps, tau = cell
        hist, coins = qg.shape(s, n)
        n = int(hist.sum())
        cdf = np.cumsum(hist) / n
        c = next(c for c in qg.candidates(coins, tau) if c.mechanism == "histogram")
        err, seed = (lambda v: qg.rank_error(cdf, v, tau)), 23
    else:
        n, name, tau, eps = cell
        shape = g14.shapes(n)[name]
        hist, c = shape.hist, g14.candidates(shape, tau)["histogram"]
        err, seed = (lambda v: shape.coin_error(v, tau)), g14.SEED
    rows = []
    for t in range(reps):
        LOG.clear()
        est = simulate(c.protocol(eps)(n), np.random.default_rng([seed, t]), hist=hist)
        coin = int(est.extra["answers"][tau].extra["coin"])
        r = {"err": err(coin), "zoomed": bool(est.extra.get("zoomed")), **LOG["plan"]}
        if r["zoomed"]:
            cells_coin, smooth = LOG["reads"][:2]
            r |= {"kept_cells": bool(LOG["contradicts"]), "err_cells": err(cells_coin), "err_smooth": err(smooth)}
        rows.append(r)
    z = [r for r in rows if r["zoomed"]]
    hv = [r for r in rows if r["heavy"]]
    out = (f"{grid:8s} {cell!s:38s} err {np.mean([r['err'] for r in rows]):.5f}  zoom {len(z) / reps:.2f}  "
           f"heavy {len(hv) / reps:.2f}")
    if hv:
        out += (f"  stay {np.median([r['stay'] for r in hv]):.2e}  best {np.median([r['best'] for r in hv]):.2e} "
                f"(residual {np.median([r['residual'] for r in hv]):.2e}, cells of {int(np.median([r['cell_width'] for r in hv]))} coins)")
    if z:
        out += (f"  | zoomed: cells kept {np.mean([r['kept_cells'] for r in z]):.2f}, err kept "
                f"{np.mean([r['err'] for r in z]):.5f}, cells {np.mean([r['err_cells'] for r in z]):.5f}, "
                f"interpolated {np.mean([r['err_smooth'] for r in z]):.5f}")
    print(out, flush=True)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    print("ldpql from", ldpql.__file__, "residual0" if RESIDUAL0 else "", flush=True)
    for grid, cell in (RESIDUAL0_CELLS if RESIDUAL0 else CELLS):
        one(grid, cell, reps)


if __name__ == "__main__":
    main()
