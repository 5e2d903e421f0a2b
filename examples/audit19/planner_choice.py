"""Which mechanism the planner picks for LDP_MEAN (NOT NULL, [0, 100]) where λ <= 16, on both trees (EXPLAIN only)."""
import numpy as np, pandas as pd, ldpql, collections
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid
def lam(m, eps, n):
    if m == "piecewise": return n * Piecewise(eps).outside
    if m == "hybrid":
        r = Hybrid(eps); return n * (r.beta * r.pm.outside + 1 - r.beta)
    return float("nan")
tab = collections.Counter()
for n in (1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 100000):
    con = ldpql.connect(evaluation=True)
    con.register("t", pd.DataFrame({"x": np.linspace(0, 100, n)}), private={"x": {"between": (0, 100), "not_null": True}}, budget=1e9)
    row = []
    for eps in (0.5, 1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 30):
        ex = str(con.sql(f"EXPLAIN SELECT LDP_MEAN(x) FROM t EPSILON {eps}"))
        m = [l.split("*")[1].split(":")[0].strip() for l in ex.splitlines() if "mechanism *" in l][0]
        l = lam(m, eps, n)
        row.append(f"{eps}:{m[:2]}{'*' if l <= 16 else ''}")
        tab[(m, l <= 16)] += 1
    print(f"n={n}: " + " ".join(row))
print("(* = λ <= 16: rare.widen applies)", dict(tab))
