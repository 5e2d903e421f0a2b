"""Mean rank error of the forced one-round releases on one_round_share.py's cells (its shapes, seeds [31, t]),
for the installed/PYTHONPATH ldpql. Usage: share_error.py ROOT OUTCSV [reps]"""
import csv
import sys
from pathlib import Path

import numpy as np

root = Path(sys.argv[1])
sys.path.insert(0, str(root / "examples" / "qrank2"))
import one_round_share as s
import ldpql
from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate
assert Path(ldpql.__file__).resolve().is_relative_to(root.resolve())

reps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
rows = []
for n in s.NS:
    for shape, (coins, x) in s.shapes(n).items():
        hist = np.bincount(x, minlength=coins)
        cdf = np.cumsum(hist) / hist.sum()
        for tau in s.TAUS:
            target = planner.QuantileTarget("x", Encoding("x", coins, "x"), "", None, planner.UNIT, tau=tau,
                                            space=CoinSpace(coins), taus=(tau,))
            cands = {c.mechanism: c for c in planner.quantile_candidates(target)}
            for eps in s.EPSILONS:
                for mech in ("hierarchical", "histogram"):
                    c = cands[mech]
                    err = []
                    for t in range(reps):
                        a = simulate(c.protocol(eps)(int(hist.sum())), np.random.default_rng([31, t]),
                                     hist=hist).extra["answers"][tau]
                        v = int(a.extra["coin"])
                        err.append(max(0.0, (cdf[v - 1] if v > 0 else 0.0) - tau, tau - cdf[v]))
                    rows.append({"shape": shape, "n": n, "eps": eps, "tau": tau, "mechanism": mech,
                                 "mean_error": float(np.mean(err))})
with open(sys.argv[2], "w", newline="") as fh:
    w = csv.DictWriter(fh, list(rows[0]))
    w.writeheader()
    w.writerows(rows)
