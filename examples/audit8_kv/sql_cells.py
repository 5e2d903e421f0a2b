"""A few accuracy cells through SQL (EVALUATE ... REPEAT 200 of a key-value statement, DuckDB backend): per key,
the truth (noise off on the assembled rows), bias, RMSE and the 95% interval coverage; the EXPLAIN prediction next
to the realised RMSE. Writes sql_cells.csv next to this file."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

import ldpql

KEYS = [f"k{j}" for j in range(5)]


def frame(n: int, many: bool, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pop = 1 / np.arange(1, 6)
    rows = []
    for u in range(n):
        for j in rng.choice(5, 3 if many else int(rng.integers(1, 3)), replace=False, p=pop / pop.sum()):
            rating = None if rng.random() < 0.5 else float(np.clip(1 + j + rng.normal(0, 0.5), 1, 5))
            rows.append((u, KEYS[j], rating))
    return pd.DataFrame(rows, columns=["uid", "k", "rating"])


def main() -> None:
    out = []
    for n, many in ((2000, False), (20000, True)):
        con = ldpql.connect(evaluation=True, seed=11)
        con.register("r", frame(n, many, n), private={"k": KEYS, "rating": (1, 5)}, public=["uid"],
                     privacy_unit="uid", sparsity=2, budget=10)
        q = "SELECT k, LDP_COUNT(*), LDP_AVG(rating), LDP_SUM(rating) FROM r GROUP BY k EPSILON 1"
        pred = con.sql("EXPLAIN " + q).plan.predicted()
        res = con.sql(f"EVALUATE {q} REPEAT 200")
        for output, key, truth, mean, bias, rmse, cov in res.fetchall():
            kind = {"ldp_count": "count", "ldp_avg_rating": "mean", "ldp_sum_rating": "sum"}[output]
            out.append({"n": n, "many_keys": many, "output": output, "key": key, "truth": truth, "bias": bias,
                        "rmse": rmse, "coverage95": cov, "explain_se": pred[kind],
                        "rmse_over_explain": None if rmse is None else rmse / pred[kind]})
            print(out[-1], flush=True)
    with Path(__file__).with_name("sql_cells.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)


if __name__ == "__main__":
    main()
