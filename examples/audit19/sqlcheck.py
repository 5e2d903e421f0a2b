"""End-to-end: EVALUATE through the public SQL API (the interval a SELECT shows), with binomial sd."""
import math, sys, time
import numpy as np, pandas as pd, ldpql

def evaluate(values, sql_agg, eps, conf, reps, seed=1, group=None, between=(0, 100), extra_cols=None, not_null=True,
             where="", options=""):
    con = ldpql.connect(evaluation=True)
    df = pd.DataFrame({"x": np.asarray(values, float)})
    public = []
    if group is not None:
        df["g"] = group
        public = ["g"]
    if extra_cols:
        for k, v in extra_cols.items():
            df[k] = v
    priv = {"x": {"between": between, "not_null": not_null}} if not_null else {"x": {"between": between}}
    for c in (extra_cols or {}):   # (audit 20: z and w too)
        if c in ("y", "z", "w"):
            priv[c] = dict(priv["x"])
    con.register("t", df, private=priv, public=public or None, budget=1e9)
    sel = "g, " if group is not None else ""
    gb = " GROUP BY g" if group is not None else ""
    q = f"SELECT {sel}{sql_agg} FROM t{where}{gb} EPSILON {eps} OPTIONS ({options}confidence = {conf}, seed = {seed})"
    t = time.time()
    out = con.sql(f"EVALUATE {q} REPEAT {reps}").df()
    el = time.time() - t
    ex = con.sql("EXPLAIN " + q)
    mech = [l for l in str(ex).splitlines() if "mechanism *" in l]
    sel_out = str(con.sql(q))
    out["sd"] = np.sqrt(out["coverage"] * (1 - out["coverage"]) / reps)
    return q, out, mech, sel_out, el

if __name__ == "__main__":
    pass
