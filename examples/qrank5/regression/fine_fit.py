"""quantile_calibration.py --fit's criterion on a finer grid of multiples (0.1% steps instead of the grid's 6%),
for the tree and the histogram. Usage: fine_fit.py PKL"""
import pickle
import sys

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
import quantile_grid as grid
from ldpql.planner import quantile as planner

saved = pickle.loads(open(sys.argv[1], "rb").read())
for mech, name in (("hierarchical", "A_HIER"), ("histogram", "A_HIST")):
    ran = getattr(planner, name)
    fitted = [(r["errors"], r["sigma"]) for k, r in saved["runs"].items()
              if k[4] == mech and k[0] not in grid.HELD_OUT and 0 < r["sigma"] < planner.USELESS]
    def cover(m, c):
        return np.mean([np.mean(e <= grid.Z[c] * m * s) for e, s in fitted])
    def miss(m):
        return sum((cover(m, c) - c) ** 2 for c in (0.95, 0.90))
    fine = np.geomspace(0.5, 2, 1387)
    m = float(min(fine, key=miss))
    coarse = float(min(grid.MULTS, key=miss))
    print(f"{name}: shipped {ran:.4f}; grid-step refit {ran * coarse:.4f} (x{coarse:.3f}); fine refit {ran * m:.4f} "
          f"(x{m:.3f}); over {len(fitted)} calibration cells at shipped: ±1.96σ {cover(1, .95):.3f}, ±1.645σ "
          f"{cover(1, .90):.3f}; at fine refit: {cover(m, .95):.3f}, {cover(m, .90):.3f}")
