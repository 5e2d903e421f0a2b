"""The cells of examples/audit9b/topk_grid.py whose intervals the skewness correction can change (independent
estimates, BRR and OUE, at ε >= 4; below, a bin's skewness is under winners.SKEW_FLOOR at these n), rerun on the
same seeds as the grid (so on the same releases): coverage and width before (topk_grid.csv, normal model) and
after (Pearson type III with the release's skewness).

    nice python examples/tails2/topk_recheck.py [reps]   -> examples/tails2/topk_recheck.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from ldpql.planner.histogram import ORACLES

sys.path.insert(0, str(Path(__file__).parents[1] / "audit9b"))
from topk_grid import CONF, EPS, NS, PROFILES, K, cell, flags  # the grid's own cells and seeds

BEFORE = Path(__file__).parents[1] / "audit9b" / "topk_grid.csv"


def main(reps: int = 300) -> None:
    with open(BEFORE) as fh:
        before = {(r["profile"], int(r["n"]), float(r["epsilon"]), r["oracle"]): r for r in csv.DictReader(fh)}
    rows = []
    for profile in PROFILES:
        for n in NS:
            for eps in (e for e in EPS if e >= 4):
                for oracle in ("oue", "brr"):
                    seed = [list(PROFILES).index(profile), n, int(eps * 10), [o.name for o in ORACLES].index(oracle)]
                    row = cell(profile, n, eps, oracle, reps, seed)
                    old = before[(profile, n, eps, oracle)]
                    out = {"profile": profile, "n": n, "epsilon": eps, "oracle": oracle, "reps": reps,
                           "se_over_step": row["se_over_step"]}
                    for c in CONF:
                        tag = int(c * 100)
                        covs = [row[f"cov{tag}_r{j + 1}"] for j in range(K)]
                        olds = [float(old[f"cov{tag}_r{j + 1}"]) for j in range(K)]
                        out |= {f"min{tag}_before": min(olds), f"min{tag}_after": min(covs),
                                f"mean{tag}_before": round(sum(olds) / K, 3), f"mean{tag}_after": round(sum(covs) / K, 3),
                                f"wide{tag}_before": float(old[f"wide{tag}"]), f"wide{tag}_after": row[f"wide{tag}"]}
                    out["flags_after"] = " ".join(flags(row))
                    rows.append(out)
                    print(out, flush=True)
    with open(Path(__file__).with_name("topk_recheck.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
