"""Not a fix, a probe of one: the integer point masses of exact_integers.py with the half-width widened by one input
grid step over n (Δ/n, Δ = 2/J, on the scaled axis), which also takes the boundary atom in (float ties). Least coverage
over v = 0..100, and the width cost (mean ratio widened/shown)."""
import itertools, numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
print("eps n conf min_cov_shown min_cov_widened_strict mean_width_ratio")
for eps, n in itertools.product([14, 16, 20, 30], [1, 2, 3, 5, 10, 30, 100]):
    r = Piecewise(float(eps)); d = 2 / r.steps
    for conf in (0.9, 0.95):
        c0, c1, ratio = [], [], []
        for v in range(101):
            x = v / 50 - 1
            half = rare.halfwidth(r, n, x * x, conf)
            err, mass = rare.error_law(r.report_values(), r.output_distribution, {x: n})
            a = np.abs(err) / n
            c0.append(mass[a <= half * (1 + 1e-9)].sum()); c1.append(mass[a < (half + d / n) * (1 - 1e-9)].sum())
            ratio.append((half + d / n) / half)
        print(f"{eps} {n} {conf} {min(c0):.3f} {min(c1):.3f} {np.mean(ratio):.2f}", flush=True)
