"""(2) End to end: OPTIONS (split = 'users') with 2-4 aggregates, EVALUATE on the public API. k users at 100, the
rest at 0; small skewed populations; plus the lognormal-skew and uniform small populations of audit 19 M4."""
import sys, numpy as np
from sqlcheck import evaluate
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
which = sys.argv[2] if len(sys.argv) > 2 else "outliers"
rng = np.random.default_rng(5)
def agg_list(m):
    cols = ["x", "y", "z", "w"][:m]
    return ", ".join(f"LDP_MEAN({c})" for c in cols), {c: None for c in cols[1:]}
cases = []
if which == "outliers":
    for N, k, m, conf in [(1000, 3, 2, 0.9), (1000, 4, 2, 0.95), (1000, 1, 2, 0.9), (10000, 3, 2, 0.9), (1000, 6, 3, 0.9)]:
        cases.append((f"{k} at 100, rest 0", np.r_[np.full(k, 100.0), np.zeros(N - k)], m, conf, 16))
else:
    for N in (6, 10, 20, 50):
        cases.append(("uniform", rng.uniform(0, 100, N), 2, 0.9, 16))
        cases.append(("lognormal-ish skew", np.minimum(100, rng.lognormal(1.5, 1.2, N)), 2, 0.9, 16))
        cases.append(("lognormal-ish skew", np.minimum(100, rng.lognormal(1.5, 1.2, N)), 3, 0.9, 16))
for name, v, m, conf, eps in cases:
    aggs, extra = agg_list(m)
    q, out, mech, sel, el = evaluate(v, aggs, eps, conf, reps, extra_cols={c: v for c in extra},
                                     options="split = 'users', ")
    covs = " ".join(f"{c:.3f}" for c in out.coverage)
    print(f"N={len(v)} {name} aggs={m} eps={eps} conf={conf}: {mech[0].strip() if mech else '?'}: coverage {covs} "
          f"(sd {out.sd[0]:.3f}, {reps} reps) rmse {out.rmse[0]:.3g} [{el:.0f}s]", flush=True)
