"""Which split does the planner choose on its own (EXPLAIN only) for 2-3 means at high ε, and λ per aggregate."""
import numpy as np, pandas as pd, ldpql, re
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid
for N in (100, 1000, 10_000, 100_000):
    con = ldpql.connect(evaluation=True)
    df = pd.DataFrame({c: np.random.default_rng(0).uniform(0, 100, N) for c in "abc"})
    con.register("t", df, private={c: {"between": (0, 100), "not_null": True} for c in "abc"}, budget=1e9)
    for eps in (4, 8, 12, 16, 20, 30):
        for aggs in ("LDP_MEAN(a), LDP_MEAN(b)", "LDP_MEAN(a), LDP_MEAN(b), LDP_MEAN(c)", "LDP_MEAN(a), LDP_COUNT(b > 50)",
                     "LDP_MEAN(a), LDP_HISTOGRAM(b)"):
            try:
                ex = str(con.sql(f"EXPLAIN SELECT {aggs} FROM t EPSILON {eps}"))
            except Exception as e:
                print(N, eps, aggs, "ERR", str(e).splitlines()[0]); continue
            m = [l.strip() for l in ex.splitlines() if "mechanism *" in l][0]
            print(f"N={N} eps={eps} [{aggs}] first: {m}")
