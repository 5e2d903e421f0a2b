"""(2) Predicted se (EXPLAIN) vs realised RMSE (EVALUATE) under a users split; ratio should be in 0.6-1.4.
Prints the raw EXPLAIN lines with the prediction; run under both trees."""
import sys, re, numpy as np, pandas as pd, ldpql
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
rng = np.random.default_rng(9)
for N in (100, 1000, 10_000, 100_000):
    for shape in ("uniform", "all50", "1 at 100"):
        x = {"uniform": rng.uniform(0, 100, N), "all50": np.full(N, 50.0), "1 at 100": np.r_[100.0, np.zeros(N - 1)]}[shape]
        df = pd.DataFrame({"x": x, "y": x})
        con = ldpql.connect(evaluation=True)
        con.register("t", df, private={"x": {"between": (0, 100), "not_null": True}, "y": {"between": (0, 100), "not_null": True}}, budget=1e12)
        for eps in (1, 4, 16):
            q = f"SELECT LDP_MEAN(x), LDP_MEAN(y) FROM t EPSILON {eps} OPTIONS (split = 'users', seed = 2)"
            ex = str(con.sql("EXPLAIN " + q))
            preds = re.findall(r"(?:se|error)[^\n]*?([0-9.]+(?:e-?[0-9]+)?)", ex)
            out = con.sql(f"EVALUATE {q} REPEAT {reps}").df()
            lines = [l.strip() for l in ex.splitlines() if re.search(r"\bse\b|error", l)]
            print(f"N={N} {shape} eps={eps}: rmse {out.rmse.round(5).tolist()} coverage {out.coverage.round(3).tolist()} | {lines[:3]}", flush=True)
