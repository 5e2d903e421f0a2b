"""(1b) n = 3 / 4 (just above TINY) with one user at 100 and the rest at 0: the tiny_pm.py sim's worst cells, end to
end (EVALUATE, PM chosen by the planner, 3,000 runs). Run under both trees."""
import sys
from sqlcheck import evaluate
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
for eps, v, conf in [(3, [100.0, 0.0, 0.0], 0.9), (2, [100.0, 0.0, 0.0, 0.0], 0.9)]:
    q, out, mech, sel, el = evaluate(v, "LDP_MEAN(x)", eps, conf, reps)
    print(f"eps={eps} n={len(v)} data={v} conf={conf}: {mech[0].strip() if mech else '?'}: coverage {out.coverage[0]:.3f} (sd {out.sd[0]:.3f}) [{el:.0f}s]", flush=True)
