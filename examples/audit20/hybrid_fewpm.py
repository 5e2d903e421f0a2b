"""(1b/1c) Forced Hybrid at small n, moderate ε: q̂ comes from the PM reports only, so with n ≥ TINY users but only one
or two PM reports it is one or two reports' (the M3 mechanism, which TINY = 3 guards by users, not by PM reports).
Sim replica (sim.py: ldpql's own randomize/aggregate -> one_round -> rare.widen -> reporting._bounded). Coverage
overall and by the number of PM reports in the release (public: it is in the summary)."""
import sys, numpy as np
from collections import defaultdict
from sim import summaries, _estimate, shown, MECH
from ldpql.mechanisms import rare
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
def shapes(n):
    d = {"all+1": np.ones(n), "all0": np.zeros(n), "all0.95": np.full(n, 0.95)}
    if n >= 2:
        d["1x+1,rest0"] = np.r_[1.0, np.zeros(n - 1)]
        d["4:1 at 0.5/0.6"] = np.r_[np.full(n - 1, 0.5), 0.6]
    return d
print("mech eps beta n shape conf lam coverage(sd) | by PM-report count k: cov(share of runs) | mean half")
seed = 0
for eps in [float(a) for a in (sys.argv[2].split(",") if len(sys.argv) > 2 else "0.7,1,1.5,2,3".split(","))]:
    r = MECH["hybrid"](eps)
    for n in (3, 5, 8):
        lam = n * r.far_share
        if lam > rare.FEW:
            continue
        for name, x in shapes(n).items():
            for conf in (0.9, 0.95):
                seed += 1
                rng = np.random.default_rng(seed)
                truth = x.mean()
                by = defaultdict(lambda: [0, 0]); hs = []
                for summary, m in summaries(r, x, reps, rng):
                    est = rare.widen(_estimate(r, summary, m, None), conf)
                    v, lo, hi = shown(est, conf)
                    k = min(int(summary[2]), 3)
                    by[k][0] += lo <= truth <= hi; by[k][1] += 1; hs.append((hi - lo) / 2)
                cov = sum(a for a, _ in by.values()) / reps
                sd = (cov * (1 - cov) / reps) ** 0.5
                flag = " <<<" if cov < conf - 0.02 - 2 * sd else ""
                parts = " ".join(f"k{k}{'+' if k == 3 else ''}:{a/b:.3f}({b/reps:.2f})" for k, (a, b) in sorted(by.items()))
                print(f"hybrid {eps} {r.beta:.3f} {n} {name} {conf} {lam:.2f} {cov:.3f}({sd:.3f}) | {parts} | {np.mean(hs):.4f}{flag}", flush=True)
