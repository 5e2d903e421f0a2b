"""The shown rank error's coverage on one_round_share.py's cells (its seeds, 100 runs) at several SLACK values
(planner.SLACK patched; DISCRETE as shipped). Usage: slack_sweep.py ROOT OUTCSV [reps]"""
import csv
import sys
from pathlib import Path

import numpy as np

root = Path(sys.argv[1])
sys.path.insert(0, str(root / "examples" / "qrank2"))
import one_round_share as s
import ldpql
from ldpql.planner import quantile as planner
assert Path(ldpql.__file__).resolve().is_relative_to(root.resolve())
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
out = []
for slack in (1.0, 1.25, 1.5, 2.0):
    planner.SLACK = slack
    rows = []
    for n in s.NS:
        for shape, (coins, x) in s.shapes(n).items():
            for tau in s.TAUS:
                for eps in s.EPSILONS:
                    for mech in ("hierarchical", "histogram"):
                        r = s.cell(mech, x, coins, tau, eps, reps)
                        rows.append({"slack": slack, "shape": shape, "n": n, "eps": eps, "tau": tau, "mechanism": mech,
                                     **{k: r[k] for k in ("shown_cov95", "shown_w95", "shown_cov90", "shown_w90")}})
    c95 = np.array([r["shown_cov95"] for r in rows]); c90 = np.array([r["shown_cov90"] for r in rows])
    w = np.array([r["shown_w95"] for r in rows])
    print(f"SLACK {slack}: under .93 {np.sum(c95 < .93)} (min {c95.min():.2f}), under .88 {np.sum(c90 < .88)} "
          f"(min {c90.min():.2f}), median width/zσ {np.median(w):.2f}, mean {w.mean():.2f}", flush=True)
    out += rows
with open(sys.argv[2], "w", newline="") as fh:
    w = csv.DictWriter(fh, list(out[0]))
    w.writeheader()
    w.writerows(out)
