"""Audit 17: what heavy_bins prices as the cost of the zoom (2·sqrt(cdf_var of the FIRST round at the bin + the half's
sampling)) against the standard error the zoomed read actually has (the second round's oracle over the finer partition,
the prefix of cells up to the answer, half the users, plus sampling). Closed forms of the engine's own prefix_variance."""
import math
from ldpql.mechanisms.quantile_histogram import bin_width, oracle, prefix_variance, zoom_cells
from ldpql.planner.quantile import histogram_bins

for K, eps, n, taus, j in ((65536, 4, 2000, (0.1, 0.5, 0.9), 30), (65536, 4, 20000, (0.25, 0.5, 0.75), 29),
                           (1001, 2, 500, (0.1, 0.5, 0.9), 7), (65536, 2, 200000, (0.5,), 32),
                           (200001, 8, 2000, (0.05, 0.9), 0)):
    b = histogram_bins(eps, n, K, taus); w = bin_width(K, b); nb = -(-K // w)
    cell = zoom_cells(w, nb); extra = -(-w // cell) - 1; fine = nb + extra
    r1, r2 = oracle(eps, nb), oracle(eps, fine)
    h = n // 2
    for tau in taus:
        samp = 1 / h - 1 / n
        # tau's prefix: in bins (first round) about tau*nb bins; in the fine partition the same prefix spans the
        # zoomed bin's cells too if it lies at or after bin j
        J1 = max(tau * nb, 1.0)
        J2 = J1 + (extra if tau * nb >= j + 1 else (extra * (tau * nb - j) if tau * nb > j else 0))
        v1 = float(prefix_variance(r1, tau, J1, h))
        v2 = float(prefix_variance(r2, tau, J2, h))
        vone = float(prefix_variance(r1, tau, J1, n))
        print(f"K={K} eps={eps} n={n} tau={tau}: bins {nb} ({r1.name}) -> {fine} cells ({r2.name}); priced cost "
              f"2*sd={2 * math.sqrt(v1 + samp * tau * (1 - tau)):.4f}; actual zoomed sd={math.sqrt(v2 + samp * tau * (1 - tau)):.4f}"
              f" vs one-round sd={math.sqrt(vone):.4f} (ratio {math.sqrt(v2 + samp * tau * (1 - tau)) / math.sqrt(vone):.1f}x)")
