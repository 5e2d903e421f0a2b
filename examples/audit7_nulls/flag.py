import numpy as np
from ldpql.mechanisms.conditional import CollisionMean, answer, MISSING
from scipy.stats import beta
def cp(k, n):
    return (beta.ppf(0.025, k, n-k+1) if k else 0.0, beta.ppf(0.975, k+1, n-k) if k < n else 1.0)
R = 400
print("kind n null eps | flagged | cov_all | cov_unflagged [CP] | cov_flagged")
for kind in ("bound", "skew"):
  for n, nf, eps in [(500, .95, .5), (5000, .95, .5), (500, .8, .5), (5000, .8, .5), (500, .95, 2), (5000, .95, 2), (2000, .9, 1), (20000, .95, 1), (20000, 0.5, 0.5)]:
    rng = np.random.default_rng(n + int(nf*100) + int(eps*10))
    x = np.full(n, 10.0) if kind == "bound" else np.clip(np.exp(rng.normal(0, 1, n)), 0, 10)
    null = rng.random(n) < nf
    truth = x[~null].mean()
    xs = np.where(null, MISSING, (x - 5) / 5)
    r = CollisionMean(eps)
    cov, flag = [], []
    for i in range(R):
        est = answer(r, r.aggregate(r.randomize(xs, rng)), n, "mean", 0.0, 10.0)
        v, se = est.values[0], est.stderr[0]
        cov.append(abs(v - truth) <= 1.959964 * se); flag.append(bool(est.note))
    cov, flag = np.array(cov), np.array(flag)
    u = cov[~flag]; k = int(u.sum()); lo, hi = cp(k, len(u)) if len(u) else (np.nan, np.nan)
    print(kind, n, nf, eps, "|", flag.mean(), "|", cov.mean(), "|", f"{u.mean() if len(u) else np.nan:.3f} ({k}/{len(u)}) [{lo:.3f},{hi:.3f}]", "|", cov[flag].mean() if flag.any() else None, flush=True)
