"""LDP_SUM over a nullable column (NULLs skipped, the default): the truth can lie below n * low, outside the
'feasible range' reporting.feasible() clips the answer and its interval to."""
import sys
import numpy as np, pandas as pd
import ldpql
print(ldpql.__file__, file=sys.stderr)

n = 2000
rng = np.random.default_rng(1)
x = rng.uniform(10, 20, n)
x[rng.random(n) < 0.5] = np.nan          # half the users have no value
con = ldpql.connect(evaluation=True, seed=3)
con.register("t", pd.DataFrame({"x": x}), private={"x": (10, 20)}, budget=1e9)
print("true sum over present:", np.nansum(x), "n*low =", n * 10)
q = "SELECT LDP_SUM(x) FROM t EPSILON 4"
print(con.sql(f"EXPLAIN {q}").render())
print(con.sql(q + " OPTIONS (seed = 1)").render())
print(con.sql(f"EVALUATE {q} REPEAT 300").render())
