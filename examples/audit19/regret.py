"""Regret of the planner's PM choice where RARE_REPORTS used to avoid it: RMSE of the shown mean (clipped to the
domain), 4,000 runs each, PM vs forced Hybrid and Square Wave; and the closed-form sd (unclipped)."""
import numpy as np
from sim import run, MECH
rng = np.random.default_rng(2)
def shapes(n):
    return {"uniform": rng.uniform(-1, 1, n), "all0": np.zeros(n), "all+1": np.ones(n),
            "half±1": np.r_[np.ones(n // 2), -np.ones(n - n // 2)], "bimodal±0.5": np.r_[np.full(600 * n // 1000, -0.5), np.full(n - 600 * n // 1000, 0.5)],
            "skew(beta .5,4)": 1 - 2 * rng.beta(0.5, 4, n)}
print("n eps shape | RMSE×n (scaled axis): piecewise hybrid square_wave | closed-form sd×n: pm hm sw | half-width×n pm hm")
for n, eps in ((1000, 16), (1000, 12), (100, 20), (10000, 16)):
    for name, x in shapes(n).items():
        res = {m: run(m, eps, x, 0.9, 4000 if n <= 1000 else 1000, seed=9) for m in ("piecewise", "hybrid", "square_wave")}
        q = float(np.mean(x ** 2))
        cf = {m: float(np.sqrt(MECH[m](eps).variance(np.zeros(1), n, second_moment=q)[0])) for m in res}
        print(f"{n} {eps} {name} | " + " ".join(f"{res[m]['rmse']*n:.3f}" for m in res) + " | " +
              " ".join(f"{cf[m]*n:.3f}" for m in cf) + " | " + " ".join(f"{res[m]['half']*n:.3f}" for m in ("piecewise", "hybrid")), flush=True)
