"""Search 1: small n x ε x adversarial shapes, PM and Hybrid, 90% and 95%, through the sim replica (q̂ noisy)."""
import sys, itertools, numpy as np
from sim import run, MECH

def shapes(n, rng):
    k = max(1, n // 10)
    return {
        "all+1": np.ones(n), "all-1": -np.ones(n), "half±1": np.r_[np.ones(n // 2), -np.ones(n - n // 2)],
        "all0": np.zeros(n), "all0.98": np.full(n, 0.98), "10%+1,90%-1": np.r_[np.ones(k), -np.ones(n - k)],
        "10%+1,90%0": np.r_[np.ones(k), np.zeros(n - k)], "unif": rng.uniform(-1, 1, n),
        "1user+1,rest-0.3": np.r_[1.0, np.full(n - 1, -0.3)],
    }

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
rng = np.random.default_rng(7)
print("mech eps n shape conf lam applied coverage sd half")
for mech, eps, n in itertools.product(["piecewise", "hybrid"], [1, 2, 4, 8, 12, 16, 20, 30], [2, 5, 10, 30, 100]):
    lam = n * MECH[mech](eps).far_share
    if lam > 16:
        continue
    for name, x in shapes(n, rng).items():
        for conf in (0.9, 0.95):
            r = run(mech, eps, x, conf, reps, seed=hash((mech, eps, n, name)) % 2**32)
            flag = " <<<" if r["coverage"] < conf - 0.02 - 2 * r["sd"] else ""
            print(f"{mech} {eps} {n} {name} {conf} {lam:.3g} {r['applied']:.2f} {r['coverage']:.3f} {r['sd']:.3f} {r['half']:.4g}{flag}", flush=True)
