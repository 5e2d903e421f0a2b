"""Integer data on [0, 100] (x = v/50 − 1): every point mass v = 0..100, PM (the planner's choice), exact law at the
true q (no q̂ noise). Per (ε, n, confidence): the least coverage and how many of the 101 values fall > 2 points short
(boundary atoms counted, with a 1e-9 tolerance: the float-tie problem is on top of this)."""
import itertools, time, numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
t0 = time.time()
print("eps n conf lam min_cov(value) n_values_short(>2pt) mean_cov")
for eps, n in itertools.product([12, 14, 16, 18, 20, 25, 30], [1, 2, 3, 5, 10, 20, 30, 50, 100, 300]):
    r = Piecewise(float(eps))
    if n * r.far_share > rare.FEW:
        continue
    for conf in (0.9, 0.95):
        covs = []
        for v in range(101):
            x = v / 50 - 1
            half = rare.halfwidth(r, n, x * x, conf)
            err, mass = rare.error_law(r.report_values(), r.output_distribution, {x: n})
            covs.append(float(mass[np.abs(err) / n <= half * (1 + 1e-9)].sum()))
        covs = np.array(covs)
        k = int(np.argmin(covs))
        print(f"{eps} {n} {conf} {n*r.far_share:.2g} {covs[k]:.3f}({k}) {int((covs < conf - 0.02).sum())} {covs.mean():.3f}"
              f"  [{time.time()-t0:.0f}s]", flush=True)
