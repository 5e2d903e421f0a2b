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
        vals = [math.exp(summary[(*k[:4], o)][metric]) for o in others if metric in summary.get((*k[:4], o), {})]
        if not vals:
            continue
        best = min(vals)
        out[(k[0], k[1])].append(1 - math.exp(v[metric]) / best)
    return {key: (float(np.mean(v)), float(np.min(v)), float(np.max(v)), len(v)) for key, v in out.items()}


def scaling(summary: dict, metric: str, a: tuple[int, int], b: tuple[int, int], mechs=FREQ) -> dict:
    """Mean over s and ε >= 0.1 of metric(setting b)/metric(setting a), per mechanism (geometric means)."""
    out = {}
    for mech in mechs:
        r = [math.exp(summary[(*b, *k[2:4], mech)][metric] - v[metric]) for k, v in summary.items()
             if k[:2] == a and k[4] == mech and k[3] >= 0.1 and (*b, *k[2:4], mech) in summary and metric in v]
        if r:
            out[mech] = float(np.mean(r))
    return out


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
    for metric in ("ln_freq_tve", "ln_freq_tve_pp", "ln_mean_tve"):
        print(f"\nCollision vs each baseline, {metric}: mean reduction over cells with ε >= 0.1")
        for other in (*base, "succinct", "succinct_lap"):
            red = reduction(summary, metric, "collision", (other,))
            if red:
                print(f"  {other}: " + ", ".join(f"n={k[0]:,} d={k[1]}: {v[0]:+.1%}" for k, v in sorted(red.items())))
    for metric in ("ln_freq_tve", "ln_freq_mae", "ln_mean_tve", "ln_mean_mae"):
        for a, b in (((100_000, 256), (100_000, 512)), ((100_000, 256), (10_000, 256))):
            sc = scaling(summary, metric, a, b, MEAN)
            if sc:
                print(f"\n{metric} {b} / {a}: " + ", ".join(f"{k} {v:.2f}" for k, v in sc.items()))


if __name__ == "__main__":
    main()
