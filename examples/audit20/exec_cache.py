"""(3) The executor's value-count cache: do seeded EVALUATE runs give the same per-run answers as before (0439834)?
Prints EVALUATE's mean_estimate / rmse / bias with repr, and the first SELECT with the same seed, for statements that
mix aggregates, WHERE, GROUP BY, users splits, exact-path and per-user aggregates; run under both trees and diff.
Differences are expected only in coverage where the interval changed (λ ≤ 16, users split)."""
import sys, numpy as np, pandas as pd, ldpql
rng = np.random.default_rng(11)
N = 3000
df = pd.DataFrame({"x": np.round(rng.uniform(0, 100, N), 1), "y": rng.integers(0, 10, N).astype(float),
                   "c": rng.choice(["a", "b", "c", "d"], N), "g": rng.integers(0, 4, N)})
con = ldpql.connect(evaluation=True)
con.register("t", df, private={"x": {"between": (0, 100), "not_null": True}, "y": {"between": (0, 9), "not_null": True},
                               "c": ["a", "b", "c", "d"]}, public=["g"], budget=1e12)
stmts = [
    "SELECT LDP_MEAN(x) FROM t EPSILON 2",
    "SELECT LDP_MEAN(x), LDP_SUM(y) FROM t EPSILON 2",
    "SELECT LDP_MEAN(x), LDP_MEAN(y) FROM t EPSILON 2 OPTIONS (split = 'users')",
    "SELECT LDP_MEAN(x), LDP_MEAN(x) FROM t EPSILON 2 OPTIONS (split = 'users')",
    "SELECT g, LDP_MEAN(x) FROM t GROUP BY g EPSILON 2",
    "SELECT g, LDP_MEAN(x), LDP_COUNT(x > 50) FROM t GROUP BY g EPSILON 2",
    "SELECT LDP_MEAN(x) FROM t WHERE g < 2 EPSILON 2",
    "SELECT LDP_MEAN(x), LDP_HISTOGRAM(c) FROM t EPSILON 2",
    "SELECT LDP_MEAN(x), LDP_HISTOGRAM(c) FROM t EPSILON 2 OPTIONS (split = 'users')",
    "SELECT LDP_MEAN(x, mechanism => 'duchi'), LDP_MEAN(x, mechanism => 'laplace') FROM t EPSILON 2",
    "SELECT LDP_MEAN(x) FROM t EPSILON 16",
    "SELECT g, LDP_MEAN(x) FROM t GROUP BY g EPSILON 16",
]
for s in stmts:
    for seed in (1, 2):
        q = s.replace("OPTIONS (", f"OPTIONS (seed = {seed}, ") if "OPTIONS (" in s else s + f" OPTIONS (seed = {seed})"
        try:
            ev = con.sql(f"EVALUATE {q} REPEAT 5").df()
            sel = con.sql(q).df()
            ev1 = con.sql(f"EVALUATE {q} REPEAT 1").df()
        except Exception as e:
            print(q, "->", type(e).__name__, e); continue
        print("##", q)
        for _, r in ev.iterrows():
            print("  R5", r["output"], r["group"], r["value"], repr(r["truth"]), repr(r["mean_estimate"]), repr(r["rmse"]), repr(r["coverage"]))
        for _, r in ev1.iterrows():
            print("  R1", r["output"], r["group"], r["value"], repr(r["mean_estimate"]))
        print("  SEL", [tuple(repr(v) for v in row) for row in sel.itertuples(index=False)][:6], flush=True)
