"""Audit 17: which mechanism the planner itself picks on each sim17 cell (EXPLAIN, no mechanism forced)."""
import re
import numpy as np, pyarrow as pa, ldpql
from sim17 import cells
for name, spec in cells().items():
    group = spec.get("group")
    cols = {"x": spec["x"].astype(np.int64)}
    if group:
        cols["g"] = np.repeat(list(group), list(group.values()))
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table(cols), private={"x": {"between": (0, spec["K"] - 1), "integer": True, "not_null": True}},
                 public=["g"] if group else [], budget=1e12)
    items = ", ".join(f"LDP_QUANTILE(x, {t}) AS q{i}" for i, t in enumerate(spec["taus"]))
    ex = str(con.sql(f"EXPLAIN SELECT {'g, ' if group else ''}{items} FROM t{' GROUP BY g' if group else ''} "
                     f"EPSILON {spec['eps']}"))
    chosen = sorted(set(re.findall(r"mechanism \* (\w+)", ex)))
    hist = [l.strip() for l in ex.splitlines() if l.strip().startswith(("├─ histogram", "├─ zoom"))][:2]
    print(f"{name}: K={spec['K']} n={len(spec['x'])} eps={spec['eps']} taus={spec['taus']}: planner picks {chosen}")
    for l in hist:
        print("     ", l[:150])
