"""Hybrid at tiny n: coverage split by whether rare.widen applied (no PM report -> q̂ None -> est ± z·se fallback)."""
import numpy as np
from sim import MECH, summaries, _estimate, shown
from ldpql.mechanisms import rare
for eps, n, x, conf in [(2, 1, 1.0, 0.9), (2, 1, 0.95, 0.95), (0.7, 2, None, 0.9), (2, 2, None, 0.9), (1, 3, 0.0, 0.9)]:
    r = MECH["hybrid"](eps)
    xs = np.r_[1.0, np.zeros(n - 1)] if x is None else np.full(n, x)
    truth = xs.mean()
    rng = np.random.default_rng(3)
    res = {True: [0, 0], False: [0, 0]}
    for s, m in summaries(r, xs, 20000, rng):
        est = _estimate(r, s, m, None)
        w = rare.widen(est, conf)
        v, lo, hi = shown(w, conf)
        res[w is not est][0] += 1
        res[w is not est][1] += lo <= truth <= hi
    print(f"hybrid eps={eps} n={n} data={xs.tolist()} conf={conf}: widened {res[True][0]} runs cov "
          f"{res[True][1]/max(res[True][0],1):.3f}; fallback (no PM report) {res[False][0]} runs cov "
          f"{res[False][1]/max(res[False][0],1):.3f}")
