"""(1b) Hybrid with no PM report (q̂ None): the q-free half-width against the exact law of an all-Duchi release.
At ε ≤ 0.61 β = 0 and every release is all-Duchi; above it, a release with 0 PM reports is all-Duchi given the
(public) PM count. Σy = C_D·(2K − n), K Poisson-binomial with P(+) from Duchi.output_distribution. Scans point masses
and two-point data; coverage is exact (atoms on the bound counted with 1e-9 tolerance; the shown interval is also
clipped to the domain, which cannot lower coverage)."""
import itertools, sys, time, numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.hybrid import Hybrid

def pbinom(ps):
    pmf = np.array([1.0])
    for p in ps:
        pmf = np.convolve(pmf, [1 - p, p])
    return pmf

t0 = time.time()
grid = np.linspace(-1, 1, 41)
print("eps beta n conf halfwidth(mean units) min_cov data_at_min mean_cov n_short(>1pt)  P(no PM report)")
for eps in (0.3, 0.5, 0.61, 0.7, 1.0, 1.5, 2.0):
    r = Hybrid(eps)
    C = r.duchi.C
    for n in (1, 2, 3, 4, 5, 8, 12, 16):
        if n * r.far_share > rare.FEW:
            continue
        for conf in (0.9, 0.95):
            H = rare.halfwidth(r, n, None, conf)
            covs = []
            sets = [(x,) * n for x in grid]
            if n >= 2:
                sets += [tuple([x1] * k + [x2] * (n - k)) for x1, x2 in itertools.combinations(grid[::2], 2)
                         for k in sorted({1, n // 2, n - 1})]
            for xs in sets:
                ps = [float(r.duchi.output_distribution(x)[1]) for x in xs]
                pmf = pbinom(ps)
                k = np.arange(n + 1)
                err = C * (2 * k - n) - sum(xs)
                covs.append((float(pmf[np.abs(err) <= n * H * (1 + 1e-9)].sum()), xs))
            c = np.array([v for v, _ in covs])
            i = int(np.argmin(c))
            xs = covs[i][1]
            print(f"{eps} {r.beta:.3f} {n} {conf} {H:.4f} {c[i]:.3f} {[round(50*x+50,1) for x in sorted(set(xs))]}x"
                  f"{[xs.count(v) for v in sorted(set(xs))]} {c.mean():.3f} {int((c < conf - 0.01).sum())}/{len(c)} "
                  f"{(1-r.beta)**n:.3f} [{time.time()-t0:.0f}s]", flush=True)
