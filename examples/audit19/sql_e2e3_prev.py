"""sql_e2e3's worst cases on the parent commit (PYTHONPATH=/tmp/a19_prev) and at ε = 4 (λ > 16: no widening)."""
import sys, numpy as np, ldpql
from sqlcheck import evaluate
print("ldpql from", ldpql.__file__)
reps = 1000
rng = np.random.default_rng(5)
for N, name, v, eps in [(1000, "1 at 100, rest 0", np.r_[100.0, np.zeros(999)], 16),
                        (1000, "1 at 100, rest 0", np.r_[100.0, np.zeros(999)], 4),
                        (10, "uniform", rng.uniform(0, 100, 10), 16), (20, "uniform", rng.uniform(0, 100, 20), 16)]:
    q, out, mech, sel, el = evaluate(v, "LDP_MEAN(x), LDP_MEAN(y)", eps, 0.9, reps, extra_cols={"y": v},
                                     not_null=True, options="split = 'users', ")
    print(f"N={N} {name} eps={eps}: {mech[0].strip()}: coverage x {out.coverage[0]:.3f} y {out.coverage[1]:.3f} "
          f"(sd {out.sd[0]:.3f}, {reps} reps) [{el:.0f}s]", flush=True)
