"""Coverage of ±z·σ at the shipped factors on a quantile_grid.py --raw pickle, per mechanism, grouped as
quantile_calibration.py --fit groups them (calibration shapes without / with atoms, held out).
Usage: calib_check.py PKL"""
import pickle
import sys

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
import quantile_grid as grid
from ldpql.planner import quantile as planner

saved = pickle.loads(open(sys.argv[1], "rb").read())
print("factors in pickle:", saved["factors"])
for mech in ("hierarchical", "histogram", "bayess", "naive_nbs"):
    cells = [(k, r["errors"], r["sigma"]) for k, r in saved["runs"].items()
             if k[4] == mech and 0 < r["sigma"] < planner.USELESS]
    groups = {"calibration (all)": [c for c in cells if c[0][0] not in grid.HELD_OUT],
              "  no atoms": [c for c in cells if c[0][0] not in grid.HELD_OUT and np.mean(c[1] == 0) < 0.1],
              "  atoms": [c for c in cells if c[0][0] not in grid.HELD_OUT and np.mean(c[1] == 0) >= 0.1],
              "held out": [c for c in cells if c[0][0] in grid.HELD_OUT]}
    for label, g in groups.items():
        if not g:
            continue
        c95 = np.array([np.mean(e <= grid.Z[0.95] * s) for _, e, s in g])
        c90 = np.array([np.mean(e <= grid.Z[0.90] * s) for _, e, s in g])
        print(f"{mech:12s} {label:18s} {len(g):3d} cells, reps {len(g[0][1])}: ±1.96σ mean {c95.mean():.3f} "
              f"(within 2 pt {np.sum(abs(c95 - .95) <= .02)}, under .93 {np.sum(c95 < .93)}); ±1.645σ mean {c90.mean():.3f} "
              f"(within 2 pt {np.sum(abs(c90 - .90) <= .02)}, under .88 {np.sum(c90 < .88)})")
