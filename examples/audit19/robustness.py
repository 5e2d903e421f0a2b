"""Robustness: ε = 30 with n up to 10^8 (λ <= 16), cost of rare.halfwidth, many GROUP BY groups, NULL/NaN with
nulls => 'midpoint', n = 1 and groups of 1-2 users; peak memory."""
import resource, time, math, numpy as np, pandas as pd, ldpql
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid
from sqlcheck import evaluate

def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

print("== rare.halfwidth cost (uncached) at ε = 30 and 20, 90%")
for make, eps in ((Piecewise, 30.0), (Hybrid, 30.0), (Piecewise, 20.0)):
    r = make(eps)
    for n in (10, 10**3, 10**5, 10**6, 10**7, 10**8):
        if n * r.far_share > rare.FEW:
            print(f"  {r.name} eps={eps} n={n}: λ = {n*r.far_share:.3g} > 16, not applied"); continue
        rare._SEEN.clear()
        t = time.time()
        h = rare.halfwidth(r, n, 0.37, 0.9)
        print(f"  {r.name} eps={eps} n={n:.0e} λ={n*r.far_share:.3g}: half {h:.3g} in {time.time()-t:.2f}s; maxrss {rss():.0f} MB", flush=True)

print("== SELECT / EVALUATE at ε = 30, n = 10^6")
rng = np.random.default_rng(1)
for name, v in (("uniform", rng.uniform(0, 100, 10**6)), ("all at 50", np.full(10**6, 50.0)), ("all at 70", np.full(10**6, 70.0))):
    q, out, mech, sel, el = evaluate(v, "LDP_MEAN(x)", 30, 0.9, 100)
    print(f"  {name}: {mech[0].strip()} SELECT {[l.strip() for l in sel.splitlines() if '±' in l]} "
          f"EVALUATE 100 runs: coverage {out.coverage[0]:.2f} rmse {out.rmse[0]:.3g} [{el:.0f}s] maxrss {rss():.0f} MB", flush=True)

print("== GROUP BY with 2,000 groups of distinct sizes (1..2000 users... capped), ε = 16")
sizes = np.arange(1, 401)
g = np.repeat(np.arange(len(sizes)), sizes)
v = rng.uniform(0, 100, len(g))
con = ldpql.connect(evaluation=True)
con.register("t", pd.DataFrame({"x": v, "g": g}), private={"x": {"between": (0, 100), "not_null": True}}, public=["g"], budget=1e9)
rare._SEEN.clear()
for rep in range(2):
    t = time.time()
    res = con.sql(f"SELECT g, LDP_MEAN(x) FROM t GROUP BY g EPSILON 16 OPTIONS (seed = {rep + 1})")
    print(f"  {len(sizes)} groups, {len(g)} users: {time.time()-t:.1f}s (run {rep+1}; cache {len(rare._SEEN)} entries); maxrss {rss():.0f} MB", flush=True)

print("== NULL / NaN with nulls => 'midpoint' (nullable column), ε = 16, n = 30, 90%")
vals = np.r_[np.full(18, 100.0), [np.nan] * 6, [None] * 6].astype(float)
con = ldpql.connect(evaluation=True)
df = pd.DataFrame({"x": pd.array(np.r_[np.full(18, 100.0), [np.nan] * 6, np.full(6, 1.0)], dtype="float64")})
df.loc[24:, "x"] = None
con.register("t", df, private={"x": {"between": (0, 100)}}, budget=1e9)
for agg in ("LDP_MEAN(x, nulls => 'midpoint')", "LDP_SUM(x, nulls => 'midpoint')", "LDP_MEAN(x)"):
    q = f"SELECT {agg} FROM t EPSILON 16 OPTIONS (confidence = 0.9, seed = 1)"
    ex = str(con.sql("EXPLAIN " + q))
    m = [l.strip() for l in ex.splitlines() if "mechanism *" in l]
    out = con.sql(f"EVALUATE {q} REPEAT 1000").df()
    print(f"  {q}: {m} truth {out.truth[0]:.4g} coverage {out.coverage[0]:.3f} (sd {math.sqrt(out.coverage[0]*(1-out.coverage[0])/1000):.3f})", flush=True)
    print("   ", [l.strip() for l in str(con.sql(q)).splitlines() if "±" in l])

print("== n = 1 and n = 2 (no GROUP BY), ε = 2, 8, 16, 30")
for n in (1, 2):
    for eps in (2, 8, 16, 30):
        q, out, mech, sel, el = evaluate(np.full(n, 100.0), "LDP_MEAN(x)", eps, 0.9, 2000)
        print(f"  n={n} eps={eps} all at 100: {mech[0].strip()} coverage {out.coverage[0]:.3f} (sd {out.sd[0]:.3f}, 2000) "
              f"SELECT {[l.strip() for l in sel.splitlines() if '±' in l]}", flush=True)
print(f"peak maxrss {rss():.0f} MB")
