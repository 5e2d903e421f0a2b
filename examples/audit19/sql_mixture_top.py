"""E2E: 10 users at 100 and 90 at 90 (scaled: 10% at +1, 90% at 0.8), n = 100, ε = 14, 90%, 2,000 runs; forced Hybrid
and the planner's PM; run under PYTHONPATH=/tmp/a19 (63b8cce) and /tmp/a19_head (HEAD)."""
import numpy as np, ldpql
from sqlcheck import evaluate
v = np.r_[np.full(10, 100.0), np.full(90, 90.0)]
for agg, eps, conf in (("LDP_MEAN(x, mechanism => 'hybrid')", 14, 0.9), ("LDP_MEAN(x)", 14, 0.9),
                       ("LDP_MEAN(x, mechanism => 'hybrid')", 16, 0.95)):
    q, out, mech, sel, el = evaluate(v, agg, eps, conf, 2000)
    print(f"{ldpql.__file__.split('/')[2]}: {q}: coverage {out.coverage[0]:.3f} (sd {out.sd[0]:.3f}, 2000 runs) "
          f"SELECT {[l.strip() for l in sel.splitlines() if '±' in l]}", flush=True)
