"""Several LDP_AVG columns: one CoCo/Collision report per user against splitting users or ε (measured vs predicted).

For d ∈ {2, 4, 8, 16} columns and ε ∈ {0.5, 1, 4}: the statement ``SELECT LDP_AVG(x1), ..., LDP_AVG(xd)`` run
four ways through the engine (OPTIONS mechanism = 'coco': one joint report; split = 'users'; split = 'epsilon';
the joint report shuffled, central (ε, 10^-6) with users at CoCo's own ε₀),
REPEAT runs each, the summed MSE over the d columns (on the [-1, 1] scale of each column) measured and as
predicted (the planner's worst case), and what the planner chooses on its own. Writes a CSV and a Markdown table.

    nice python examples/joint_means.py [--n 20000] [--reps 40] [--out examples/joint_means_results]
"""

from __future__ import annotations

import argparse
import csv
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql

WAYS = {"joint": "OPTIONS (mechanism = 'coco')", "users": "OPTIONS (split = 'users')",
        "epsilon": "OPTIONS (split = 'epsilon')", "shuffled": "DELTA 1e-6 OPTIONS (mechanism = 'coco', model = 'shuffle')"}


def table(n: int, d: int, seed: int) -> pa.Table:
    """d columns on [0, 10], uniform (E[x'²] = 1/3) with means spread over the domain."""
    rng = np.random.default_rng(seed)
    return pa.table({f"x{j}": np.clip(rng.uniform(0, 10, n) * (0.4 + 0.6 * j / max(d - 1, 1)), 0, 10)
                     for j in range(d)})


def predicted(con, sql: str, d: int, n: int) -> float:
    """Σ_j predicted variance on the [-1, 1] scale, read off EXPLAIN's ±z·se (95%) per column (half = 5)."""
    text = str(con.sql("EXPLAIN " + sql))
    per = re.search(r"per column  predicted \(95%, worst case\): (.*)", text)
    if per:
        ses = [float(v) / 1.959964 for v in re.findall(r"±([0-9.e+-]+)", per.group(1))]
    else:
        ses = [float(v) / 1.959964 for v in re.findall(r"predicted   ±([0-9.e+-]+) \(95%\)", text)]
    return sum((s / 5) ** 2 for s in ses)


def measured(con, sql: str, reps: int) -> float:
    res = con.sql(f"EVALUATE {sql} REPEAT {reps}")
    return sum((row[6] / 5) ** 2 for row in res.fetchall())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--out", default="examples/joint_means_results")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for d in (2, 4, 8, 16):
        con = ldpql.connect(seed=17, evaluation=True)
        con.register("t", table(args.n, d, d), private={f"x{j}": (0, 10) for j in range(d)}, budget=1e9, delta=1.0 - 1e-9)
        base = "SELECT " + ", ".join(f"LDP_AVG(x{j})" for j in range(d)) + " FROM t EPSILON {eps}"
        for eps in (0.5, 1.0, 4.0):
            row = {"d": d, "epsilon": eps}
            for way, opts in WAYS.items():
                sql = base.format(eps=eps) + " " + opts
                row[f"pred_{way}"], row[f"meas_{way}"] = predicted(con, sql, d, args.n), measured(con, sql, args.reps)
            for key, extra in (("planner", ""), ("planner_shuffle", " DELTA 1e-6 OPTIONS (model = 'auto')")):
                chosen = str(con.sql("EXPLAIN " + base.format(eps=eps) + extra))
                row[key] = ("joint shuffled" if "* coco: shuffle" in chosen or "* collision: shuffle" in chosen else
                            "joint" if "* coco" in chosen or "* collision" in chosen else
                            "users" if "split       users" in chosen else "epsilon")
            rows.append(row)
            print(row, flush=True)
    with open(out / "joint_means.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [(f"n = {args.n:,}, {args.reps} runs per cell; summed MSE over the d columns on the [-1, 1] scale "
             "(predicted: the planner's worst case)"), "",
             ("| d | ε | joint CoCo pred | meas | users split pred | meas | ε split pred | meas | meas joint/users | "
             "meas joint/ε | planner | shuffled joint pred | meas | planner with δ = 1e-6 |"), "|" + "---|" * 14]
    for r in rows:
        lines.append(f"| {r['d']} | {r['epsilon']:g} | {r['pred_joint']:.4g} | {r['meas_joint']:.4g} | "
                     f"{r['pred_users']:.4g} | {r['meas_users']:.4g} | {r['pred_epsilon']:.4g} | "
                     f"{r['meas_epsilon']:.4g} | {r['meas_joint'] / r['meas_users']:.2f} | "
                     f"{r['meas_joint'] / r['meas_epsilon']:.2f} | {r['planner']} | {r['pred_shuffled']:.4g} | "
                     f"{r['meas_shuffled']:.4g} | {r['planner_shuffle']} |")
    (out / "joint_means.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    assert all(math.isfinite(r["meas_joint"]) for r in rows)


if __name__ == "__main__":
    main()
