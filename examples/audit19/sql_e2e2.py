"""E2E: GROUP BY with tiny groups (q̂ from 1-8 reports), planner's own mechanism choice."""
import sys, numpy as np
from sqlcheck import evaluate
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
sizes = [1, 2, 3, 5, 8]
for value in (100.0, 97.5, 0.0):
    vals, groups = [], []
    for s in sizes:
        vals += [value] * s
        groups += [f"n{s}"] * s
    for eps, conf in ((2, 0.9), (3, 0.95), (4, 0.9)):
        q, out, mech, sel, el = evaluate(vals, "LDP_MEAN(x)", eps, conf, reps, group=np.array(groups))
        print(q, "| all users at", value, "|", mech, f"[{el:.0f}s]")
        for _, r in out.iterrows():
            print(f"   group {r.group}: coverage {r.coverage:.3f} (sd {r.sd:.3f}, {reps} reps) rmse {r.rmse:.3g}", flush=True)
