"""(1b) Confirm duchi_exact.py's worst cells through the shown interval (sim replica, 4,000 runs; and end to end with
EVALUATE, forced hybrid): Hybrid at ε ≤ 0.61 is all-Duchi, λ = n ≤ 16, the q-free half-width applies. Run under both
trees (the previous one showed est ± z·se + step/2 here)."""
import sys, numpy as np
from sim import run
from sqlcheck import evaluate
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
cases = [(0.5, [30.0] + [65.0] * 15), (0.3, [70.0] * 15 + [85.0]), (0.5, [50.0] * 16), (0.61, [35.0] + [40.0] * 2),
         (0.7, [75.0] * 4 + [80.0]), (0.7, [35.0] * 7 + [50.0])]
for eps, v in cases:
    x = np.asarray(v) / 50 - 1
    r = run("hybrid", eps, x, 0.9, reps, seed=77)
    q, out, mech, sel, el = evaluate(v, "LDP_MEAN(x, mechanism => 'hybrid')", eps, 0.9, 2000)
    print(f"hybrid eps={eps} n={len(v)} data={sorted(set(v))}x{[v.count(a) for a in sorted(set(v))]}: sim cov {r['coverage']:.3f} "
          f"(sd {r['sd']:.3f}) half {50*r['half']:.3g} | EVALUATE 2000: cov {out.coverage[0]:.3f} (sd {out.sd[0]:.3f})", flush=True)
