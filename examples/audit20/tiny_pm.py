"""(1b) PM (the planner's choice) at n = 1..5 across ε = 0.5..20: sim replica, coverage and mean half-width on the
scaled axis (x in [-1, 1]); run under the new tree and /tmp/a20_prev to compare. Shapes include adversarial ones
(one user at +1 and the rest at −1 / 0.9: the far report from the +1 user lowers q̂)."""
import sys, numpy as np
from sim import run, MECH
from ldpql.mechanisms import rare
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
mechs = sys.argv[2].split(",") if len(sys.argv) > 2 else ["piecewise"]
def shapes(n):
    d = {"all+1": np.ones(n), "all0": np.zeros(n), "all0.9": np.full(n, 0.9), "all-0.37": np.full(n, -0.37)}
    if n >= 2:
        d["1x+1,rest-1"] = np.r_[1.0, -np.ones(n - 1)]
        d["1x+1,rest0"] = np.r_[1.0, np.zeros(n - 1)]
        d["1x-1,rest0.9"] = np.r_[-1.0, np.full(n - 1, 0.9)]
    return d
print("mech eps n shape conf lam applied coverage sd half")
seed = 100
for mech in mechs:
    for eps in (1.0, 2.0, 3.0, 4.0, 8.0, 16.0):
        for n in (3, 4):   # n = 1, 2: exact_tiny.py (q-free, exact)
            lam = n * MECH[mech](eps).far_share
            if lam > rare.FEW:
                continue
            for name, x in shapes(n).items():
                for conf in (0.9, 0.95):
                    seed += 1
                    r = run(mech, eps, x, conf, reps, seed=seed)
                    flag = " <<<" if r["coverage"] < conf - 0.02 - 2 * r["sd"] else ""
                    print(f"{mech} {eps} {n} {name} {conf} {lam:.3g} {r['applied']:.2f} {r['coverage']:.3f} {r['sd']:.3f} "
                          f"{r['half']:.4g}{flag}", flush=True)
