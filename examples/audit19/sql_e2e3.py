"""E2E: two aggregates in one statement with OPTIONS (split = 'users'): each aggregate reaches about half the users,
and the interval adds the sampling term in quadrature with rare.halfwidth."""
import sys, numpy as np
from sqlcheck import evaluate
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
rng = np.random.default_rng(5)
for N in (6, 10, 20, 50, 200, 1000):
    shapes = {"uniform": rng.uniform(0, 100, N), "1 at 100, rest 0": np.r_[100.0, np.zeros(N - 1)],
              "lognormal-ish skew": np.minimum(100, rng.lognormal(1.5, 1.2, N)),
              "half 0 half 100": np.r_[np.zeros(N // 2), np.full(N - N // 2, 100.0)]}
    for name, v in shapes.items():
        for eps in (16,):
            q, out, mech, sel, el = evaluate(v, "LDP_MEAN(x), LDP_MEAN(y)", eps, 0.9, reps, extra_cols={"y": v},
                                             not_null=True, options="split = 'users', ")
            r = out.iloc[0]
            print(f"N={N} {name} eps={eps}: {mech[0].strip()}: coverage x {out.coverage[0]:.3f} y {out.coverage[1]:.3f} "
                  f"(sd {out.sd[0]:.3f}, {reps} reps) rmse {r.rmse:.3g} [{el:.0f}s]", flush=True)
