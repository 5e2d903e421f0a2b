"""Confidence other than 90/95% (exact law at the true q, boundary atoms counted): 0.8 and 0.99."""
import numpy as np
from ldpql.mechanisms import rare
from sim import MECH
rng = np.random.default_rng(1)
for mech, eps, n in (("piecewise", 16, 1000), ("piecewise", 12, 300), ("hybrid", 16, 1000), ("piecewise", 16, 30)):
    r = MECH[mech](eps)
    u = np.round(rng.uniform(-1, 1, n), 3)
    sets = {"uniform": dict(zip(*np.unique(u, return_counts=True))), "bimodal ±0.5 60/40": {-0.5: int(.6 * n), 0.5: n - int(.6 * n)},
            "pt 0.21": {0.21: n}, "±1 halves": {1.0: n // 2, -1.0: n - n // 2}}
    for name, d in sets.items():
        d = {float(k): int(c) for k, c in d.items()}
        q = sum(k * k * c for k, c in d.items()) / n
        err, mass = rare.error_law(r.report_values(), r.output_distribution, d)
        out = []
        for conf in (0.8, 0.99):
            h = rare.halfwidth(r, n, q, conf)
            out.append(f"{conf}: {mass[np.abs(err) / n <= h * (1 + 1e-9)].sum():.3f}")
        print(f"{mech} eps={eps} n={n} {name}: " + "; ".join(out), flush=True)
