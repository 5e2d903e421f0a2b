"""E2E, realistic: an integer score 0..100, GROUP BY a public column with many small groups (1, 2, 3, 5, 10 users,
random integer values per group), planner's own choice (PM), ε = 16 and 20, 90% and 95%, REPEAT 400.
Per group size: mean coverage over its groups, the least, and the share of groups short by more than 2 points
(and more than 3 binomial sd)."""
import math, numpy as np
from sqlcheck import evaluate
rng = np.random.default_rng(19)
sizes = np.tile([1, 2, 3, 5, 10], 60)
g = np.repeat(np.arange(len(sizes)), sizes)
v = rng.integers(0, 101, len(g)).astype(float)
reps = 400
for eps, conf in ((16, 0.9), (20, 0.9), (20, 0.95)):
    q, out, mech, sel, el = evaluate(v, "LDP_MEAN(x)", eps, conf, reps, group=g)
    out["size"] = sizes[out["group"].astype(int).values]
    print(f"{q} | {mech[0].strip()} | {len(sizes)} groups [{el:.0f}s]")
    thr = conf - 0.02 - 3 * math.sqrt(conf * (1 - conf) / reps)
    for s, d in out.groupby("size"):
        print(f"   size {s:2d}: {len(d)} groups, mean coverage {d.coverage.mean():.3f} (sd of mean {math.sqrt(conf*(1-conf)/reps/len(d)):.3f}), "
              f"least {d.coverage.min():.3f}, share below {thr:.3f}: {(d.coverage < thr).mean():.2f}", flush=True)
