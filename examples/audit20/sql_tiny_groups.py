"""(1b) End to end: SELECT g, LDP_MEAN(x) ... GROUP BY g with groups of 1-5 users, EVALUATE REPEAT r, PM (planner) or
forced Hybrid, ε 0.5-20, confidence 0.9/0.95. Per group size: least and mean coverage over its groups, and the mean
shown half-width (0..100) from one SELECT-like measure (the rmse column is printed too). Run under both trees."""
import sys, time, numpy as np, pandas as pd, ldpql
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
mech = sys.argv[2] if len(sys.argv) > 2 else "planner"
epss = [float(e) for e in (sys.argv[3].split(",") if len(sys.argv) > 3 else "0.5,1,2,3,4,8,16,20".split(","))]
shapes = {"all100": lambda n: [100.0] * n, "all0": lambda n: [0.0] * n, "all97.5": lambda n: [97.5] * n,
          "1x100,rest0": lambda n: [100.0] + [0.0] * (n - 1), "1x0,rest95": lambda n: [0.0] + [95.0] * (n - 1),
          "1x100,rest40": lambda n: [100.0] + [40.0] * (n - 1)}
rows, gid, meta = [], 0, {}
for n in (1, 2, 3, 4, 5):
    for name, f in shapes.items():
        if n == 1 and name not in ("all100", "all0", "all97.5"):
            continue
        for v in f(n):
            rows.append((gid, v))
        meta[gid] = (n, name); gid += 1
df = pd.DataFrame(rows, columns=["g", "x"])
agg = "LDP_MEAN(x)" if mech == "planner" else f"LDP_MEAN(x, mechanism => '{mech}')"
print(f"{ldpql.__file__} {mech} reps={reps}")
for eps in epss:
    for conf in (0.9, 0.95):
        con = ldpql.connect(evaluation=True)
        con.register("t", df, private={"x": {"between": (0, 100), "not_null": True}}, public=["g"], budget=1e12)
        q = f"SELECT g, {agg} FROM t GROUP BY g EPSILON {eps} OPTIONS (confidence = {conf}, seed = 3)"
        t = time.time()
        out = con.sql(f"EVALUATE {q} REPEAT {reps}").df()
        el = time.time() - t
        sel = con.sql(q).df()
        lo, hi = [c for c in sel.columns if "low" in c.lower()], [c for c in sel.columns if "high" in c.lower()]
        half = {int(g): (float(h) - float(l)) / 2 for g, l, h in zip(sel["g"], sel[lo[0]], sel[hi[0]])} if lo and hi else {}
        out["n"] = [meta[int(g)][0] for g in out["group"]]
        out["shape"] = [meta[int(g)][1] for g in out["group"]]
        for n, sub in out.groupby("n"):
            i = sub.coverage.idxmin()
            hw = np.mean([half.get(int(g), np.nan) for g in sub["group"]])
            flag = " <<<" if sub.coverage.min() < conf - 0.02 - 2 * np.sqrt(conf * (1 - conf) / reps) else ""
            print(f"eps={eps} conf={conf} n={n}: min cov {sub.coverage.min():.3f} ({sub['shape'][i]}) mean {sub.coverage.mean():.3f} "
                  f"one-SELECT half {hw:.3g} [{el:.0f}s]{flag}", flush=True)
