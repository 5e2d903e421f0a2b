"""qrank6 reproducer: the zoom fires on smooth but steep data at small ε, where the second half's finer partition
reads τ with far more noise than heavy_bins' cost term assumes (eb4b888).

heavy_bins compares the bin's excess with 2·sqrt(cdf_var[j] + sampling·τ(1-τ)), cdf_var[j] being the FIRST round's
variance of the prefix ending at bin j (J = j + 1 coarse bins, half the users). The zoomed answer is read from the
second half's prefix over the fine partition, which at τ spans j coarse bins plus the fine cells of bin j up to τ;
under OUE a prefix's variance grows with the number of cells it sums (prefix_variance), so the read has a standard
error up to sqrt(cells) times larger than the cost assumed.

Per cell (data and seeds [23, t] as examples/quantile_grid.py; the planner's bins for the histogram), RUNS runs of
  zoom off   histogram_protocol(..., zoom=False): one round over all users (the protocol of 856d265)
  zoom on    the shipped protocol (eb4b888)
Columns: bins / w (coins per bin) / cell (coins per cell of a split bin) / fine (cells of the second round's
partition); mean rank error with the zoom off and on; zoom = share of runs that split; cost = the threshold
heavy_bins compares the excess with, 2·sqrt(first-round prefix variance at bin j + the half's sampling), here at the
true masses; 2·sd2 = twice the second half's standard error of F̂ at τ (prefix_variance of the fine partition's oracle
over the cells up to τ, half the users, plus the sampling) at the true masses; 2·sd shown = twice the mean standard
error the release itself carries at its answer in the zoomed runs (sqrt of extra['cdf_var']).

    PYTHONPATH=/tmp/qr6_after python examples/qrank6/repro_zoom_cost.py [RUNS]     (git archive eb4b888)
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import quantile_grid as qg

from ldpql.mechanisms.quantile import CoinSpace
from ldpql.mechanisms.quantile_histogram import bin_width, histogram_protocol, oracle, prefix_variance, zoom_cells
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

CELLS = [("heavy", 10_000, 0.5, 0.1), ("heavy", 10_000, 0.5, 0.5), ("heavy", 100_000, 0.5, 0.5),
         ("pareto", 50_000, 1.0, 0.1), ("pareto", 50_000, 4.0, 0.1),
         ("discrete", 10_000, 2.0, 0.1), ("discrete", 10_000, 8.0, 0.5)]   # the last two: gains, for contrast


def main(runs: int = 100) -> None:
    print(f"{'shape':8s} {'n':>7s} {'ε':>4s} {'τ':>4s} {'bins':>5s} {'w':>5s} {'cell':>4s} {'fine':>5s} "
          f"{'err off':>8s} {'err on':>8s} {'zoom':>5s} {'cost':>7s} {'2·sd2':>7s} {'2·sd shown':>10s}")
    for s, n, eps, tau in CELLS:
        hist, coins = qg.shape(s, n)
        n = int(hist.sum())
        cdf = np.cumsum(hist) / n
        bins = planner.histogram_bins(eps, n, coins, (tau,))
        width = bin_width(coins, bins)
        nb = -(-coins // width)
        cell = zoom_cells(width, nb)
        j = int(np.searchsorted(cdf[np.arange(width - 1, coins + width - 1, width).clip(max=coins - 1)], tau))
        fine = nb - 1 + -(-min(width, coins - j * width) // cell)
        # the cost heavy_bins compares with (first half: n/2 users, the prefix of j + 1 coarse bins), at the true mass
        half = n - n // 2
        mass = float(cdf[min((j + 1) * width, coins) - 1])
        cost = 2 * math.sqrt(float(prefix_variance(oracle(eps, nb), mass, j + 1, n // 2))
                             + (1 / half - 1 / n) * tau * (1 - tau))
        # the second half's prefix at τ: j coarse bins + the fine cells of bin j up to τ
        inside = (tau - (cdf[j * width - 1] if j else 0.0)) / max(mass - (cdf[j * width - 1] if j else 0.0), 1e-12)
        cells_at = j + max(1, math.ceil(inside * min(width, coins - j * width) / cell))
        sd2 = math.sqrt(float(prefix_variance(oracle(eps, fine), tau, cells_at, half)) + (1 / half - 1 / n) * tau
                        * (1 - tau))
        errs = {}
        zoomed, shown_sd = [], []
        for zoom in (False, True):
            e = []
            for t in range(runs):
                est = simulate(histogram_protocol(CoinSpace(coins), eps, [tau], bins, zoom)(n),
                               np.random.default_rng([23, t]), hist=hist)
                a = est.extra["answers"][tau]
                e.append(qg.rank_error(cdf, int(a.extra["coin"]), tau))
                if zoom:
                    zoomed.append(bool(est.extra["zoomed"]))
                    if est.extra["zoomed"]:
                        ends, var = a.extra["cdf_points"][0], a.extra["cdf_var"]
                        shown_sd.append(math.sqrt(var[min(int(np.searchsorted(ends, a.extra["coin"])), len(var) - 1)]))
            errs[zoom] = np.mean(e)
        print(f"{s:8s} {n:7d} {eps:4g} {tau:4g} {nb:5d} {width:5d} {cell:4d} {fine:5d} {errs[False]:8.4f} "
              f"{errs[True]:8.4f} {np.mean(zoomed):5.2f} {cost:7.4f} {2 * sd2:7.4f} "
              f"{2 * np.mean(shown_sd) if shown_sd else float('nan'):10.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
