"""Tables for examples/vector_results/REPORT.md from the grid's summary.csv (see examples/vector_grid.py): the
empirical-over-closed-form MSE ratios at n = 10^5, and the error reductions the paper reports (§7.3 trends).

    python examples/vector_report.py
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "vector_results"
FREQ = ("collision", "coco", "pckv_ue", "privkv", "pckv_grr", "pckv_agrr")
MEAN = (*FREQ, "succinct", "succinct_lap")


def load() -> dict:
    rows = list(csv.DictReader(open(OUT / "summary.csv")))
    return {(int(r["n"]), int(r["d"]), int(r["s"]), float(r["epsilon"]), r["mechanism"]):
            {k: float(v) for k, v in r.items() if v and k not in ("n", "d", "s", "epsilon", "mechanism")}
            for r in rows}


def ratio_table(summary: dict) -> list[str]:
    lines = ["| mechanism | target | cells | mean ratio | min | max | within 10% |", "|---|---|---|---|---|---|---|"]
    for mech in MEAN:
        for target in ("item_sq_ratio", "mean_sq_ratio"):
            vals = [v[target] for k, v in summary.items() if k[0] == 100_000 and k[4] == mech and target in v]
            if vals:
                inside = sum(abs(x - 1) <= 0.1 for x in vals)
                lines.append(f"| {mech} | {target.split('_')[0]} | {len(vals)} | {np.mean(vals):.3f} | {min(vals):.3f} "
                             f"| {max(vals):.3f} | {inside}/{len(vals)} |")
    return lines


def reduction(summary: dict, metric: str, mine: str, others: tuple[str, ...], eps_min: float = 0.1) -> dict:
    """Mean over cells (ε >= eps_min) of 1 − metric(mine)/min over others (geometric-mean metrics)."""
    out = defaultdict(list)
    for k, v in summary.items():
        if k[4] != mine or k[3] < eps_min or metric not in v:
            continue
        best = min(math.exp(summary[(*k[:4], o)][metric]) for o in others if metric in summary.get((*k[:4], o), {}))
        out[(k[0], k[1])].append(1 - math.exp(v[metric]) / best)
    return {key: (float(np.mean(v)), float(np.min(v)), float(np.max(v)), len(v)) for key, v in out.items()}


def main() -> None:
    summary = load()
    print("\n".join(ratio_table(summary)))
    base = ("pckv_ue", "privkv", "pckv_grr", "pckv_agrr")
    for title, metric, mine, others in [
        ("Collision vs best baseline, frequency TVE (post-processed)", "ln_freq_tve_pp", "collision", base),
        ("Collision vs best baseline, frequency MAE (post-processed)", "ln_freq_mae_pp", "collision", base),
        ("Collision vs best baseline, frequency TVE (raw)", "ln_freq_tve", "collision", base),
        ("Collision vs best baseline incl. SUCCINCT (Laplace), mean TVE (raw)", "ln_mean_tve", "collision",
         (*base, "succinct_lap")),
        ("Collision vs best baseline incl. SUCCINCT (RR), mean TVE (raw)", "ln_mean_tve", "collision",
         (*base, "succinct")),
        ("CoCo vs Collision, mean TVE (raw)", "ln_mean_tve", "coco", ("collision",)),
        ("CoCo vs Collision, mean TVE (post-processed)", "ln_mean_tve_pp", "coco", ("collision",)),
        ("CoCo vs Collision, mean MAE (raw)", "ln_mean_mae", "coco", ("collision",)),
    ]:
        print(f"\n{title}: mean reduction [min, max] over cells with ε >= 0.1")
        for key, (m, lo, hi, cnt) in sorted(reduction(summary, metric, mine, others).items()):
            print(f"  n={key[0]:,} d={key[1]}: {m:+.1%} [{lo:+.1%}, {hi:+.1%}] ({cnt} cells)")


if __name__ == "__main__":
    main()
