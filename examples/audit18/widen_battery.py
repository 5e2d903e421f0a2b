"""Raw vs shown coverage on the same EVALUATE runs, across statement paths (300 runs each)."""
import sys, time, numpy as np, pandas as pd
sys.path.insert(0, "/work/main/examples/audit18")
import harness as H, ldpql
print(ldpql.__file__)
rng = np.random.default_rng(7)
n = 1000
cats = [f"c{i}" for i in range(16)]
p = np.array([0.4, 0.25, 0.15, 0.1] + [0.1 / 6] * 6 + [0.0] * 6); p /= p.sum()
df = pd.DataFrame({
    "c": rng.choice(cats, n, p=p),
    "b": rng.random(n) < 0.003,          # a count near 0
    "a": rng.random(n) < 0.997,          # a count near n
    "x": np.clip(rng.normal(0.97, 0.05, n), 0, 1),   # a mean near its domain's top
    "y": np.where(rng.random(n) < 0.05, rng.uniform(0, 1, n), np.nan),   # nullable, few present
    "g": rng.integers(0, 3, n),
})
con = ldpql.connect(evaluation=True, seed=11)
con.register("t", df, private={"c": cats, "b": bool, "a": bool, "x": (0, 1), "y": (0, 1)}, public=["g"], budget=1e12)
STMTS = [
    "SELECT LDP_HISTOGRAM(c) FROM t EPSILON 1",
    "SELECT LDP_HISTOGRAM(c) FROM t EPSILON 1 OPTIONS (confidence = 0.8)",
    "SELECT LDP_HISTOGRAM(c, postprocess => 'none') FROM t EPSILON 1",
    "SELECT LDP_HISTOGRAM(c, postprocess => 'clip') FROM t EPSILON 1",
    "SELECT LDP_TOPK(c, 4) FROM t EPSILON 1",
    "SELECT LDP_TOPK(c, 4, postprocess => 'none') FROM t EPSILON 1",
    "SELECT LDP_COUNT(b), LDP_COUNT(a), LDP_AVG(x) FROM t EPSILON 1 OPTIONS (confidence = 0.8)",
    "SELECT g, LDP_COUNT(b), LDP_AVG(y) FROM t GROUP BY g EPSILON 1",
    "SELECT LDP_HISTOGRAM(c), LDP_AVG(x) FROM t EPSILON 2",
    "SELECT LDP_AVG(x) FROM t EPSILON 1 OPTIONS (model = 'shuffle', delta = 1e-6)",
]
for q in STMTS:
    t0 = time.process_time()
    try:
        res, rows = H.evaluate(con, q, 300)
    except Exception as e:
        print("ERROR", q, type(e).__name__, e); continue
    print(f"{q}   [{time.process_time() - t0:.1f} s cpu]")
    out = H.summary(rows, top=6)
    raw = np.mean([o[2] for o in out]); sh = np.mean([o[3] for o in out])
    print(f"  mean over rows: raw {raw:.3f} shown {sh:.3f}; rows shown>raw+0.03: {sum(o[3] > o[2] + 0.03 for o in out)}"
          f"/{len(out)}; max shown-raw {max(o[3] - o[2] for o in out):.3f}")
