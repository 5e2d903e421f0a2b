"""(2) Did the planner's choices change with the unseen term? EXPLAIN of multi-aggregate statements at ε 0.5-16 and
N 100-10^6 (split auto and users); prints the mechanism / split / predicted-se lines; run under both trees, diff."""
import sys, numpy as np, pandas as pd, ldpql
rng = np.random.default_rng(3)
for N in (100, 1000, 10_000, 100_000, 1_000_000):
    df = pd.DataFrame({"x": rng.uniform(0, 100, N), "y": rng.uniform(0, 100, N), "c": rng.choice(list("abcd"), N)})
    con = ldpql.connect(evaluation=True)
    con.register("t", df, private={"x": {"between": (0, 100), "not_null": True}, "y": {"between": (0, 100), "not_null": True},
                                   "c": list("abcd")}, budget=1e12)
    for eps in (0.5, 1, 2, 4, 8, 16):
        for aggs in ("LDP_MEAN(x), LDP_MEAN(y)", "LDP_MEAN(x), LDP_SUM(y), LDP_HISTOGRAM(c)", "LDP_MEAN(x), LDP_COUNT(x > 50)",
                     "LDP_COUNT(x > 50), LDP_COUNT(y > 20)"):
            for opt in ("", " OPTIONS (split = 'users')"):
                q = f"SELECT {aggs} FROM t EPSILON {eps}{opt}"
                try:
                    txt = str(con.sql("EXPLAIN " + q))
                except Exception as e:
                    txt = f"ERROR {type(e).__name__}: {e}"
                print(f"## N={N} {q}")
                for l in txt.splitlines():
                    if any(k in l.lower() for k in ("mechanism", "split", "se ", "error", "users", "share", "expected")):
                        print("   ", l.rstrip())
                print(flush=True)
