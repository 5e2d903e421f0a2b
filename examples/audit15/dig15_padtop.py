"""Audit 15: padding tau > 1/2 with virtual users at the top coin K-1: the released F̂ at coin K-1 after _unpadded
(F̂'·(n+k)/n) against F(K-1) = 1; pmass n = 20,000 eps 1 tau 0.9, seeds [1516, t], 50 runs."""
import numpy as np
from ldpql.simulation import simulate
from common15 import candidates
from padding15 import pshapes

sh = pshapes(20000)["pmass"]
c = candidates(sh, 0.9, 0.95, "padding")["bayess"]
top, rest, asked = [], [], 0
for t in range(50):
    a = simulate(c.protocol(1.0)(20000), np.random.default_rng([1516, t]), hist=sh.hist, exact_positions=False).extra["answers"][0.9]
    for q in a.extra["questions"]:
        z = (q.estimate - sh.cdf[q.coin]) / np.sqrt(q.variance)
        (top if q.coin == sh.size - 1 else rest).append((z, q.estimate))
print("questions at coin K-1:", len(top), "mean z", np.mean([z for z, _ in top]) if top else None,
      "mean F̂", np.mean([f for _, f in top]) if top else None, "| other coins: mean z", round(float(np.mean([z for z, _ in rest])), 3))
