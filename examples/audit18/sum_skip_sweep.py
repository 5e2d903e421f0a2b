"""Nullable LDP_SUM (NULLs skipped by default) on a domain not containing 0: shown vs raw coverage by present share."""
import sys, numpy as np, pandas as pd
sys.path.insert(0, "/work/main/examples/audit18")
import harness as H, ldpql
print(ldpql.__file__)
for share in (0.5, 0.7, 0.8, 0.9, 1.0):
    n = 2000
    rng = np.random.default_rng(1)
    x = rng.uniform(10, 20, n)
    x[rng.random(n) >= share] = np.nan
    con = ldpql.connect(evaluation=True, seed=3)
    con.register("t", pd.DataFrame({"x": x, "g": rng.integers(0, 2, n)}), private={"x": (10, 20)}, public=["g"],
                 budget=1e9)
    for q in ("SELECT LDP_SUM(x) FROM t EPSILON 2", "SELECT LDP_AVG(x) FROM t EPSILON 2"):
        res, rows = H.evaluate(con, q, 300)
        print(f"present {share} | {q}")
        H.summary(rows)
