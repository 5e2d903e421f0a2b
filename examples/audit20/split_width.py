"""(2) Users split on large benign populations: is the rule-of-three term over-wide? Mean half-width (0..100 axis) and
coverage, sim replica, share 1/2; run under the new tree and /tmp/a20_prev and compare. Includes concentrated data
(sd 1 around 50), where the plug-in spread is small and the new term (range-based) dominates."""
import sys, numpy as np
from sim import run
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
rng = np.random.default_rng(7)
print("mech eps N shape conf coverage sd half(0..100)")
seed = 900
for N in (1000, 10000, 100000):
    shapes = {"uniform": rng.uniform(-1, 1, N), "concentrated sd1": np.clip(rng.normal(0, 0.02, N), -1, 1),
              "all 50": np.zeros(N), "bimodal 0/100": np.r_[np.ones(N // 2), -np.ones(N - N // 2)]}
    for eps in (4.0, 16.0):
        for name, x in shapes.items():
            seed += 1
            r = run("piecewise", eps, x, 0.9, reps, seed=seed, share=0.5)
            print(f"piecewise {eps} {N} {name} 0.9 {r['coverage']:.3f} {r['sd']:.3f} {50*r['half']:.5g}", flush=True)
