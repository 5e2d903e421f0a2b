"""Search 3: tiny n (1-20) at moderate ε, where q̂ is noisy: sim replica, coverage split by whether widen applied."""
import itertools, sys, numpy as np
from sim import run, MECH, exact_cov
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
def shapes(n):
    k = max(1, n // 2)
    d = {"all+1": np.ones(n), "all0": np.zeros(n), "all0.6": np.full(n, 0.6), "all0.95": np.full(n, 0.95)}
    if n >= 2:
        d["half±1"] = np.r_[np.ones(k), -np.ones(n - k)]
        d["1x+1,rest0"] = np.r_[1.0, np.zeros(n - 1)]
        d["1x-1,rest0.9"] = np.r_[-1.0, np.full(n - 1, 0.9)]
    return d
print("mech eps n shape conf lam applied coverage sd half exact_at_true_q")
for mech, eps, n in itertools.product(["piecewise", "hybrid"], [0.7, 1, 2, 3, 4, 6], [1, 2, 3, 5, 8, 12, 20]):
    lam = n * MECH[mech](eps).far_share
    if lam > 16:
        continue
    for name, x in shapes(n).items():
        for conf in (0.9, 0.95):
            r = run(mech, eps, x, conf, reps, seed=abs(hash((mech, eps, n, name, conf))) % 2**32)
            vals, cnt = np.unique(x, return_counts=True)
            ex = exact_cov(mech, eps, {float(v): int(c) for v, c in zip(vals, cnt)}, conf)[1]
            flag = " <<<" if r["coverage"] < conf - 0.02 - 2 * r["sd"] else ""
            print(f"{mech} {eps} {n} {name} {conf} {lam:.3g} {r['applied']:.2f} {r['coverage']:.3f} {r['sd']:.3f} "
                  f"{r['half']:.4g} {ex:.3f}{flag}", flush=True)
