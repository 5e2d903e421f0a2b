"""E2E where the claim was designed (n = 30-1,000, ε = 8-16): the planner's PM, 2,000 runs each."""
import numpy as np
from sqlcheck import evaluate
rng = np.random.default_rng(8)
for n, eps in ((1000, 16), (300, 12), (100, 10), (30, 8)):
    shapes = {"uniform": rng.uniform(0, 100, n), "bimodal 60%@25 40%@75": np.r_[np.full(int(.6 * n), 25.0), np.full(n - int(.6 * n), 75.0)],
              "half at 0, half at 100": np.r_[np.zeros(n // 2), np.full(n - n // 2, 100.0)],
              "integers 0..100": rng.integers(0, 101, n).astype(float), "all at 99": np.full(n, 99.0)}
    for name, v in shapes.items():
        covs = []
        for conf in (0.9, 0.95):
            q, out, mech, sel, el = evaluate(v, "LDP_MEAN(x)", eps, conf, 2000)
            covs.append(f"{conf}: {out.coverage[0]:.3f}±{out.sd[0]:.3f}")
        print(f"n={n} eps={eps} {name} ({mech[0].split('*')[1].split(':')[0].strip()}): " + "; ".join(covs), flush=True)
