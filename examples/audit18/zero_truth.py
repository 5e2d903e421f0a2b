"""A count whose truth is 0 (and one at n), at 80% and 95%: raw vs shown coverage on the same 400 runs."""
import sys, numpy as np, pandas as pd
sys.path.insert(0, "/work/main/examples/audit18")
import harness as H, ldpql
print(ldpql.__file__)
n = 1000
con = ldpql.connect(evaluation=True, seed=5)
con.register("t", pd.DataFrame({"b": np.zeros(n, bool), "a": np.ones(n, bool)}), private={"b": bool, "a": bool}, budget=1e12)
for conf in (0.8, 0.95):
    res, rows = H.evaluate(con, f"SELECT LDP_COUNT(b), LDP_COUNT(a) FROM t EPSILON 1 OPTIONS (confidence = {conf})", 400)
    print("confidence", conf); H.summary(rows)
