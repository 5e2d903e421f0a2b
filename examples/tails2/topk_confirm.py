"""The audit's confirmation step (examples/audit9b/topk_grid.py: 1,200 fresh releases, seed + [1]) for its cells
between one and three standard errors per lattice step, with the fix: the per-rank minimum at 95% and 90%.

    nice python examples/tails2/topk_confirm.py   -> printed rows
"""

from __future__ import annotations

import sys
from pathlib import Path

from ldpql.planner.histogram import ORACLES

sys.path.insert(0, str(Path(__file__).parents[1] / "audit9b"))
from topk_grid import PROFILES, K, cell

CELLS = [("ties", 1000, 10.0, "brr"), ("ties", 1000, 12.0, "brr"), ("near", 1000, 10.0, "brr"),
         ("near", 1000, 12.0, "brr"), ("gaps", 1000, 10.0, "brr"), ("gaps", 1000, 12.0, "brr")]

if __name__ == "__main__":
    for profile, n, eps, oracle in CELLS:
        seed = [list(PROFILES).index(profile), n, int(eps * 10), [o.name for o in ORACLES].index(oracle), 1]
        row = cell(profile, n, eps, oracle, 1200, seed)
        print(profile, n, eps, oracle, row["se_over_step"],
              *(min(row[f"cov{t}_r{j + 1}"] for j in range(K)) for t in (95, 90)),
              *(round(sum(row[f"cov{t}_r{j + 1}"] for j in range(K)) / K, 3) for t in (95, 90)), flush=True)
