"""Audit 9: the shown rank error of a median beside a mean when the statement splits users (split = 'users': the
search asks 1,000 of 2,000 users and stands for all): coverage over 200 statements of the rank error the result
shows (its widened note, or the predicted error), against the whole table's ranks. Output: split_check.txt.

    nice python examples/audit9/split_check.py
"""

import re

import numpy as np
import pyarrow as pa

import ldpql

rng = np.random.default_rng(2)
N = 2000
x = np.clip(np.rint(rng.normal(5000, 1500, N)), 0, 10000).astype(np.int64)
y = rng.uniform(0, 1, N)
con = ldpql.connect(seed=3, evaluation=True)
con.register("t", pa.table({"x": x, "y": y}), private={"x": {"between": (0, 10000), "integer": True}, "y": {"between": (0, 1)}}, budget=1e9)
F = np.sort(x)
for eps, mech in ((16, "naive_nbs"), (16, "bayess"), (30, "naive_nbs")):
    sql = f"SELECT LDP_MEDIAN(x, mechanism => '{mech}'), LDP_MEAN(y) FROM t EPSILON {eps} OPTIONS (split = 'users')"
    ex = con.sql("EXPLAIN " + sql).render()
    pred = [l for l in ex.splitlines() if "predicted" in l and "rank" in l]
    errs, shown = [], []
    for i in range(200):
        r = con.sql(sql)
        v = r.fetchone()[0]
        lo = np.searchsorted(F, v, "left") / N; hi = np.searchsorted(F, v, "right") / N
        errs.append(max(0, lo - 0.5, 0.5 - hi))
        note = [n for n in r.notes if "quantile of x" in n]
        a = float(note[0].split("±")[1].split()[0]) if note else float(re.search(r"rank error \(fraction of users\) ±([\d.]+)", " ".join(r.notes)).group(1))
        shown.append(a)
    errs, shown = np.array(errs), np.array(shown)
    print(eps, mech, pred[1].strip() if len(pred) > 1 else pred, "coverage", np.mean(errs <= shown), "mean shown", round(shown.mean(), 4), "rms err", round(float(np.sqrt(np.mean(errs**2))), 4), flush=True)
