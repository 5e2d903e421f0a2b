"""(2) Users split, rule-of-three term: k users at the top (100), the rest at 0, each aggregate asked of a random share
(1/2, 1/3, 1/4: 2-4 aggregates). Sim replica (Bernoulli share per user, as the salted slice). The new term is
(1−f)·(3/n)·range/1.96 in quadrature: when the sample misses all k (prob ≈ (1−f)^k) the error is k/N·range and the
half-width ≈ z·(1−f)·3/(fN)·range/1.96, so k just above (z/1.96)·3(1−f)/f·... outliers fall outside. Run under the new
tree and /tmp/a20_prev."""
import sys, numpy as np
from sim import run
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
eps = float(sys.argv[2]) if len(sys.argv) > 2 else 16.0
print("N share k conf coverage sd half(0..100) P(miss all k)")
seed = 500
for N in (100, 1000, 10000):
    for share in ((0.5, 1 / 3, 0.25) if N < 10000 else (0.5,)):
        for k in ((1, 2, 3, 4, 5, 6, 8) if N < 10000 else (1, 3, 4)):
            x = np.r_[np.ones(k), -np.ones(N - k)]
            for conf in (0.9, 0.95):
                seed += 1
                r = run("piecewise", eps, x, conf, reps, seed=seed, share=share)
                flag = " <<<" if r["coverage"] < conf - 0.02 - 2 * r["sd"] else ""
                print(f"{N} {share:.3f} {k} {conf} {r['coverage']:.3f} {r['sd']:.3f} {50*r['half']:.4g} {(1-share)**k:.3f}{flag}", flush=True)
