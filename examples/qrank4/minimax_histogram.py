"""What a minimax rule for the quantile planner would cost: never choose a BINNED one-round histogram (whose read-out
interpolates inside a bin, so it is off by up to a whole bin's share where one value holds many users), re-scored offline
on the stored grids (examples/quantile_results/grid.csv, our 124 cells; heldout_regret8.csv, 16 held-out cells): the
planner's pick (smallest σ·W) with and without binned histograms, and each pick's regret.

    python examples/qrank4/minimax_histogram.py   -> minimax_histogram.txt
"""
import sys

import pandas as pd

sys.path.insert(0, 'examples')
import quantile_grid as G  # noqa: E402
from ldpql.planner.quantile import histogram_bins  # noqa: E402
for f in ['examples/quantile_results/grid.csv','examples/quantile_results/heldout_regret8.csv']:
    df = pd.read_csv(f)
    out = []
    for key, rows in df.groupby(['shape','n','epsilon','tau','coins']):
        rows = rows.to_dict('records')
        s, n, eps, tau, coins = key
        best = min(r['mean_error'] for r in rows)
        reg = lambda r: (r['mean_error'] + 1/n)/(best + 1/n)
        def pick(rs): return min(rs, key=lambda r: (r['sigma']*G._weight(r['mechanism'], coins), G.ORDER.index(r['mechanism'])))
        binned = histogram_bins(eps, n, coins, (tau,)) < coins
        now = pick(rows)
        mm = pick([r for r in rows if not (r['mechanism']=='histogram' and binned)])
        out.append(dict(shape=s, n=n, eps=eps, tau=tau, binned=binned, now=now['mechanism'], now_reg=reg(now), mm=mm['mechanism'], mm_reg=reg(mm)))
    o = pd.DataFrame(out)
    ch = o[o.now != o.mm]
    print(f, len(o), "cells; changed", len(ch))
    print(ch.to_string())
    print("regret>1.25 now", (o.now_reg>1.25).sum(), "minimax", (o.mm_reg>1.25).sum(), "max now", o.now_reg.max().round(2), "max mm", o.mm_reg.max().round(2))
