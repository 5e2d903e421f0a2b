"""SELECT outputs (seeded) for statements where λ > 16 and for several where λ <= 16; run under both trees and diff."""
import numpy as np, pandas as pd, ldpql
rng = np.random.default_rng(0)
stmts = []
for n in (50, 300, 2000, 20000):
    df = pd.DataFrame({"x": rng.uniform(0, 100, n), "g": rng.integers(0, 3, n)})
    con = ldpql.connect(evaluation=True)
    con.register("t", df, private={"x": {"between": (0, 100), "not_null": True}}, public=["g"], budget=1e9)
    for eps in (0.5, 1, 2, 4, 8, 12, 16):
        for agg in ("LDP_MEAN(x)", "LDP_SUM(x)", "LDP_MEAN(x, mechanism => 'hybrid')", "LDP_MEAN(x, mechanism => 'piecewise')"):
            for gb in ("", " GROUP BY g"):
                sel = "g, " if gb else ""
                q = f"SELECT {sel}{agg} FROM t{gb} EPSILON {eps} OPTIONS (confidence = 0.9, seed = 3)"
                res = con.sql(q)
                ex = str(con.sql("EXPLAIN " + q))
                mech = [l.split("*")[1].split(":")[0].strip() for l in ex.splitlines() if "mechanism *" in l][0]
                from ldpql.mechanisms.piecewise import Piecewise
                from ldpql.mechanisms.hybrid import Hybrid
                far = {"piecewise": Piecewise, "hybrid": Hybrid}.get(mech)
                r = far(eps) if far else None
                fs = (r.outside if mech == "piecewise" else r.beta * r.pm.outside + 1 - r.beta) if r else float("nan")
                lam = (n / (3 if gb else 1)) * fs
                body = " | ".join(l.strip() for l in str(res).splitlines() if "±" in l)
                print(f"n={n} eps={eps} {agg}{gb} mech={mech} lam~{lam:.3g} :: {body}")
